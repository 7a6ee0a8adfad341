"""A full disk is an ordinary error: one line naming the file, nothing recorded before it
lost, no leftovers, so the same command simply works again. The disk is filled by a file
size limit (`RLIMIT_FSIZE`) on a real `rolloutlog` process; the command itself ignores
SIGXFSZ, so the write fails with EFBIG instead of the process dying."""

from __future__ import annotations

import errno
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from rolloutlog.cli.bad_input import os_problem
from rolloutlog.events.log_reader import LogReader
from tests.cli.test_cli_log import EXAMPLE
from tests.invoke import run

SIMULATED = EXAMPLE.with_name("simulated.arrow")
CLI = [sys.executable, "-c", "from rolloutlog.cli.main import main; main()"]
FULL = "file size limit reached (ulimit -f) writing"
TINY_TRAIN = ("--steps", "1", "--set", "group_size=4", "--set", "batch_size=8")


def _limited(limit: int, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [*CLI, *args],
        preexec_fn=limit_file_size,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.splitlines()  # progress lines may come before the error
    errors = [line for line in lines if line.startswith("rolloutlog: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], result.stderr
    assert "Traceback" not in result.stderr
    return errors[0]


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(
    ("output", "limit", "args"),
    [
        (
            "out.arrow",
            2_000,
            ["simulate", "--scenario", "smoke", "--steps", "5", "--force", "--log"],
        ),
        ("out.arrow", 2_000, ["import", "run.jsonl", "--force", "-o"]),
        ("out.html", 20_000, ["timeline", str(SIMULATED), "-o"]),
        ("out.csv", 200, ["metrics", str(SIMULATED), "-o"]),
        ("out.jsonl", 2_000, ["export", str(SIMULATED), "-o"]),
    ],
)
def test_a_full_disk_is_one_line_and_keeps_what_was_there(
    tmp_path: Path, output: str, limit: int, args: list[str]
) -> None:
    assert run("export", str(SIMULATED), "-o", str(tmp_path / "run.jsonl")).exit_code == 0
    before = b"recorded before"
    (tmp_path / output).write_bytes(before)
    listed = _files(tmp_path)
    line = _one_line(_limited(limit, *args, output, cwd=tmp_path))
    assert f"{FULL} {output}" in line
    assert (tmp_path / output).read_bytes() == before  # nothing recorded before lost
    assert _files(tmp_path) == listed  # no temporary, no lock left behind
    retried = subprocess.run([*CLI, *args, output], cwd=tmp_path, capture_output=True, text=True)
    assert retried.returncode == 0, retried.stderr[-2000:]


def test_a_full_disk_during_a_sweep_keeps_the_rows_saved_before(tmp_path: Path) -> None:
    sweep = ["sweep", "--scenario", "smoke", "--steps", "2", "--engine", "processes"]
    first = run(*sweep, "--seeds", "0", "-o", str(tmp_path / "t.parquet"))
    assert first.exit_code == 0, first.output
    saved = (tmp_path / "t.parquet").read_bytes()
    listed = _files(tmp_path)
    line = _one_line(
        _limited(len(saved), *sweep, "--seeds", "0-2", "-o", "t.parquet", cwd=tmp_path)
    )
    assert f"{FULL} t.parquet" in line
    assert (tmp_path / "t.parquet").read_bytes() == saved and _files(tmp_path) == listed
    again = run(*sweep, "--seeds", "0-2", "-o", str(tmp_path / "t.parquet"))
    assert again.exit_code == 0 and "1 already in" in again.stderr


def test_train_on_a_full_disk_is_one_line_and_leaves_nothing_to_block_the_retry(
    tmp_path: Path,
) -> None:
    """`train --log` under `ulimit -f`: a SafetensorError traceback, and the rollout store
    and checkpoint folder it left made the retry fail ("rollout store exists")."""
    line = _one_line(_limited(300_000, "train", *TINY_TRAIN, "--log", "run.arrow", cwd=tmp_path))
    assert f"{FULL} run.arrow.weights/initial/model.safetensors" in line
    assert _files(tmp_path) == []  # the retry is refused by nothing


def test_save_initial_on_a_full_disk_is_one_line_and_the_retry_works(tmp_path: Path) -> None:
    line = _one_line(_limited(300_000, "train", "--save-initial", "v0", cwd=tmp_path))
    assert f"--save-initial v0: {FULL} v0/model.safetensors" in line
    assert _files(tmp_path) == []
    again = run("train", "--save-initial", str(tmp_path / "v0"))
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in (tmp_path / "v0").iterdir()) == [
        "config.json",
        "model.safetensors",
    ]


@pytest.mark.parametrize(
    ("number", "words"),
    [
        (errno.ENOSPC, "no space left on device"),
        (errno.EDQUOT, "disk quota exceeded"),
        (errno.EFBIG, "file size limit reached (ulimit -f)"),
    ],
)
def test_a_full_disk_names_the_file_written_not_its_temporary(number: int, words: str) -> None:
    error = OSError(number, "strerror", "runs/.out.arrow.1234.tmp")
    assert os_problem(error) == f"{words} writing runs/out.arrow"


def test_a_log_writer_on_a_full_disk_keeps_its_committed_events(tmp_path: Path) -> None:
    """What a full disk leaves of a log written in place (a live run's): every event
    committed before it, which reads back."""
    log = tmp_path / "run.arrow"
    script = (
        "import sys\n"
        "from rolloutlog.events.log_reader import read_log\n"
        "from rolloutlog.events.log_writer import LogWriter\n"
        "events = read_log(sys.argv[1])\n"
        "with LogWriter(sys.argv[2], batch_events=10) as log:\n"
        "    try:\n"
        "        for event in events:\n"
        "            log.append(event)\n"
        "    except OSError as error:\n"
        "        print(error.errno, error.filename, log.next_seq)\n"
    )

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (8_000, 8_000))
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    done = subprocess.run(
        [sys.executable, "-c", script, str(SIMULATED), str(log)],
        preexec_fn=limit_file_size,
        capture_output=True,
        text=True,
    )
    number, filename, _ = done.stdout.split()
    assert (int(number), filename) == (errno.EFBIG, str(log)), done.stderr
    info = LogReader(log, warn=False).info()
    assert info.events >= 10 and info.events % 10 == 0  # whole commits, read back
