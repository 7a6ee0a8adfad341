"""Progress for every long phase: off a terminal, a line once a phase has taken two seconds
and every ten after, also while nothing moves (`train --set batch_size=100000000` piped
printed nothing for minutes), and with `--json` too, on stderr."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rolloutlog.cli import progress as progress_module
from rolloutlog.cli.main import main
from rolloutlog.cli.progress import phase, progress


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "PHASE_QUIET_S", 0.2)
    monkeypatch.setattr(progress_module, "LINE_INTERVAL_S", 0.4)


def test_a_phase_says_nothing_when_short_and_a_line_now_and_then_when_long(
    fast: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with phase("checking a.arrow"):
        pass
    assert capsys.readouterr().err == ""
    with phase("checking b.arrow"):
        time.sleep(1.3)
    lines = capsys.readouterr().err.splitlines()
    assert 2 <= len(lines) <= 5 and all(
        line.startswith("rolloutlog: checking b.arrow ... (") for line in lines
    )


def test_progress_off_a_terminal_repeats_its_state_while_nothing_moves(
    fast: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with progress("step", 3, first="starting") as update:
        time.sleep(1.3)
        # from here on no line is due, however late this thread runs on a loaded machine
        # (a parallel CI run showed "step 1/3" once its 0.4 s had passed before the update)
        monkeypatch.setattr(progress_module, "LINE_INTERVAL_S", 3600.0)
        update(1, "moving")  # within the interval of the last line: not shown
        update(3, "done")  # the last: shown
    lines = capsys.readouterr().err.splitlines()
    waiting = [line for line in lines if line.startswith("step 0/3  starting")]
    assert len(waiting) >= 2, lines
    assert lines[-1].startswith("step 3/3  done") and not lines[-2].startswith("step 1/3")


def test_a_train_that_never_ships_is_not_silent_and_sigterm_ends_it(tmp_path: Path) -> None:
    patched = (
        "import rolloutlog.cli.progress as p; p.LINE_INTERVAL_S = 1.0\n"
        "from rolloutlog.cli.main import main; main()\n"
    )
    command = [sys.executable, "-c", patched, "train", "--steps", "1", "--json"]
    train = subprocess.Popen(
        [*command, "--set", "batch_size=100000000", "--log", "run.arrow"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert train.stderr is not None
    waiting = []
    while len(waiting) < 3:  # lines while no step ships, then stopped as a scheduler would
        line = train.stderr.readline()
        assert line, "train ended"
        waiting += [line] if line.startswith("step 0/1  starting inference") else []
    train.send_signal(signal.SIGTERM)
    _, stderr = train.communicate(timeout=120)
    assert train.returncode == 143 and "Traceback" not in stderr, stderr[-2000:]
    if (tmp_path / "run.arrow").exists():  # its first commit came before the signal
        assert "stopped by SIGTERM after 0 steps; next: rolloutlog train --resume" in stderr
    else:  # nothing recorded: nothing left behind
        assert "nothing was recorded" in stderr and list(tmp_path.iterdir()) == []


SIMULATED = Path(__file__).resolve().parents[2] / "examples" / "simulated.arrow"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["replay", "{log}"], "replaying"),
        (["verify", "{log}"], "verifying"),
        (["verify", "{log}", "--policy", "per-episode"], "checking {log} against per-episode"),
        (["show", "{log}", "--group", "g1"], "reading"),
        (["diff", "{log}", "{log}"], "comparing"),
        (["explain", "{log}"], "explaining"),
        (["metrics", "{log}"], "reading"),
        (["info", "{log}"], "reading"),
        (["export", "{log}"], "exporting"),
        (["export", "{log}", "-o", "{tmp}/e.jsonl"], "exporting"),
        (["timeline", "{log}", "-o", "{tmp}/t.html"], "reading and replaying"),
        (["import", "{tmp}/e.jsonl", "-o", "{tmp}/i.arrow"], "importing"),
        (["whatif", "{log}", "--steps", "2", "--json"], "fitting a world to"),
    ],
)
def test_every_phase_that_reads_a_whole_log_says_so_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], says: str
) -> None:
    """`verify --policy`, `show`, `diff`, `explain`, `metrics`, `info`, `export` to stdout
    and `import` of a log of millions of events worked for many seconds without a word;
    with no quiet time, each phase says what it does at once (off a terminal, as here)."""
    monkeypatch.setattr(progress_module, "PHASE_QUIET_S", 0.0)
    (tmp_path / "e.jsonl").write_text(
        CliRunner().invoke(main, ["export", str(SIMULATED)]).stdout, encoding="utf-8"
    )
    fill = {"log": str(SIMULATED), "tmp": str(tmp_path)}
    result = CliRunner().invoke(main, [arg.format(**fill) for arg in args])
    assert result.exit_code in (0, 1), result.output
    assert f"rolloutlog: {says.format(**fill)}" in result.stderr, result.stderr
