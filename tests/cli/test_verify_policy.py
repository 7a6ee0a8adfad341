"""`rolloutlog verify LOG --policy PRESET`: exit codes, the JSON verdict, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from click.testing import Result

from rolloutlog.events.log_writer import write_log
from rolloutlog.events.types import Event, GroupScored
from tests import invoke
from tests.replay.replay_helpers import small_log


def run(*args: object) -> Result:
    return invoke.run("verify", *args)


def written(tmp_path: Path, events: list[Event], name: str = "run.arrow") -> Path:
    path = tmp_path / name
    write_log(path, events)
    return path


def test_a_conforming_log_exits_0(tmp_path: Path) -> None:
    result = run(written(tmp_path, small_log()), "--policy", "per-group")
    assert result.exit_code == 0, result.output
    assert "19 events conform to per-group" in result.stdout


def test_the_first_nonconformity_exits_1_with_its_seq_and_rule(tmp_path: Path) -> None:
    log = [attrs.evolve(e, admitted=False) if e.seq == 17 else e for e in small_log()]
    assert isinstance(log[17], GroupScored)
    path = written(tmp_path, log)
    human = run(path, "--policy", "per-episode")
    assert human.exit_code == 1
    assert "first nonconformity at seq 17: different-fields" in human.stdout
    verdict = json.loads(run(path, "--policy", "per-episode", "--json").stdout)
    assert (verdict["ok"], verdict["events"], verdict["policy"]) == (False, 17, "per-episode")
    assert {k: verdict["nonconformity"][k] for k in ("seq", "rule", "cause")} == {
        "seq": 17,
        "rule": "different-fields",
        "cause": 14,
    }


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--t-tolerance", "1"], "--t-tolerance: only with --policy"),
        (["--policy", "per-episode", "--t-tolerance", "-1"], "--t-tolerance: must be a number"),
        (["--policy", "field"], "presets; --policy runs one"),
        (["--policy", "bogus"], "--policy: policy 'bogus': must start with one of"),
    ],
)
def test_bad_options_are_one_line(tmp_path: Path, options: list[str], error: str) -> None:
    result = run(written(tmp_path, small_log()), *options)
    assert result.exit_code == 2
    assert result.stderr.startswith("rolloutlog: error: ") and error in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_bad_log_is_one_line_naming_the_file_and_the_seq(tmp_path: Path) -> None:
    log = small_log()
    strange = attrs.evolve(log[4], episode_id="g9/0")  # never dispatched
    path = written(tmp_path, [*log[:4], strange, *log[5:]])
    result = run(path, "--policy", "per-episode")
    assert result.exit_code == 2
    assert result.stderr == (
        f"rolloutlog: error: {path}: seq 4 (episode_completed): g9/0 was never dispatched"
        " (after 4 conforming events)\n"
    )
