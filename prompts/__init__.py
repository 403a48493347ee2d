"""veriloop.prompts."""
