"""`python -m vtop` runs the command line."""

from vtop.cli import console

console()
