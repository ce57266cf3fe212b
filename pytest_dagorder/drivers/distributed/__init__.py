"""The xdist run: the controller's scheduler, the worker, and the wire between them."""
