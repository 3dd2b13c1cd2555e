"""The `delivery` command line: argument parsing (`main`), the commands, terminal progress."""

from delivery.cli.main import entry, main

__all__ = ["entry", "main"]
