"""The plan graph's runners: the plan run report and `veriloop plan demo` with its bundled project."""
