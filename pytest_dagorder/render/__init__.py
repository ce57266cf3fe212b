"""Pictures of a run: the graph export (DOT, JSON) and the timeline."""
