"""``python -m veriloop``: the same command as ``veriloop``."""

from veriloop.cli import app

app(prog_name="veriloop")
