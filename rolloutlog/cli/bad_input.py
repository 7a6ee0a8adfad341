"""How every command reports bad input: one line on stderr, exit status 2, no traceback;
and how it ends on a signal: Ctrl-C (SIGINT) and SIGTERM unwind the command (a temporary
removed, a lock released, a log closed) and exit 130 and 143, as shells expect; SIGXFSZ
(a file-size limit, `ulimit -f`) is ignored, so that the write fails with an error the
command reports like a full disk, instead of killing it with a core dump."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, NoReturn, ParamSpec, TypeVar

import click

from rolloutlog.events.errors import EventError, JsonlError, LogError
from rolloutlog.events.output_lock import OutputBusy, holding

BAD_INPUT_EXIT = 2
_TEMPORARY = re.compile(r"\.(.+)\.\d+\.tmp")
BAD_INPUT_ERRORS = (LogError, EventError, JsonlError, OSError, UnicodeDecodeError)

# a full disk, a quota, a file-size limit: the write failed, the command says where
FULL = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file size limit reached (ulimit -f)",
}

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
    if isinstance(error, OutputBusy) and path is not None and error.path == Path(path):
        return error.reason
    if not isinstance(error, OSError) or error.strerror is None:
        return str(error)
    reason = "no such file" if error.errno == errno.ENOENT else error.strerror.lower()
    full = FULL.get(error.errno or 0)
    if error.filename is None:
        return full or reason
    filename = _written(Path(os.fsdecode(error.filename)))
    if full is not None:
        return f"{full} writing {filename}"
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
def sole_writer(path: Path) -> Iterator[None]:
    """Hold the output `path`'s lock for the block (`events.output_lock`), for a command
    that writes it more than once (a sweep's table) or reads it before writing (a resumed
    run's log); a second writer gets one line naming the holder's pid. In a folder that
    does not exist yet, or takes no file, nobody writes it: the command's own checks
    name the folder."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(holding(path))
        except OutputBusy as error:
            raise BadInput(str(error)) from error
        except OSError:
            pass
        yield


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


def _refuse_repeated(params: list[click.Parameter], args: list[str]) -> None:
    """An option that takes one value, given twice (`--scenario A --scenario B`), is
    refused: click would silently keep the last."""
    single = {
        name: param
        for param in params
        if isinstance(param, click.Option) and not (param.multiple or param.count or param.is_flag)
        for name in param.opts
    }
    seen: dict[str, list[str]] = {}
    for arg in args:
        if arg == "--":
            break
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg[:2]
        param = single.get(name)
        if param is not None and param.name is not None:
            seen.setdefault(param.name, []).append(name)
            if len(seen[param.name]) > 1:
                raise click.UsageError(
                    f"{' and '.join(dict.fromkeys(seen[param.name]))} given more than once; "
                    "it takes one value"
                )


class OneLineCommand(click.Command):
    """A command whose usage errors read as `rolloutlog: error: ...`, exit status 2, and
    that refuses a single-value option given twice."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        with _usage_as_bad_input():
            _refuse_repeated(self.get_params(ctx), args)
        return super().parse_args(ctx, args)

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


class Terminated(BaseException):
    """SIGTERM, raised where the command is, like `KeyboardInterrupt` for SIGINT."""


def _terminated(signum: int, frame: object) -> NoReturn:
    raise Terminated


class OneLineGroup(OneLineCommand, click.Group):
    """The command group: the usage errors of every command in it read as one line too,
    and a signal ends it as the module docstring says."""

    def invoke(self, ctx: click.Context) -> Any:
        before = (
            signal.signal(signal.SIGTERM, _terminated),
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN),
        )
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("rolloutlog: interrupted (SIGINT)", err=True)
            raise click.exceptions.Exit(128 + signal.SIGINT) from None
        except Terminated:
            click.echo("rolloutlog: terminated (SIGTERM)", err=True)
            raise click.exceptions.Exit(128 + signal.SIGTERM) from None
        finally:
            signal.signal(signal.SIGTERM, before[0])
            signal.signal(signal.SIGXFSZ, before[1])


def command(name: str) -> Callable[[Callable[..., Any]], click.Command]:
    """`click.command(name)` with usage errors as one line (`OneLineCommand`)."""
    return click.command(name, cls=OneLineCommand)
