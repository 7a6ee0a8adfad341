"""A `--plot` figure is an output like any other: written through a temporary file renamed
into place under the output's lock, so a signal while it is written leaves nothing behind
and the command exits 130 or 143; a second writer met at write time is refused in one line
that names the path once."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result

from rolloutlog.cli import options
from tests.cli.test_cli_log import EXAMPLE
from tests.cli.test_one_writer import SMOKE, held_by_another_process
from tests.invoke import run

BEFORE = b"what was there before"
# The real command, its figure's `savefig` slowed: once the figure's bytes are in the
# temporary file, it says so on stdout and waits, so that the signal lands mid-write.
SLOW_SAVEFIG = (
    "import sys, time\n"
    "from matplotlib.figure import Figure\n"
    "savefig = Figure.savefig\n"
    "def slow(self, *args, **kwargs):\n"
    "    savefig(self, *args, **kwargs)\n"
    "    print('writing', flush=True)\n"
    "    time.sleep(120)\n"
    "Figure.savefig = slow\n"
    "sys.argv[0] = 'rolloutlog'\n"
    "from rolloutlog.cli.main import main\n"
    "main()\n"
)
PLOTS = [
    ("out.png", ["simulate", *SMOKE, "--plot"]),
    ("out.svg", ["whatif", str(EXAMPLE), "--steps", "2", "--world", "replay", "--plot"]),
]


def _error_line(result: Result) -> str:
    """The one error line a refused command ends with (exit 2); progress may come before."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    errors = [line for line in lines if line.startswith("rolloutlog: error: ")]
    assert errors == lines[-1:] and "Traceback" not in result.stderr, result.stderr
    return errors[0]


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize(
    ("number", "said"), [(signal.SIGTERM, "terminated"), (signal.SIGINT, "interrupted")]
)
@pytest.mark.parametrize(("output", "args"), PLOTS)
def test_a_signal_while_a_plot_is_written_leaves_nothing_and_exits_as_shells_expect(
    tmp_path: Path, number: signal.Signals, said: str, output: str, args: list[str]
) -> None:
    target = tmp_path / output
    target.write_bytes(BEFORE)
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_SAVEFIG, *args, str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "writing\n"
        assert [p for p in _hidden(tmp_path) if p.endswith(".tmp")], _hidden(tmp_path)
        process.send_signal(number)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + number, stderr[-3000:]
    assert f"rolloutlog: {said} ({number.name})" in stderr and "Traceback" not in stderr
    assert target.read_bytes() == BEFORE
    assert _hidden(tmp_path) == []


@pytest.mark.parametrize(
    ("output", "args", "option"),
    [
        *((output, args, "--plot") for output, args in PLOTS),
        ("out.toml", ["whatif", str(EXAMPLE), "--world", "replay", "--save-world"], "--save-world"),
        ("out.arrow", ["simulate", *SMOKE, "--force", "--log"], "--log"),
        ("out.html", ["timeline", str(EXAMPLE), "-o"], None),
        ("out.csv", ["metrics", str(EXAMPLE), "-o"], None),
        ("out.arrow", ["import", str(EXAMPLE.with_suffix(".jsonl")), "--force", "-o"], None),
    ],
)
def test_an_output_busy_at_write_time_is_refused_in_one_line_naming_it_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    output: str,
    args: list[str],
    option: str | None,
) -> None:
    """The lock taken by another process after the command's start-up check: a figure's
    refusal read `--plot PATH: PATH: process N is writing it`."""
    monkeypatch.setattr(options, "writer_of", lambda path: None)  # the check found it free
    target = tmp_path / output
    target.write_bytes(BEFORE)
    with held_by_another_process(target) as pid:
        line = _error_line(run(*args, str(target)))
    named = f"{option} {target}" if option else str(target)
    assert line == (
        f"rolloutlog: error: {named}: process {pid} is writing it (one writer per output); "
        "wait for it to end or choose another path"
    )
    assert target.read_bytes() == BEFORE and _hidden(tmp_path) == []
