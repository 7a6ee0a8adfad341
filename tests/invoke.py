"""Running `rolloutlog` in process, as the CLI tests do: one `run`, one check of a refusal."""

from __future__ import annotations

from click.testing import CliRunner, Result

from rolloutlog.cli import main


def run(*args: object) -> Result:
    """`rolloutlog ARGS`, each argument as its string (paths included)."""
    return CliRunner().invoke(main, [str(arg) for arg in args])


def one_line_error(result: Result) -> str:
    """The error a bad input gives: exit status 2, one line on stderr, no traceback."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rolloutlog: error: "), result.stderr
    return lines[0]


def bad_input(args: list[str]) -> str:
    """The one line `rolloutlog ARGS` prints on stderr when it refuses its input."""
    return one_line_error(run(*args))
