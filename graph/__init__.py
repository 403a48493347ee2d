"""veriloop.graph."""
