"""The xdist driver: the controller's scheduler, the worker, the wire format."""
