"""veriloop.engines."""
