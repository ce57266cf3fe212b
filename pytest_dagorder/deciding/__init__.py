"""Every decision about a run, made once from the facts of its collection."""
