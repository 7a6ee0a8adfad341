"""How every command reports bad input: one line on stderr, exit status 2, no traceback."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, NoReturn, ParamSpec, TypeVar

import click

from rolloutlog.events.errors import EventError, JsonlError, LogError

BAD_INPUT_EXIT = 2
_TEMPORARY = re.compile(r"\.(.+)\.\d+\.tmp")
BAD_INPUT_ERRORS = (LogError, EventError, JsonlError, OSError, UnicodeDecodeError)

P = ParamSpec("P")
R = TypeVar("R")


class BadInput(click.ClickException):
    """A file, log or option that cannot be used: `rolloutlog: error: ...`, exit status 2."""

    exit_code = BAD_INPUT_EXIT

    def show(self, file: IO[str] | None = None) -> None:
        click.echo(f"rolloutlog: error: {self.format_message()}", err=True, file=file)


def os_problem(error: BaseException, path: str | os.PathLike[str] | None = None) -> str:
    """An OS error in the words every command uses: `PATH: no such file`, not `[Errno 2] No
    such file or directory: 'PATH'`; the file is named unless it is `path`, which the
    message names already."""
    if not isinstance(error, OSError) or error.strerror is None:
        return str(error)
    reason = "no such file" if error.errno == errno.ENOENT else error.strerror.lower()
    if error.filename is None:
        return reason
    filename = _written(Path(os.fsdecode(error.filename)))
    named = path is not None and filename == Path(path)
    return reason if named else f"{filename}: {reason}"


def _written(path: Path) -> Path:
    """The file a whole-file write was for, where `path` is its temporary (`.NAME.PID.tmp`,
    `events.whole_file`): the user named that file, never the temporary."""
    match = _TEMPORARY.fullmatch(path.name)
    return path if match is None else path.with_name(match.group(1))


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
            fail(os_problem(error))

    return wrapper


@contextlib.contextmanager
def _usage_as_bad_input() -> Iterator[None]:
    """Click's usage errors (a bad option value, a missing argument, excluded options) as
    one line like every other bad input, instead of click's usage block."""
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        raise  # not an error: the help it asks for
    except click.UsageError as error:
        raise BadInput(error.format_message()) from error


class OneLineCommand(click.Command):
    """A command whose usage errors read as `rolloutlog: error: ...`, exit status 2."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _usage_as_bad_input():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _usage_as_bad_input():
            return super().invoke(ctx)


class OneLineGroup(OneLineCommand, click.Group):
    """The command group: the usage errors of every command in it read as one line too."""


def command(name: str) -> Callable[[Callable[..., Any]], click.Command]:
    """`click.command(name)` with usage errors as one line (`OneLineCommand`)."""
    return click.command(name, cls=OneLineCommand)
