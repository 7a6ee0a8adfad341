"""`import --from areal` on folders that AReaL's own code wrote (tests/data/areal-runs/).

`scripts/areal-run` wrote them: AReaL's WorkflowExecutor, GroupedRolloutWorkflow, session
tracer and save_config from the areal 1.0.4 wheel, on CPU, against a fake inference engine
(`areal-1.0.4/`; `pr-1350/` with the rollout dump of AReaL PR #1350, which adds
`version_rle`). Four members a task, two tasks a batch, four steps, at most six tasks at
once; task 3's member 1 got no token, so its workflow returned None and AReaL skipped it.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.events.types import (
    EpisodeCompleted,
    EpisodeFailed,
    GroupOpened,
    GroupScored,
    RunStarted,
)
from rolloutlog.importers import import_areal
from rolloutlog.importers.prime_rl import IMPORT_NOTE
from rolloutlog.record import read_foreign_ids
from tests.invoke import bad_input
from tests.record.clean import replay_problems

DATA = Path(__file__).resolve().parents[1] / "data" / "areal-runs"
TRIAL = Path("logs/user/exp/trial")
RUNS = ("areal-1.0.4", "pr-1350")


def sessions_of(run: Path, role: str) -> list[dict]:
    path = run / TRIAL / "session_tracer" / role / "sessions-r0.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def generated_tokens(task: int, member: int) -> int:
    """How many tokens scripts/areal_run.py's fake engine generated for this member."""
    return random.Random(f"1/{task}/{member}").randint(20, 90)


@pytest.mark.parametrize("name", RUNS)
def test_a_run_areal_wrote_imports_and_replays_clean(name: str, tmp_path: Path) -> None:
    log = tmp_path / "run.arrow"
    import_areal(DATA / name, log)
    assert replay_problems(log) == []
    events = read_log(log)
    start = events[0]
    assert isinstance(start, RunStarted)
    # config.yaml: n_samples 4; max_concurrent_rollouts 6 tasks of 4 members each.
    assert (start.config["group_size"], start.config["max_inflight"]) == (4, 24)


@pytest.mark.parametrize("name", RUNS)
def test_a_skipped_member_fails_and_the_others_get_their_own_samples(
    name: str, tmp_path: Path
) -> None:
    log = tmp_path / "run.arrow"
    import_areal(DATA / name, log)
    events, theirs = read_log(log), read_foreign_ids(log)
    task3 = sorted(
        (r for r in sessions_of(DATA / name, "rollout") if r["task_id"] == 3),
        key=lambda r: r["session_id"],
    )
    skipped = [r["session_id"] for r in task3 if "reward" not in r["phases"]]
    assert len(task3) == 4 and skipped == [task3[1]["session_id"]]  # member 1, as written
    failed = {theirs[e.episode_id]: e.error for e in events if isinstance(e, EpisodeFailed)}
    assert failed[f"3/{skipped[0]}"] == "returned_none"
    completed = {theirs[e.episode_id]: e for e in events if isinstance(e, EpisodeCompleted)}
    for member in (0, 2, 3):  # sample_idx 0, 1, 2: shifted by one past the skipped member
        episode = completed[f"3/{task3[member]['session_id']}"]
        assert episode.completion_tokens == generated_tokens(3, member)
    scored = {theirs[e.group_id]: e for e in events if isinstance(e, GroupScored)}
    assert scored["3"].admitted and len(scored["3"].episode_ids) == 3


@pytest.mark.parametrize("name", RUNS)
def test_eval_rollouts_are_eval_groups_apart_from_training(name: str, tmp_path: Path) -> None:
    log = tmp_path / "run.arrow"
    import_areal(DATA / name, log)
    events, theirs = read_log(log), read_foreign_ids(log)
    opened = {theirs[e.group_id]: e.work for e in events if isinstance(e, GroupOpened)}
    evals = {group for group, work in opened.items() if work == "eval"}
    assert evals == {"eval/0", "eval/1"}
    train_tasks = {r["task_id"] for r in sessions_of(DATA / name, "rollout")}
    assert {g for g, work in opened.items() if work == "train"} == {str(t) for t in train_tasks}
    for event in events:
        if isinstance(event, GroupScored) and theirs[event.group_id] in evals:
            assert event.advantages == () and event.admitted is False
    eval_done = [
        e
        for e in events
        if isinstance(e, EpisodeCompleted) and theirs[e.episode_id].startswith("eval/")
    ]
    assert len(eval_done) == 8


def test_the_note_counts_the_samples_whose_tokens_span_versions(tmp_path: Path) -> None:
    spanning = 0
    for path in (DATA / "pr-1350" / TRIAL / "rollout").rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            spanning += len({v for v, _ in json.loads(line)["version_rle"]}) > 1
    assert spanning > 0
    note = import_areal(DATA / "pr-1350", tmp_path / "a.arrow")
    assert note["versions"]["spanning_versions"] == spanning
    note = import_areal(DATA / "areal-1.0.4", tmp_path / "b.arrow")
    assert note["versions"]["with_version_rle"] == 0


def test_without_config_yaml_the_guess_is_said(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "pr-1350", run)
    (run / TRIAL / "config.yaml").unlink()
    note = import_areal(run, tmp_path / "x.arrow")
    assert note["assumed"][0].startswith("absent: config.yaml (AReaL's save_config)")


def _edit_line(path: Path, change: Callable[[dict], None]) -> None:
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    change(record)
    path.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")


def _set(key: str, value: object) -> Callable[[dict], None]:
    return lambda record: record.__setitem__(key, value)


DUMP = TRIAL / "rollout/0/0.jsonl"
SESSIONS = TRIAL / "session_tracer/rollout/sessions-r0.jsonl"
CONFIG = TRIAL / "config.yaml"
BAD_RECORDS = [
    (
        DUMP,
        _set("version_rle", [[0, 5]]),
        "line 1: version_rle: 5 tokens, but seqlen - prompt_len is",
    ),
    (
        DUMP,
        _set("version_rle", [[0, "5"]]),
        "line 1: version_rle: expected [version, tokens] pairs",
    ),
    (DUMP, _set("head_version", "0"), "line 1: head_version: expected an integer, got '0'"),
    (
        DUMP,
        _set("tail_version", 7),
        "line 1: tail_version: expected head_version <= tail_version <= 0",
    ),
    (DUMP, _set("reward", None), "line 1: reward: expected a number, got None"),
    (DUMP, _set("sample_idx", 9), "line 1: sample_idx: 9 is out of range (4 sessions of task 0"),
    (DUMP, lambda r: r.pop("seqlen"), "line 1: seqlen: missing"),
    (SESSIONS, _set("phases", []), "line 1: phases: expected an object, got []"),
    (
        SESSIONS,
        _set("phases", {"generate": [{"end_ts": 1.0}]}),
        "line 1: phases.generate[0]: start_ts: missing",
    ),
    (SESSIONS, _set("role", "critic"), "line 1: role: expected one of ('rollout', 'eval-rollout')"),
    (SESSIONS, _set("finalized_ts", "soon"), "line 1: finalized_ts: expected a number, got 'soon'"),
]


@pytest.mark.parametrize(("file", "change", "expected"), BAD_RECORDS)
def test_a_bad_field_is_one_line_naming_file_line_and_field(
    file: Path, change: Callable[[dict], None], expected: str, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "pr-1350", run)
    _edit_line(run / file, change)
    line = bad_input(["import", "--from", "areal", str(run), "-o", str(tmp_path / "x")])
    assert line.startswith(f"rolloutlog: error: {run / file}: {expected}"), line


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "  n_samples: 4",
            "  n_samples: four",
            "gconfig.n_samples: expected an integer or null, got 'four'",
        ),
        ("  n_samples: 4", "  n_samplez: 4", "gconfig.n_samples: missing"),
        ("  n_samples: 4", "  n_samples: 0", "gconfig.n_samples: expected an integer >= 1, got 0"),
        (
            "  consumer_batch_size: 2",
            "  consumer_batch_size: null",
            "rollout.consumer_batch_size: expected an integer >= 1, got None",
        ),
    ],
)
def test_a_bad_config_field_is_one_line(old: str, new: str, expected: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "pr-1350", run)
    text = (run / CONFIG).read_text()
    assert f"\n{old}\n" in text
    (run / CONFIG).write_text(text.replace(f"\n{old}\n", f"\n{new}\n", 1))
    line = bad_input(["import", "--from", "areal", str(run), "-o", str(tmp_path / "x")])
    assert line == f"rolloutlog: error: {run / CONFIG}: {expected}"


@pytest.mark.parametrize(("name", "exact"), [("pr-1350", True), ("areal-1.0.4", False)])
def test_what_of_the_versions_is_exact_and_what_interpolated_is_said(
    name: str, exact: bool, tmp_path: Path
) -> None:
    """With version_rle every sample's versions are its own (reconstructed, exactly);
    without it they are interpolated (assumed): on stderr and in the log's note."""
    log = tmp_path / "run.arrow"
    result = CliRunner().invoke(
        main, ["import", "--from", "areal", str(DATA / name), "-o", str(log)]
    )
    assert result.exit_code == 0, result.output
    note = json.loads(LogReader(log).notes(IMPORT_NOTE)[0])
    samples = note["versions"]["samples"]
    line = f"versions of {samples} of {samples} samples"
    said = "reconstructed" if exact else "assumed"
    other = "assumed" if exact else "reconstructed"
    assert [f for f in note[said] if f.startswith(line)] != []
    assert [f for f in note[other] if f.startswith("versions of")] == []
    assert f"rolloutlog: {said}: {line}" in result.stderr
    word = "exactly" if exact else "interpolated"
    assert f"{line}{'' if exact else ' (no version_rle)'}, {word}" in result.stderr
