"""veriloop.server."""
