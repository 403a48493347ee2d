"""veriloop.runners."""
