"""The pure core: graph, scheduler state machine, placement, wording.

Plain values in, decisions out; imports no test framework or process transport,
and names none (tests/test_layers.py checks)."""
