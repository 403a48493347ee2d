"""veriloop."""
