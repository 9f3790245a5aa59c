"""``python -m table.cli``: the same as ``tablectl``."""

from table.cli import main

main(prog_name="tablectl")
