"""veriloop.llm."""
