"""Every use of an internal of pytest, pluggy, xdist or the interpreter, one function each."""
