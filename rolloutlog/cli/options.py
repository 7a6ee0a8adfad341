"""Options that several commands share, written once so that they read and check alike."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from rolloutlog.cli.bad_input import fail
from rolloutlog.events.output_lock import busy, writer_of
from rolloutlog.events.validate import INT64_MAX

F = TypeVar("F", bound=Callable[..., Any])

# `--steps`' bound: hours of simulation, far past any run it models, and a typo
# (`--steps 99999999999999999999999`) is refused instead of running forever
MAX_STEPS = 1_000_000
STEPS = click.IntRange(min=1, max=MAX_STEPS)

_ARROW_STREAM_START = b"\xff\xff\xff\xff"  # every rolloutlog log, closed or torn, opens so


def holds_arrow_log(path: str | os.PathLike[str]) -> bool:
    """Whether the file at `path` opens as every rolloutlog log does (False when absent
    or unreadable)."""
    try:
        with open(path, "rb") as file:
            return file.read(len(_ARROW_STREAM_START)) == _ARROW_STREAM_START
    except OSError:
        return False


class NamedPath(click.Path):
    """A path that names something: an empty one would name the current folder (and read
    it as a file, a table or a dataset), so it is refused."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not os.fspath(value):
            self.fail("an empty path names no file", param, ctx)
        return super().convert(value, param, ctx)


class WrittenFile(NamedPath):
    """A file that a command writes: its folder must exist, checked before the run (which
    would otherwise fail only when it first writes, after the work)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        folder = Path(path).parent
        if not folder.is_dir():
            self.fail(f"{click.format_filename(path)}: no directory {folder}", param, ctx)
        holder = writer_of(path)  # refused now, not after the work (the write checks again)
        if holder is not None:
            self.fail(busy(path, holder), param, ctx)
        return path


class OutputFile(WrittenFile):
    """A file that a command writes other than a log (an export, a table, a page, a plot):
    it refuses a path that holds an Arrow log, so that no output replaces a recorded run,
    the very log the command reads included."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        if holds_arrow_log(path):
            self.fail(
                f"{click.format_filename(path)} holds an Arrow log; rolloutlog writes no "
                "other output over a log "
                "(choose another path, or remove the log first)",
                param,
                ctx,
            )
        return path


# suffixes of the other formats rolloutlog reads or writes: a log named so is refused
NOT_A_LOG = (
    ".jsonl",
    ".json",
    ".csv",
    ".parquet",
    ".html",
    ".htm",
    ".toml",
    ".png",
    ".pdf",
    ".svg",
)


class NewLog(WrittenFile):
    """A log that the command writes: an Arrow stream, so a name whose suffix says another
    format (`import run.jsonl -o out.jsonl`) is refused rather than filled with Arrow."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        problem = not_a_log(Path(path))
        if problem is not None:
            self.fail(problem, param, ctx)
        return path


def not_a_log(path: Path) -> str | None:
    """Why a log may not be written at `path` (a suffix that says another format), or None."""
    if path.suffix.lower() not in NOT_A_LOG:
        return None
    return f"{path}: a log is an Arrow stream, not {path.suffix}: name it NAME.arrow"


class SuffixedFile(OutputFile):
    """An output whose suffix names its format, one of `suffixes`, checked before the
    command starts (which would otherwise write another format under the name, or fail
    only after the work)."""

    def __init__(self, suffixes: tuple[str, ...], what: str) -> None:
        super().__init__(dir_okay=False, path_type=Path)
        self.suffixes, self.what = suffixes, what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        if Path(path).suffix.lower() not in self.suffixes:
            self.fail(
                f"{click.format_filename(path)}: name the {self.what}'s format by its suffix: "
                f"{', '.join(self.suffixes)}",
                param,
                ctx,
            )
        return path


FILE = NamedPath(dir_okay=False, path_type=Path)  # a file to read, as a Path
FOLDER = NamedPath(file_okay=False, path_type=Path)
NEW_LOG = NewLog(dir_okay=False, path_type=Path)  # a log that the command writes
OUTPUT = OutputFile(dir_okay=False, path_type=Path)
SCENARIO_FILE = SuffixedFile((".toml",), "scenario file")  # `whatif --save-world`
PLOT_FORMATS = (".png", ".pdf", ".svg")


def missing_extra(what: str, extra: str, modules: tuple[str, ...]) -> str | None:
    """The one line to print when an optional extra is not installed (`what` needs it),
    or None when every module of it can be imported; checked before anything starts."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            return f"{what} needs {module} (pip install 'rolloutlog[{extra}]')"
    return None


class PlotFile(SuffixedFile):
    """A figure to write, its format named by its suffix, with matplotlib installed: both
    checked before the run, since drawing fails only once the run is over."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        problem = missing_extra("drawing", "plot", ("matplotlib",))
        if problem is not None:
            self.fail(problem, param, ctx)
        return super().convert(value, param, ctx)


PLOT = PlotFile(PLOT_FORMATS, "figure")


def file_option(
    *names: str, help: str, required: bool = False, kind: click.Path = FILE
) -> Callable[[F], F]:
    """An option naming one file (not a folder); None when left out and not required.
    `kind`: FILE (read), NEW_LOG (a log it writes), OUTPUT (any other file it writes)."""
    return click.option(*names, type=kind, required=required, help=help)


def folder_option(*names: str, help: str) -> Callable[[F], F]:
    """An option naming one folder; None when left out."""
    return click.option(*names, type=FOLDER, default=None, help=help)


def set_option(dest: str, metavar: str, help: str) -> Callable[[F], F]:
    """`--set`, repeatable: the command says what its KEY=... pairs mean."""
    return click.option("--set", dest, multiple=True, metavar=metavar, help=help)


def steps_option(help: str) -> Callable[[F], F]:
    """`--steps`: how many batches to ship, at most `MAX_STEPS`; None leaves it to the
    scenario or the run."""
    return click.option("--steps", type=STEPS, help=help)


def seed_option(help: str, default: int | None = None) -> Callable[[F], F]:
    """`--seed`: a non-negative seed that fits the log's int64; its default is shown when
    there is one."""
    return click.option(
        "--seed",
        type=click.IntRange(min=0, max=INT64_MAX),
        default=default,
        show_default=default is not None,
        help=help,
    )


def json_option(help: str) -> Callable[[F], F]:
    """`--json`: print one JSON object instead of tables."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def check_option(help: str) -> Callable[[F], F]:
    """`--check`: feed every event to the account as well."""
    return click.option("--check", is_flag=True, help=help)


def plot_option(help: str) -> Callable[[F], F]:
    """`--plot FILE`: a figure (.png, .pdf or .svg); None when left out."""
    return click.option("--plot", type=PLOT, default=None, help=help)


PLOT_HELP = "Draw trained ages and cumulative waste to this figure (.png, .pdf or .svg)."


def output_format(
    form: str | None, output: Path | None, suffixes: Mapping[str, str], default: str
) -> str:
    """A written file's format: `--format`, or the suffix of `-o` (which must name one of
    `suffixes`, {".csv": "csv", ...}, and the same one as `--format`), or `default` on
    stdout: the file is what its name says, never another format under it."""
    if output is None:
        return form or default
    named = suffixes.get(output.suffix.lower())
    if named is None:
        listed = [
            suffix if suffix[1:] == name else f"{suffix} ({name})"
            for suffix, name in suffixes.items()
        ]
        fail(
            f"-o {output}: name the format by its suffix: {', '.join(listed[:-1])} or {listed[-1]}"
        )
    if form is not None and form != named:
        fail(f"--format {form} and -o {output} name different formats")
    return named
