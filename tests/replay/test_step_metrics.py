"""The age split: a hand-written log whose split is known, `rolloutlog metrics`, and the
property that on every trained episode both parts are >= 0 and add up to its age."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import attrs
import pyarrow.parquet as pq
import pytest
from hypothesis import given

from rolloutlog.core.config import RunConfig
from rolloutlog.core.staleness import rollout_age
from rolloutlog.events import types as ev
from rolloutlog.events.log_writer import write_log
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.replay.explain import WAIT_COLUMNS
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.step_metrics import STEP_COLUMNS, StepMetrics, age_split
from rolloutlog.testing.strategies import equivalence_logs
from tests.invoke import run

CONFIG = RunConfig(group_size=1, batch_size=1, max_inflight=2, max_off_policy_steps=2)


def _group(number: int, version: int, step: int) -> list[ev.Event]:
    group_id = f"g{number}"
    return [
        ev.GroupOpened(
            t=0.0,
            group_id=group_id,
            work="train",
            env="e",
            task_id=f"t{number}",
            group_size=1,
            policy_version=version,
            step=step,
            frozen=False,
        ),
        ev.EpisodeDispatched(
            t=0.0, episode_id=f"{group_id}/0", group_id=group_id, member=0, policy_version=version
        ),
    ]


def _arrives(number: int, t: float, reward: float) -> list[ev.Event]:
    group_id = f"g{number}"
    episode_id = f"{group_id}/0"
    return [
        ev.EpisodeCompleted(
            t=t, episode_id=episode_id, reward=reward, prompt_tokens=1, completion_tokens=1
        ),
        ev.GroupScored(
            t=t, group_id=group_id, episode_ids=(episode_id,), advantages=(0.0,), admitted=True
        ),
    ]


def _ships(step: int, t: float, number: int) -> ev.BatchShipped:
    ids = (f"g{number}/0",)
    return ev.BatchShipped(t=t, step=step, episode_ids=ids, trained_ids=ids, tokens=2)


def hand_log() -> list[ev.Event]:
    """Three batches of one episode each, with a known split:

    step 1 trains g1/0 (v0, arrived under v0): age 0 = 0 in flight + 0 queued;
    step 2 trains g2/0 (v0, arrived under v1): age 1 = 1 in flight + 0 queued;
    step 3 trains g3/0 (v1, arrived under v1): age 1 = 0 in flight + 1 queued.
    When v1 goes pending (step 2) g2/0 is in flight at age 1; when v2 does, nothing is.
    """
    events: list[ev.Event] = [
        ev.RunStarted(
            t=0.0, config=CONFIG.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
        ),
        *_group(1, 0, 1),
        *_group(2, 0, 1),
        *_arrives(1, 1.0, 1.0),
        _ships(1, 1.0, 1),
        ev.VersionPending(t=2.0, version=1),
        ev.VersionLive(t=3.0, version=1),
        *_arrives(2, 4.0, 0.5),
        *_group(3, 1, 2),
        *_arrives(3, 5.0, 0.0),
        _ships(2, 5.0, 2),
        ev.VersionPending(t=6.0, version=2),
        ev.VersionLive(t=7.0, version=2),
        _ships(3, 8.0, 3),
        ev.RunFinished(t=9.0, reason="done"),
    ]
    return [attrs.evolve(event, seq=seq) for seq, event in enumerate(events)]


# step, trained, age mean/max, in flight mean/max, in queue mean/max, dispatcher mean/max,
# mean reward (off_policy/dropped, /requeued, /withheld, /evicted, /leftover and
# cancelled/redundant are 0 throughout; the run values leave the last out)
EXPECTED_ROWS = [
    (1, 1, 0, 0, 0, 0, 0, 0, None, None, 1.0),
    (2, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0.5),
    (3, 1, 1, 1, 0, 0, 1, 1, None, None, 0.0),
]
EXPECTED_RUN = {
    "off_policy/mean": 2 / 3,
    "off_policy/max": 1,
    "off_policy/in_flight/mean": 1 / 3,
    "off_policy/in_flight/max": 1,
    "off_policy/in_queue/mean": 1 / 3,
    "off_policy/in_queue/max": 1,
    "off_policy/dropped": 0,
    "off_policy/requeued": 0,
    "off_policy/evicted": 0,
    "dispatcher/off_policy/mean": 1,
    "dispatcher/off_policy/max": 1,
}


def _row(row: dict[str, object]) -> tuple[object, ...]:
    dropped = (
        "off_policy/dropped",
        "off_policy/requeued",
        "off_policy/withheld",
        "off_policy/evicted",
        "off_policy/leftover",
        "cancelled/redundant",
    )
    return tuple(row[name] for name in STEP_COLUMNS if name not in ("time", *dropped))


def test_the_hand_written_log_splits_as_computed_by_hand() -> None:
    metrics = StepMetrics.from_batches(MemoryLog(hand_log()).batches())
    assert [_row(row) for row in metrics.rows] == EXPECTED_ROWS
    assert [row["off_policy/dropped"] for row in metrics.rows] == [0, 0, 0]
    assert metrics.run_values() == pytest.approx(EXPECTED_RUN)
    by_events = StepMetrics()
    for event in hand_log():
        by_events.observe(event)
    assert by_events.rows == metrics.rows and by_events.run_values() == metrics.run_values()


def test_metrics_writes_the_table_and_replay_carries_the_run_values(tmp_path: Path) -> None:
    log = tmp_path / "hand.arrow"
    write_log(log, hand_log())
    written = run("metrics", log)
    assert written.exit_code == 0, written.output
    rows = list(csv.DictReader(io.StringIO(written.stdout)))
    assert [r["off_policy/in_queue/mean"] for r in rows] == ["0", "0", "1"]
    assert list(rows[0]) == [*STEP_COLUMNS, *WAIT_COLUMNS]
    lines = run("metrics", log, "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line)["off_policy/in_flight/max"] for line in lines] == [0, 1, 0]
    parquet = tmp_path / "steps.parquet"
    assert run("metrics", log, "--format", "parquet", "-o", parquet).exit_code == 0
    assert pq.read_table(parquet).column("dispatcher/off_policy/max").to_pylist() == [
        None,
        1,
        None,
    ]
    refused = run("metrics", log, "--format", "parquet")
    assert refused.exit_code == 2 and "-o FILE" in refused.stderr
    replayed = json.loads(run("replay", "--json", log).stdout)
    assert {k: replayed[k] for k in EXPECTED_RUN} == pytest.approx(EXPECTED_RUN)


def _split_by_hand(log: list[ev.Event]) -> list[tuple[int, int, int]]:
    """(age, in_flight, in_queue) of every trained episode, recomputed from the log."""
    dispatched: dict[str, int] = {}
    live, arrived_under, out = 0, {}, []
    for event in log:
        if isinstance(event, ev.EpisodeDispatched):
            dispatched[event.episode_id] = event.policy_version
        elif isinstance(event, ev.VersionLive):
            live = event.version
        elif event.kind in ("episode_completed", "episode_failed"):
            arrived_under.setdefault(event.episode_id, live)  # type: ignore[union-attr]
        elif isinstance(event, ev.BatchShipped):
            for episode_id in event.trained_ids:
                version = dispatched[episode_id]
                age = rollout_age(version, event.step)
                out.append((age, *age_split(age, version, arrived_under[episode_id])))
    return out


@given(equivalence_logs(weight_update="freeze", recycle=False))  # the columnar fold's logs
def test_on_every_trained_episode_both_parts_are_non_negative_and_add_up_to_its_age(
    log: list[ev.Event],
) -> None:
    splits = _split_by_hand(log)
    assert all(f >= 0 and q >= 0 and f + q == age for age, f, q in splits)
    metrics = StepMetrics.from_batches(MemoryLog(log).batches()).run_values()
    fused = replay_log(MemoryLog(log, batch_events=64), age_split=True)  # `replay --json`'s
    assert fused.path == "columnar" and fused.age_split == metrics
    if splits:
        count = len(splits)
        assert metrics["off_policy/mean"] == pytest.approx(sum(s[0] for s in splits) / count)
        assert metrics["off_policy/in_flight/mean"] == pytest.approx(
            sum(s[1] for s in splits) / count
        )
        assert metrics["off_policy/in_queue/max"] == max(s[2] for s in splits)
    else:
        assert metrics["off_policy/mean"] is None


def test_simulate_and_replay_report_the_same_run_values(tmp_path: Path) -> None:
    """The loop observer and the batch reader agree; stale drops match the summary's."""
    log = tmp_path / "chaos.arrow"
    simulated = run("simulate", "--scenario", "chaos", "--steps", "8", "--json", "--log", log)
    assert simulated.exit_code == 0, simulated.output
    report = json.loads(simulated.stdout)
    replayed = json.loads(run("replay", "--json", log).stdout)
    assert {k: report[k] for k in EXPECTED_RUN} == {k: replayed[k] for k in EXPECTED_RUN}
    assert report["off_policy/dropped"] == report["episodes_dropped_stale"]
    assert report["off_policy/mean"] == pytest.approx(report["mean_trained_age"])
