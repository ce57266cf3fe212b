"""The in-process driver: the serial run."""
