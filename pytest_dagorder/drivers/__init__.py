"""The drivers of a planned session: the serial run in-process, the xdist run (distributed/)."""
