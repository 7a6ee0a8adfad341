"""Running a command on bad input: exit status 2 and one line on stderr."""

from __future__ import annotations

from click.testing import CliRunner

from rolloutlog.cli import main


def bad_input(args: list[str]) -> str:
    """The one line `rolloutlog ARGS` prints on stderr when it refuses its input."""
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]
