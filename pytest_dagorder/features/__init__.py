"""What a user switches on around a run: recorded durations, --dag-shard, the stall report."""
