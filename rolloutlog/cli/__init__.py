"""The `rolloutlog` command line: where the drivers and replay's reports meet.

`main` is the entry point; each module beside it holds one command family, and `output`
the printing they share.
"""

from rolloutlog.cli.main import main

__all__ = ["main"]
