"""Bad input on every command: one line `rolloutlog: error: ...`, exit status 2, naming the
input and the problem, in the same words wherever the problem is the same."""

from __future__ import annotations

import errno
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rolloutlog.cli.bad_input import os_problem
from rolloutlog.cli.options import MAX_STEPS
from rolloutlog.runtime.sim import simulation
from tests.cli.test_cli_log import EXAMPLE
from tests.invoke import one_line_error, run

SMOKE = ("--scenario", "smoke", "--steps", "2")
POLICY_OPTIONS = pytest.mark.parametrize(  # every option that names policy presets
    "args",
    [
        ["simulate", *SMOKE, "--policy"],
        ["simulate", *SMOKE, "--compare"],
        ["sweep", *SMOKE, "-o", "t.parquet", "--compare"],
        ["whatif", str(EXAMPLE), "--compare"],
    ],
)


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


def test_sweep_without_its_required_output_is_refused() -> None:
    assert "Missing option '-o'" in one_line_error(run("sweep", *SMOKE))


@pytest.mark.parametrize(
    "args",
    [
        ["sweep", *SMOKE, "-o", ""],
        ["simulate", *SMOKE, "--log", ""],
        ["info", ""],
        ["import", str(EXAMPLE.with_suffix(".jsonl")), "-o", ""],
        ["timeline", str(EXAMPLE), "-o", ""],
        ["export", str(EXAMPLE), "-o", ""],
        ["whatif", str(EXAMPLE), "--save-world", ""],
    ],
)
def test_an_empty_path_is_refused_not_read_as_the_current_folder(args: list[str]) -> None:
    assert "an empty path names no file" in one_line_error(run(*args))


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", *SMOKE, "--log", "{missing}/run.arrow"],
        ["import", str(EXAMPLE.with_suffix(".jsonl")), "-o", "{missing}/run.arrow"],
        ["sweep", *SMOKE, "-o", "{missing}/table.parquet"],
        ["export", str(EXAMPLE), "-o", "{missing}/run.jsonl"],
        ["metrics", str(EXAMPLE), "-o", "{missing}/steps.csv"],
        ["timeline", str(EXAMPLE), "-o", "{missing}/run.html"],
        ["whatif", str(EXAMPLE), "--save-world", "{missing}/world.toml"],
    ],
)
def test_a_file_to_write_in_a_missing_folder_names_the_folder(
    tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "missing"
    error = one_line_error(run(*(arg.format(missing=missing) for arg in args)))
    assert error.endswith(f"/{Path(args[-1]).name}: no directory {missing}"), error


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", *SMOKE],
        ["simulate", *SMOKE, "--compare", "per-episode,per-group"],
        ["whatif", str(EXAMPLE), "--steps", "2", "--world", "replay"],
        ["sweep", *SMOKE, "-o", "{tmp}/table.parquet"],
    ],
)
def test_a_run_that_makes_no_progress_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """`--set batch_size=1000000` stops a run at the simulator's bound of world events
    without a shipped batch; the bound is lowered here so that any run meets it fast."""
    monkeypatch.setattr(simulation, "WORLD_EVENTS_PER_STEP_MAX", 3)
    error = one_line_error(run(*(arg.format(tmp=tmp_path) for arg in args)))
    assert ", policy per-episode, seed 0: 3 world events without a shipped batch" in error
    assert error.endswith("the run makes no progress"), error


def imported_without(tmp_path: Path, line: int) -> Path:
    """EXAMPLE exported with its `line`-th event removed (seqs left out, so that they count
    on), then imported: every event valid on its own, the log inconsistent."""
    lines = EXAMPLE.with_suffix(".jsonl").read_text(encoding="utf-8").splitlines()
    kept = [re.sub(r'"seq": \d+, ', "", text) for n, text in enumerate(lines, 1) if n != line]
    (tmp_path / "in.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    log = tmp_path / "inconsistent.arrow"
    assert run("import", str(tmp_path / "in.jsonl"), "-o", str(log)).exit_code == 0
    return log


@pytest.mark.parametrize("line", [2, 3, 12])  # group_opened, episode_dispatched, completed
def test_whatif_names_an_inconsistent_log_as_replay_does(tmp_path: Path, line: int) -> None:
    log = imported_without(tmp_path, line)
    replayed = one_line_error(run("replay", str(log))).removeprefix("rolloutlog: error: ")
    assert replayed.startswith("seq ")
    assert one_line_error(run("whatif", str(log))) == f"rolloutlog: error: {log}: {replayed}"


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--scenario", "smoke"],
        ["sweep", "--scenario", "smoke", "-o", "{tmp}/table.parquet"],
        ["whatif", str(EXAMPLE)],
        ["train"],
    ],
)
@pytest.mark.parametrize("steps", [MAX_STEPS + 1, 10**23])
def test_steps_past_the_bound_are_refused_in_every_command(
    tmp_path: Path, args: list[str], steps: int
) -> None:
    """Without a bound, `--steps 99999999999999999999999` ran forever without a word."""
    error = one_line_error(run(*(arg.format(tmp=tmp_path) for arg in args), "--steps", str(steps)))
    assert error.endswith(f"'--steps': {steps} is not in the range 1<=x<={MAX_STEPS}."), error


@pytest.mark.parametrize(
    "command", [["replay"], ["info"], ["whatif"], ["timeline", "-o", "x.html"]]
)
def test_a_jsonl_export_given_for_a_log_says_to_import_it(command: list[str]) -> None:
    jsonl = EXAMPLE.with_suffix(".jsonl")
    assert one_line_error(run(command[0], str(jsonl), *command[1:])).endswith(
        f"{jsonl}: not a rolloutlog log but JSON Lines "
        f"(rolloutlog import {jsonl} -o LOG makes a log of it)"
    )


def test_python_dash_m_runs_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rolloutlog", "info", "--json", str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["events"] == 25


@POLICY_OPTIONS
def test_a_preset_that_names_a_rule_twice_is_refused(args: list[str]) -> None:
    error = one_line_error(run(*args, "per-group+capacity+capacity"))
    assert (
        f"for {args[-1]}: policy 'per-group+capacity+capacity': names rule 'capacity' twice"
        in error
    )


@POLICY_OPTIONS
@pytest.mark.parametrize("text", ["", ","])
def test_an_empty_policy_list_is_refused_as_given(args: list[str], text: str) -> None:
    """`--compare ""` ran the scenario's own policy, as if the option were left out."""
    error = one_line_error(run(*args, text))
    assert f"for {args[-1]}: policy list is empty" in error, error


def test_policy_runs_one_preset_not_the_first_of_a_list() -> None:
    error = one_line_error(run("simulate", *SMOKE, "--policy", "per-group,per-episode"))
    assert error.endswith(
        "'per-group,per-episode' names 2 presets; --policy runs one (--compare runs several)"
    ), error


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", *SMOKE],
        ["whatif", str(EXAMPLE)],
        ["sweep", *SMOKE, "-o", "t.parquet"],
        ["train"],
    ],
)
def test_a_set_without_a_value_is_worded_alike_in_every_command(args: list[str]) -> None:
    error = one_line_error(run(*args, "--set", "batch_size"))
    assert error.startswith("rolloutlog: error: --set 'batch_size': expected key=value"), error


def test_import_of_a_log_says_it_is_one(tmp_path: Path) -> None:
    error = one_line_error(run("import", str(EXAMPLE), "-o", str(tmp_path / "run.arrow")))
    assert error.endswith(
        f"{EXAMPLE}: a rolloutlog log, not JSON Lines (rolloutlog export writes its JSON Lines)"
    )


@pytest.mark.parametrize("text", [b"", b"steps = 2\n"])
def test_sweep_into_a_file_that_is_no_table_says_so(tmp_path: Path, text: bytes) -> None:
    (tmp_path / "results.parquet").write_bytes(text)
    error = one_line_error(run("sweep", *SMOKE, "-o", str(tmp_path / "results.parquet")))
    assert error.endswith("results.parquet: not a sweep results table (not a Parquet file)"), error
    assert (tmp_path / "results.parquet").read_bytes() == text


def test_a_failed_write_names_the_file_not_its_temporary() -> None:
    """Outputs are written whole, through `.NAME.PID.tmp` beside them: an error there
    names the file the user gave."""
    refused = PermissionError(errno.EACCES, "Permission denied", "/data/.out.jsonl.4242.tmp")
    assert os_problem(refused) == "/data/out.jsonl: permission denied"
    assert os_problem(refused, Path("/data/out.jsonl")) == "permission denied"
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory", "in.jsonl")
    assert os_problem(missing) == "in.jsonl: no such file"
