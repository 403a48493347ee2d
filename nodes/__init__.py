"""veriloop.nodes."""
