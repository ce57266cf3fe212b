"""The pure core: graph, scheduler state machine, placement, wording.

Plain values in, decisions out; imports neither pytest nor xdist."""
