"""One writer per output: every command that writes a log, a table, a world or a page takes
the output's lock, and a second writer is refused in one line naming the holder's pid;
readers of a log still being written read its committed prefix and say so; a signal leaves
no temporary behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.output_lock import OutputBusy, holding, lock_path
from tests.cli.test_cli_log import EXAMPLE
from tests.invoke import one_line_error, run

SMOKE = ("--scenario", "smoke", "--steps", "2")
CLI = [sys.executable, "-c", "from rolloutlog.cli.main import main; main()"]
HOLD = (
    "import sys\n"
    "from rolloutlog.events.output_lock import holding\n"
    "with holding(sys.argv[1]):\n"
    "    print('held', flush=True)\n"
    "    sys.stdin.read()\n"
)


@contextmanager
def held_by_another_process(path: Path) -> Iterator[int]:
    """`path`'s output lock, held by a child process until the block ends; its pid."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        yield child.pid
    finally:
        child.communicate("", timeout=30)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize(
    ("output", "args"),
    [
        ("out.arrow", ["import", str(EXAMPLE.with_suffix(".jsonl")), "--force", "-o"]),
        ("out.arrow", ["simulate", *SMOKE, "--force", "--log"]),
        ("out.parquet", ["sweep", *SMOKE, "-o"]),
        ("out.html", ["timeline", str(EXAMPLE), "-o"]),
        ("out.csv", ["metrics", str(EXAMPLE), "-o"]),
        ("out.jsonl", ["export", str(EXAMPLE), "-o"]),
        ("out.toml", ["whatif", str(EXAMPLE), "--save-world"]),
        ("out.png", ["simulate", *SMOKE, "--plot"]),  # a figure: written in place before
        ("out.svg", ["whatif", str(EXAMPLE), "--steps", "2", "--plot"]),
        ("out.arrow", ["train", "--steps", "1", "--log"]),
        ("out.arrow", ["train", "--resume"]),
    ],
)
def test_a_second_writer_of_an_output_is_refused_naming_the_holders_pid(
    tmp_path: Path, output: str, args: list[str]
) -> None:
    target = tmp_path / output
    target.write_bytes(b"what was there before")
    with held_by_another_process(target) as pid:
        line = one_line_error(run(*args, str(target)))
    assert f"process {pid} is writing it" in line and str(target) in line
    assert target.read_bytes() == b"what was there before"
    assert _leftovers(tmp_path) == []


def test_import_force_is_refused_while_simulate_writes_the_log(tmp_path: Path) -> None:
    """The issue's lost log: `simulate --log same.arrow` running, `import --force -o
    same.arrow` exited 0 and the simulated log was gone."""
    log = tmp_path / "same.arrow"
    simulate = subprocess.Popen(
        [*CLI, "simulate", "--steps", "1000", "--log", str(log), "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not lock_path(log).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        line = one_line_error(
            run("import", str(EXAMPLE.with_suffix(".jsonl")), "-o", str(log), "--force")
        )
        assert f"process {simulate.pid} is writing it" in line
    finally:
        _, stderr = simulate.communicate(timeout=600)
    assert simulate.returncode == 0, stderr[-2000:]
    info = LogReader(log).info()
    assert info.closed and info.events > 10_000 and info.counts["batch_shipped"] == 1000
    assert _leftovers(tmp_path) == []


def test_the_lock_is_taken_again_by_its_holder_and_released_with_its_file(tmp_path: Path) -> None:
    path = tmp_path / "out.arrow"
    with holding(path), holding(path):
        assert lock_path(path).read_text() == f"{os.getpid()}\n"
    assert not lock_path(path).exists()
    with held_by_another_process(path) as pid, pytest.raises(OutputBusy) as busy, holding(path):
        pass
    assert busy.value.pid == pid
    with holding(path):  # the holder left: free again
        pass


def test_a_sigterm_during_import_leaves_no_temporary_and_exits_143(tmp_path: Path) -> None:
    """A SIGTERM'd `import` left a hidden `.tmp` (and its lock) behind."""
    simulated, lines = tmp_path / "sim" / "run.arrow", tmp_path / "run.jsonl"
    simulated.parent.mkdir()
    assert run("simulate", "--steps", "200", "--log", str(simulated)).exit_code == 0
    assert run("export", str(simulated), "-o", str(lines)).exit_code == 0
    log = tmp_path / "out.arrow"
    importing = subprocess.Popen(
        [*CLI, "import", str(lines), "-o", str(log)], stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not any(p.suffix == ".tmp" for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline and importing.poll() is None
        time.sleep(0.01)
    importing.send_signal(signal.SIGTERM)
    _, stderr = importing.communicate(timeout=60)
    assert importing.returncode == 143, stderr
    assert "terminated (SIGTERM)" in stderr and "Traceback" not in stderr
    assert not log.exists() and _leftovers(tmp_path) == []


GROWING = (
    "import sys, time\n"
    "from rolloutlog.events.log_reader import read_log\n"
    "from rolloutlog.events.log_writer import LogWriter\n"
    "events = read_log(sys.argv[1])\n"
    "with LogWriter(sys.argv[2], batch_events=1 << 20, fsync=False) as log:\n"
    "    for event in events[:300]:\n"
    "        log.append(event)\n"
    "    log.commit()\n"
    "    print('ready', flush=True)\n"
    "    for event in events[300:]:\n"
    "        log.append(event)\n"
    "        log.commit()\n"
    "        time.sleep(0.001)\n"
    "    sys.stdin.read()\n"
)


@pytest.mark.parametrize(
    "args",
    [
        ["whatif", "--json"],
        ["replay", "--json"],
        ["show", "--at", "200", "--json"],
        ["timeline", "-o", "page.html"],
    ],
)
def test_a_log_still_being_written_is_read_to_its_committed_prefix(
    tmp_path: Path, args: list[str]
) -> None:
    """`whatif` on a log a live run was writing: a KeyError traceback every try (its two
    passes read different lengths); every reader now reads what was committed when it
    opened the log, and says so."""
    source, log = tmp_path / "run.arrow", tmp_path / "growing.arrow"
    assert run("simulate", "--steps", "12", "--log", str(source)).exit_code == 0
    writer = subprocess.Popen(
        [sys.executable, "-c", GROWING, str(source), str(log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
        command, *rest = args
        rest = [str(tmp_path / a) if a.endswith(".html") else a for a in rest]
        result = run(command, str(log), *rest)
    finally:
        writer.communicate("", timeout=120)
    assert result.exit_code == 0, result.output
    assert f"process {writer.pid} is still writing it; reading the" in result.stderr
    assert "torn tail" not in result.stderr
