"""The import of a folder prime-rl 559b447 wrote itself, against what prime-rl reported.

`tests/data/prime-rl-559b447/` was written by prime-rl's own launcher and orchestrator
(`scripts/prime-rl-run/run.py --seed 1`, docs/foreign-runs.md): its records, its
`metrics.jsonl` (the orchestrator's rows and the fake trainer's), its log. The same run was
recorded live by `rolloutlog.integrations.prime_rl`: `prime-rl-559b447.recorded.jsonl`.
The import must agree with both where the folder knows: ages, stale cancellations and
drops, the drain, batches, and a trainer that takes its time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.log_reader import read_log
from rolloutlog.events.types import BatchShipped, EpisodeDispatched, EpisodesCancelled, Event
from rolloutlog.importers import import_prime_rl
from rolloutlog.record import Recorder, read_foreign_ids
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log
from tests.invoke import bad_input

DATA = Path(__file__).resolve().parents[1] / "data"
FOLDER = DATA / "prime-rl-559b447"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Event], dict[str, Any]]:
    path = tmp_path_factory.mktemp("import") / "run.arrow"
    note = import_prime_rl(FOLDER, path)
    replay = replay_log(open_log(path))
    assert replay.error is None and not replay.violations, replay.violations[:3]
    return read_log(path), note


def rows(kind: str) -> dict[int, dict[str, Any]]:
    """prime-rl's metrics rows by step: the orchestrator's, or the trainer's."""
    found = {}
    for line in (FOLDER / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if ("off_policy/dropped" in row) == (kind == "orchestrator"):
            found[row["step"]] = row
    return found


def logged(pattern: str) -> list[int]:
    text = ANSI.sub("", (FOLDER / "logs" / "attempt_1" / "orchestrator.log").read_text())
    return [int(n) for n in re.findall(pattern, text)]


def ages(events: list[Event]) -> dict[int, float]:
    """Each batch's mean trained age, (step - 1) - dispatch version, as prime-rl's
    off_policy/mean."""
    stamp = {e.episode_id: e.policy_version for e in events if isinstance(e, EpisodeDispatched)}
    return {
        e.step: sum((e.step - 1) - stamp[x] for x in e.trained_ids) / len(e.trained_ids)
        for e in events
        if isinstance(e, BatchShipped) and e.trained_ids
    }


def test_trained_ages_are_prime_rls_own(imported: tuple[list[Event], dict[str, Any]]) -> None:
    events, _ = imported
    theirs = {step: row["off_policy/mean"] for step, row in rows("orchestrator").items()}
    assert ages(events) == theirs and len(theirs) == 6


def test_batches_are_prime_rls_shipped_steps_with_its_trained_cohorts(
    imported: tuple[list[Event], dict[str, Any]],
) -> None:
    events, note = imported
    ships = [e for e in events if isinstance(e, BatchShipped)]
    assert [s.step for s in ships] == sorted(rows("orchestrator")) == [1, 2, 3, 4, 5, 6]
    for ship in ships:
        path = FOLDER / "rollouts" / f"step_{ship.step}" / "train" / "effective" / "traces.jsonl"
        assert len(ship.trained_ids) == len(path.read_text().splitlines())
    # batches cut whose every sample was pruned move no step: their cuts ride the next ship
    assert sum(len(s.episode_ids) for s in ships) == 8 * (6 + len(logged(r"Step (\d+): empty")))
    assert note["config"]["target_lag"] == 1  # prime-rl's TARGET_LAG, not the bound


def test_stale_cancellations_and_drops_are_prime_rls_counts(
    imported: tuple[list[Event], dict[str, Any]],
) -> None:
    events, note = imported
    cancels = [e for e in events if e.kind == "episodes_cancelled"]
    stale = [e for e in cancels if e.reason == "stale"]  # type: ignore[attr-defined]
    cancelled = sum(len(e.episode_ids) + e.unscheduled for e in stale)  # type: ignore[attr-defined]
    assert cancelled == sum(logged(r"Cancelled (\d+) train episodes past")) > 0
    swept = sum(logged(r"Dropped (\d+) queued traces past"))
    assert swept > 0  # the data sweeps: the reconciliation below can fail
    dropped = sum(row["off_policy/dropped"] for row in rows("orchestrator").values())
    assert note["reconciled"]["swept"] == {
        "import": swept,
        "prime-rl log": swept,
        "off_policy/dropped": dropped,
    }
    voided = note["reconciled"]["voided_with_group"]
    end = next(e.seq for e in events if e.kind == "run_finished")  # then the shutdown's
    assert sum(e.kind == "episode_dropped" for e in events[:end]) == swept + voided
    shutdown = [e for e in cancels if e.reason == "shutdown"]  # type: ignore[attr-defined]
    (drained,) = logged(r"cancelled (\d+) in-flight train episode")
    assert sum(len(e.episode_ids) for e in shutdown) == drained  # type: ignore[attr-defined]


def test_the_trainer_takes_its_time(imported: tuple[list[Event], dict[str, Any]]) -> None:
    """version v goes pending when the trainer published it, its training after batch v
    shipped: no less than the trainer's own time/forward_backward."""
    events, note = imported
    ships = {e.step: e.t for e in events if isinstance(e, BatchShipped)}
    pending = {e.version: e.t for e in events if e.kind == "version_pending"}  # type: ignore[attr-defined]
    trainer = rows("trainer")
    assert pending and note["publish_times"] == "the trainer's rows"
    for version, t in pending.items():
        assert t - ships[version] >= trainer[version]["time/forward_backward"] - 1e-3


def test_the_import_is_the_live_recording_of_the_same_run(
    imported: tuple[list[Event], dict[str, Any]],
) -> None:
    """Where both know, the import of the folder and the live recording agree event for
    event in kind, age, cancellation and drop (their times differ: dispatch times are not
    in the folder)."""
    events, _ = imported
    live = [json.loads(line) for line in (DATA / "prime-rl-559b447.recorded.jsonl").open()]
    assert Counter(e.kind for e in events) == Counter(e["kind"] for e in live)
    live_stamp = {
        e["episode_id"]: e["policy_version"] for e in live if e["kind"] == "episode_dispatched"
    }
    live_ages = {
        e["step"]: sum((e["step"] - 1) - live_stamp[x] for x in e["trained_ids"])
        / len(e["trained_ids"])
        for e in live
        if e["kind"] == "batch_shipped" and e["trained_ids"]
    }
    assert ages(events) == live_ages

    def cancels(kinds: list[tuple[str, int, int]]) -> Counter[tuple[str, int, int]]:
        return Counter(kinds)

    ours = [
        (e.reason, len(e.episode_ids), e.unscheduled)
        for e in events
        if e.kind == "episodes_cancelled"
    ]  # type: ignore[attr-defined]
    theirs = [
        (e["reason"], len(e["episode_ids"]), e["unscheduled"])
        for e in live
        if e["kind"] == "episodes_cancelled"
    ]
    assert cancels(ours) == cancels(theirs)
    drop_ages = Counter(e.age for e in events if e.kind == "episode_dropped")  # type: ignore[attr-defined]
    assert drop_ages == Counter(e["age"] for e in live if e["kind"] == "episode_dropped")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the folder that a test may damage."""
    copy = tmp_path / "run"
    shutil.copytree(FOLDER, copy)
    return copy


def import_line(folder: Path) -> str:
    return bad_input(["import", "--from", "prime-rl", str(folder), "-o", str(folder / "x.arrow")])


@pytest.mark.parametrize(
    ("keys", "value", "problem"),
    [
        (("group_size",), -4, "group_size: must be at least 1, got -4"),
        (("max_off_policy_steps",), "one", "max_off_policy_steps: expected an integer, got 'one'"),
        (("group_size",), None, "group_size: missing"),
        (("max_off_policy_steps",), None, "max_off_policy_steps: missing"),
        (("batch_size",), 2.5, "batch_size: expected an integer, got 2.5"),
        (
            ("train", "filter_zero_advantages"),
            "yes",
            "train.filter_zero_advantages: expected a boolean, got 'yes'",
        ),
        (("concurrency", "max_inflight"), 0, "concurrency.max_inflight: must be at least 1, got 0"),
    ],
)
def test_a_bad_config_field_is_one_line_naming_file_and_field(
    folder: Path, keys: tuple[str, ...], value: object, problem: str
) -> None:
    path = folder / "configs" / "orchestrator.json"
    config = json.loads(path.read_text())
    holder = config
    for key in keys[:-1]:
        holder = holder[key]
    if value is None:
        del holder[keys[-1]]
    else:
        holder[keys[-1]] = value
    path.write_text(json.dumps(config))
    assert import_line(folder) == f"rolloutlog: error: {path}: {problem}"
    assert not (folder / "x.arrow").exists()


def test_rewards_as_a_string_are_named_by_file_line_and_field(folder: Path) -> None:
    path = folder / "rollouts" / "step_2" / "train" / "all" / "traces.jsonl"
    lines = path.read_text().splitlines()
    n, record = next((n, r) for n, r in enumerate(map(json.loads, lines)) if r["traces"])
    record["traces"][0]["rewards"] = "1.0"
    lines[n] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    expected = f"{path}: line {n + 1}: traces: rewards: expected an object, got '1.0'"
    assert import_line(folder) == f"rolloutlog: error: {expected}"


def test_absent_optional_files_are_said_and_the_import_goes_on(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(folder / "logs")
    (folder / "metrics.jsonl").unlink()
    result = CliRunner().invoke(
        main, ["import", "--from", "prime-rl", str(folder), "-o", str(folder / "x.arrow")]
    )
    assert result.exit_code == 0, result.output
    absent = [line for line in result.stderr.splitlines() if ": absent: " in line]
    assert [line.split(": absent: ")[1].split(":")[0] for line in absent] == [
        "metrics.jsonl",
        "logs/*/orchestrator.log",
        "broadcasts/step_N/STABLE",
    ]
    assert not replay_log(open_log(folder / "x.arrow")).violations


def test_verify_checks_what_an_import_knows_and_says_what_it_cannot(tmp_path: Path) -> None:
    log = tmp_path / "run.arrow"
    import_prime_rl(FOLDER, log)
    result = CliRunner().invoke(main, ["verify", str(log), "--policy", "prime-rl"])
    assert result.exit_code == 0, result.output
    assert "stale cancellations, drops and batches hold" in result.stdout
    (unchecked,) = result.stderr.strip().splitlines()
    assert unchecked.startswith("rolloutlog: not checked: when and in which order it dispatched")


def test_verify_on_a_tampered_import_fails_on_what_it_checks(folder: Path) -> None:
    """The folder with one trained group's records moved two versions back (as if prime-rl
    had trained it past max_off_policy_steps): verify exits 1 on the ages and the ship
    hold the import now holds, and still says in one line what it cannot check."""
    effective = folder / "rollouts" / "step_6" / "train" / "effective" / "traces.jsonl"
    group = json.loads(effective.read_text().splitlines()[0])["group"]["id"]
    moved = 0
    for path in (folder / "rollouts").glob("step_*/train/*/traces.jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            if record["group"]["id"] == group:
                policy = record["run"]["work"]["policy"]
                assert policy["start"] >= 2
                policy["start"] -= 2
                moved += 1
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert moved > 0
    log = folder / "tampered.arrow"
    import_prime_rl(folder, log)
    result = CliRunner().invoke(main, ["verify", str(log), "--policy", "prime-rl", "--json"])
    assert result.exit_code == 1, result.output
    found = json.loads(result.stdout)
    assert not found["ok"] and found["error"] is None
    assert any(re.search(r"shipped at age [2-9]", p) for p in found["problems"]), found
    assert found["unchecked"].startswith("not checked: when and in which order it dispatched")


def test_verify_on_an_import_fails_on_a_stale_cancellation_of_a_fresh_group(
    tmp_path: Path,
) -> None:
    log = tmp_path / "bad.arrow"
    config = {"group_size": 2, "max_inflight": 2, "batch_size": 2, "max_off_policy_steps": 1}
    with Recorder(log, config=config, code_version="test", notes={"import": "{}"}) as rec:
        rec.open_group(0.0, "a", env="e", task="t")
        rec.dispatch(0.0, "a", "a/0")
        rec.cancel(1.0, "a", ["a/0"], unscheduled=1, reason="stale")  # at step 1: fresh
    result = CliRunner().invoke(main, ["verify", str(log)])
    assert result.exit_code == 1, result.output
    assert "seq 3 (episodes_cancelled): g1 is not stale" in result.stdout


def test_publish_times_come_from_stable_marks_where_they_are(folder: Path, tmp_path: Path) -> None:
    """The trainer touches broadcasts/step_N/STABLE as it publishes v_N (git keeps no
    mtimes, so the committed folder has none): where they are, they are the publish times."""
    for step, row in rows("trainer").items():
        marker = folder / "broadcasts" / f"step_{step}" / "STABLE"
        marker.parent.mkdir(parents=True)
        marker.touch()
        os.utime(marker, (row["time"] - 0.25, row["time"] - 0.25))
    by_rows, by_marks = tmp_path / "rows.arrow", tmp_path / "marks.arrow"
    import_prime_rl(FOLDER, by_rows)
    note = import_prime_rl(folder, by_marks)
    assert note["publish_times"] == "STABLE marks" and note["absent"] == []

    def pending(path: Path) -> dict[int, float]:
        return {e.version: e.t for e in read_log(path) if e.kind == "version_pending"}  # type: ignore[attr-defined]

    earlier = [pending(by_rows)[v] - t for v, t in pending(by_marks).items()]
    assert earlier and all(-1e-6 <= d <= 0.25 + 1e-6 for d in earlier) and max(earlier) > 0.2


def test_an_overload_cancellation_the_log_names_is_no_stale_drop(
    folder: Path, tmp_path: Path
) -> None:
    """A DEBUG drop line with reason overload (prime-rl's `cancel_inflight`) for a group the
    drain found in flight, at the last step: its missing members are cancelled for overload,
    its arrivals scored, not voided; the drain's count of runs in flight is then made up by
    the other open groups and unnamed ones."""
    before = tmp_path / "before.arrow"
    note = import_prime_rl(folder, before)
    ours = read_foreign_ids(before)
    drained = [
        e
        for e in read_log(before)
        if isinstance(e, EpisodesCancelled) and e.reason == "shutdown" and e.episode_ids
    ]
    group = max(
        (e for e in drained if "never-arrived" not in ours[e.group_id]),
        key=lambda e: len(e.episode_ids),
    )
    log = folder / "logs" / "attempt_1" / "orchestrator.log"
    text = log.read_text()
    (stamp,) = re.findall(r"(\d\d:\d\d:\d\d) .*draining pipeline", ANSI.sub("", text))
    n = len(group.episode_ids)
    line = (
        f"{stamp}   DEBUG drop train | group={ours[group.group_id][:8]} env=reverse "
        f"reason=overload | cancelled={n} (inflight={n} unscheduled=0) [dispatcher.py::680]\n"
    )
    at = text.index(stamp)
    log.write_text(text[:at] + line + text[at:])
    path = tmp_path / "run.arrow"
    damaged = import_prime_rl(folder, path)
    events = read_log(path)
    overload = [e for e in events if isinstance(e, EpisodesCancelled) and e.reason == "overload"]
    assert [(len(e.episode_ids), e.unscheduled) for e in overload] == [(n, 0)]
    stale = note["reconciled"]["stale_cancelled"]
    assert damaged["reconciled"]["stale_cancelled"] == stale and stale["import"] > 0
    counts = damaged["reconciled"]["drained_inflight"]
    assert counts["prime-rl log"] == counts["import"] == sum(len(e.episode_ids) for e in drained)
    assert not replay_log(open_log(path)).violations
