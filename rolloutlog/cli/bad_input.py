"""How every command reports bad input: one line on stderr, exit status 2, no traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import IO, NoReturn, ParamSpec, TypeVar

import click

from rolloutlog.events.errors import EventError, JsonlError, LogError

BAD_INPUT_EXIT = 2
BAD_INPUT_ERRORS = (LogError, EventError, JsonlError, OSError, UnicodeDecodeError)

P = ParamSpec("P")
R = TypeVar("R")


class BadInput(click.ClickException):
    """A file, log or option that cannot be used: `rolloutlog: error: ...`, exit status 2."""

    exit_code = BAD_INPUT_EXIT

    def show(self, file: IO[str] | None = None) -> None:
        click.echo(f"rolloutlog: error: {self.format_message()}", err=True, file=file)


def fail(message: str) -> NoReturn:
    """Stop the command on bad input."""
    raise BadInput(message)


def reports_bad_input(command: Callable[P, R]) -> Callable[P, R]:
    """Turn the errors that bad input raises into `BadInput`."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except BrokenPipeError:
            raise  # the reader of stdout left (`| head`): click's main exits quietly
        except BAD_INPUT_ERRORS as error:
            fail(str(error))

    return wrapper
