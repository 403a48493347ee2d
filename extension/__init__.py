"""The Chrome extension (package data only): ``veriloop extension path`` writes it out with the snapshot script."""
