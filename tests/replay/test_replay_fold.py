"""The folds: the columnar fold equals the plain one (the equivalence harness, >= 300 logs
under the `ci` profile), determinism of the digest chain, and bad input naming its seq
with everything before it still reported."""

from __future__ import annotations

import random
from pathlib import Path

import attrs
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from hypothesis import given

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.log_writer import write_log
from rolloutlog.events.schema import (
    LOG_SCHEMA,
    SCHEMA_VERSION,
    BatchStamp,
    batch_checksum,
    events_to_batch,
)
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    Event,
    RunFinished,
    RunStarted,
    VersionPending,
)
from rolloutlog.replay.fold import fold_events
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog, open_log
from rolloutlog.testing.equivalence import (
    COLUMNAR_FOLD,
    PLAIN_FOLD,
    TODAYS_DECIDERS,
    assert_equivalent,
    first_difference,
)
from rolloutlog.testing.scripted_world import ScriptedWorld
from rolloutlog.testing.strategies import Tampered, equivalence_logs, tampered_logs
from tests.replay.replay_helpers import small_log, small_run, unfinished_log


# The columnar fold hands a log with interruptions to the plain one (replay/columnar.py):
# compare it where it folds itself.
@given(equivalence_logs(weight_update="freeze", recycle=False))
def test_the_columnar_fold_equals_the_plain_fold(log: list[Event]) -> None:
    assert COLUMNAR_FOLD(log).path == "columnar"  # it vouched for every row: a real comparison
    assert_equivalent(log, PLAIN_FOLD, COLUMNAR_FOLD)


@given(tampered_logs(decided_only=False))
def test_the_columnar_fold_equals_the_plain_fold_on_damaged_logs(tampered: Tampered) -> None:
    """Whatever the plain fold reports (an error, a violation), the replay reports too."""
    assert_equivalent(tampered.log, PLAIN_FOLD, COLUMNAR_FOLD)


# Caught the columnar fold settling only some world events: a world event between a G-th
# arrival and its redundant cancellation went unreported (the plain fold reports two).
def test_a_redundant_cancel_after_the_next_world_event_is_reported_on_both_paths() -> None:
    run = RunConfig.from_mapping(
        {"group_size": 2, "max_inflight": 3, "batch_size": 2, "group_redundancy": 1}
    )
    log = small_run(run)
    index = next(
        i for i, e in enumerate(log) if isinstance(e, EpisodeCompleted) and e.episode_id == "g1/1"
    )
    assert log[index + 1].kind == "episodes_cancelled"  # g1/2, owed at the G-th arrival
    duplicated = [*log[: index + 1], log[index], *log[index + 1 :]]
    damaged = [attrs.evolve(event, seq=seq) for seq, event in enumerate(duplicated)]
    violations = PLAIN_FOLD(damaged).summary["invariant_violations"]
    assert [v.split(":")[0] for v in violations] == [
        f"seq {index} (episode_completed)",
        f"seq {index + 2} (episodes_cancelled)",
    ]
    assert_equivalent(damaged, PLAIN_FOLD, COLUMNAR_FOLD)


def _ship_wait_run() -> list[Event]:
    """A run whose second batch waits for g2 (opened at v0, at its last chance at step 2):
    the wait runs from g3's scoring (t = 5) to the ship in g2's reaction (t = 7)."""
    run = RunConfig.from_mapping(
        {
            "group_size": 2,
            "max_inflight": 4,
            "batch_size": 2,
            "max_off_policy_steps": 1,
            "gate_lag": "one",
            "ship_wait": "last-chance",
            "admission": "outstanding",
        }
    )
    loop = ReactionLoop(run)
    started = RunStarted(
        t=0.0, config=run.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
    )
    log = loop.feed(started)
    world: list[Event] = [
        EpisodeCompleted(t=t, episode_id=e, reward=t, prompt_tokens=1, completion_tokens=1)
        for t, e in ((1.0, "g1/0"), (2.0, "g1/1"))
    ]
    world.append(VersionPending(t=3.0, version=1))
    world += [
        EpisodeCompleted(t=t, episode_id=e, reward=t, prompt_tokens=1, completion_tokens=1)
        for t, e in ((4.0, "g3/0"), (5.0, "g3/1"), (6.0, "g2/0"), (7.0, "g2/1"))
    ]
    for event in [*world, RunFinished(t=8.0, reason="done")]:
        log += loop.feed(event)
    return log


# Caught by the damaged-log comparison (admission outstanding, last-chance ship wait,
# gate_lag one, bound 1: ship_wait_seconds 54.0 columnar, 49.75 plain): the columnar fold
# timed every event by its world event's `t`, the plain fold reads each event's own, and a
# damaged log's reaction may carry another.
def test_a_reaction_carrying_another_time_is_timed_alike_on_both_paths() -> None:
    log = _ship_wait_run()
    assert PLAIN_FOLD(log).summary["ship_wait_seconds"] == 2.0  # from t = 5 to t = 7
    ship = next(e for e in log if isinstance(e, BatchShipped) and e.step == 2)
    assert ship.t == 7.0  # in g2/1's reaction
    damaged = [attrs.evolve(e, t=7.5) if e is ship else e for e in log]
    plain, columnar = PLAIN_FOLD(damaged), COLUMNAR_FOLD(damaged)
    assert columnar.path == "columnar"  # it folded the log itself
    assert plain.summary["ship_wait_seconds"] == columnar.summary["ship_wait_seconds"] == 2.5
    assert_equivalent(damaged, PLAIN_FOLD, COLUMNAR_FOLD)


@given(equivalence_logs())
def test_folding_twice_and_re_deciding_give_one_digest_chain(log: list[Event]) -> None:
    first, second = PLAIN_FOLD(log), PLAIN_FOLD(log)
    assert first.digests == second.digests and len(first.digests) == len(log)
    assert first_difference(log, PLAIN_FOLD, TODAYS_DECIDERS, ("events", "digests")) is None


def test_a_replay_without_violations_has_an_empty_list() -> None:
    replay = replay_log(MemoryLog(small_log()))
    assert replay.summary["invariant_violations"] == [] and replay.error is None
    assert replay.summary["events"] == len(small_log())


@pytest.mark.parametrize("columnar", [True, False], ids=["columnar", "plain"])
def test_a_batch_for_the_wrong_step_stops_the_fold_and_keeps_what_came_before(columnar) -> None:
    log = small_log()
    index = next(i for i, e in enumerate(log) if e.kind == "batch_shipped")
    log[index] = attrs.evolve(log[index], step=3)
    replay = replay_log(MemoryLog(log), columnar=columnar)
    assert replay.error is not None and str(replay.error).startswith(f"seq {index} ")
    assert replay.events == index
    assert replay.summary == replay_log(MemoryLog(log[:index])).summary  # all before it


def test_a_completion_for_an_episode_never_dispatched_is_bad_input() -> None:
    log = unfinished_log()
    bogus = attrs.evolve(log[4], seq=len(log), episode_id="g7/1")
    replay = replay_log(MemoryLog([*log, bogus]))
    assert "never dispatched" in str(replay.error)
    assert str(replay.error).startswith(f"seq {len(log)} ")
    assert replay.summary["events"] == len(log)


def test_a_seq_gap_is_bad_input_naming_the_seq() -> None:
    log = small_log()
    gapped = [*log[:5], *(attrs.evolve(e, seq=e.seq + 1) for e in log[5:])]
    result = fold_events(gapped)
    assert result.error is not None and "seq gap" in str(result.error)
    assert result.error.seq == 6
    assert replay_log(MemoryLog(gapped)).events == 5


# Caught by the tampered-log suite: a group_scored naming a member that never arrived made
# the sink's own lookup raise KeyError, a traceback instead of an error naming the seq.
def test_a_score_for_a_member_that_never_arrived_is_bad_input() -> None:
    log = small_log()
    index = next(i for i, e in enumerate(log) if e.kind == "group_scored" and e.admitted)  # type: ignore[attr-defined]
    log[index] = attrs.evolve(log[index], episode_ids=("g1/0", "g1/7"), advantages=(0.0, 0.0))
    replay = replay_log(MemoryLog(log))
    assert replay.error is not None and str(replay.error).startswith(f"seq {index} ")


def test_a_long_realistic_log_folds_identically_from_a_file(tmp_path: Path) -> None:
    """Thousands of events over several record batches of a real (compressed) log file."""
    config = RunConfig.from_mapping(
        {"max_inflight": 64, "group_size": 8, "batch_size": 32, "max_off_policy_steps": 2}
    )
    weights = {"complete": 200, "fail": 3, "publish": 6, "limit": 1, "overload": 1, "late": 2}
    world = ScriptedWorld(ReactionLoop(config), random.Random(5).randrange, weights=weights)
    for _ in range(3000):
        world.step()
    path = tmp_path / "long.arrow"
    write_log(path, world.finish(), batch_events=1024)
    columnar = replay_log(open_log(path), keep_digests=True)
    plain = replay_log(open_log(path), keep_digests=True, columnar=False)
    assert columnar.path == "columnar" and columnar.error is None
    assert columnar.summary == plain.summary and columnar.digests == plain.digests
    assert columnar.summary["events"] > 5000 and columnar.summary["episodes_dropped_stale"] > 0


def test_a_second_run_started_is_refused_on_both_paths(tmp_path: Path) -> None:
    """A hand-made Arrow file (the writer refuses to write one) with run_started at seq 5."""
    log = small_log()
    log[5] = attrs.evolve(log[0], seq=5)
    path = tmp_path / "two-starts.arrow"
    with pa.OSFile(str(path), "wb") as sink, ipc.new_stream(sink, LOG_SCHEMA) as stream:
        batch = events_to_batch(log)
        stream.write_batch(batch, custom_metadata=_stamp(batch, len(log)))
    columnar, plain = replay_log(open_log(path)), replay_log(open_log(path), columnar=False)
    assert str(columnar.error) == str(plain.error) and "seq 0" in str(plain.error)
    assert columnar.summary == plain.summary and columnar.events == 5


def _stamp(batch: pa.RecordBatch, rows: int) -> dict[bytes, bytes]:
    return BatchStamp(0, rows - 1, batch_checksum(batch)).to_metadata()
