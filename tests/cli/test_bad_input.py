"""Bad input on every command: one line `rolloutlog: error: ...`, exit status 2, naming the
input and the problem, in the same words wherever the problem is the same."""

from __future__ import annotations

import pytest

from tests.cli.test_cli_log import EXAMPLE, one_line_error, run

SMOKE = ("--scenario", "smoke", "--steps", "2")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["simulate", *SMOKE, "--set", "nope=1"], "--set nope: unknown key"),
        (["whatif", str(EXAMPLE), "--set", "nope=1"], "--set nope: unknown key"),
        (["sweep", *SMOKE, "--set", "nope=1", "-o", "t.parquet"], "unknown key"),
        (["info", "."], "is a directory"),
        (["simulate", "--steps", "0"], "'--steps': 0 is not in the range"),
        (["show", str(EXAMPLE)], "give exactly one of --at, --group, --episode"),
        (["nosuchcommand"], "No such command 'nosuchcommand'"),
    ],
)
def test_a_usage_error_is_one_line_not_the_usage_block(args: list[str], words: str) -> None:
    assert words in one_line_error(run(*args))
