"""`episode_interrupted` and `episode_resumed` (docs/contract.md, "Weight updates and work in
flight", property 13): only the world writes them, and only where the run's rules make it.
Under `weight_update = freeze` no rule does, so the deciders refuse them at their seq;
under `interrupt` an update interrupts what is in flight, which goes on under the new
version with its tokens counted once, and the account checks every step of that itself.
"""

from __future__ import annotations

import attrs
import pytest

from rolloutlog.core.config import RunConfig
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.types import (
    EpisodeInterrupted,
    EpisodeResumed,
    Event,
    VersionLive,
    VersionPending,
    with_seq,
)
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.verify import verify_log
from tests.core.interrupted_runs import (
    FREEZE,
    INTERRUPT,
    done,
    finished_interrupted_run,
    started,
)
from tests.core.planted import fed

INTERRUPTED = EpisodeInterrupted(t=1.0, episode_id="g1/0", completion_tokens=3, reason="update")
RESUMED = EpisodeResumed(t=1.0, episode_id="g1/0", policy_version=0)


@pytest.mark.parametrize(
    ("event", "words"),
    [(INTERRUPTED, "weight_update is freeze and recycle is off"), (RESUMED, "was not interrupted")],
)
def test_a_freeze_run_refuses_them_at_their_seq(event: Event, words: str) -> None:
    loop, log = started(FREEZE)
    seq = loop.next_seq
    with pytest.raises(InconsistentLogError, match=words) as refused:
        loop.feed(event)
    assert (refused.value.seq, refused.value.kind) == (seq, event.kind)
    recorded = MemoryLog([*log, with_seq(event, len(log))])
    replay = replay_log(recorded)
    assert replay.error is not None and replay.error.seq == len(log)
    assert verify_log(recorded).error is not None


def test_an_interrupted_run_replays_clean_and_verifies() -> None:
    log = finished_interrupted_run()
    shipped = [e for e in log if e.kind == "batch_shipped"]
    assert len(shipped) == 2 and shipped[1].episode_ids == ("g2/0", "g2/1")  # type: ignore[attr-defined]
    assert shipped[1].tokens == 2 * 2 + 8 + 7  # type: ignore[attr-defined]  # counted once
    replay = replay_log(MemoryLog(log))
    assert replay.error is None and replay.summary["invariant_violations"] == []
    # g2 went out at v0 and trained at step 2: its age reads that start, not v1; so g3,
    # at step 3, is past the bound although its tokens all came from v1
    assert replay.summary["trained_age_histogram"] == {"0": 2, "1": 2}
    assert replay.summary["episodes_dropped_stale"] == 2
    # batch 2 trains g2/0 (3 tokens of v0, 5 of v1: age 1 and 0 at step 2) and g2/1 (no
    # token before its interruption, 7 of v1); g1's 9 + 9 trained at step 1 are age 0
    assert replay.summary["trained_token_age_histogram"] == {"0": 9 + 9 + 5 + 7, "1": 3}
    assert verify_log(MemoryLog(log)).divergence is None
    assert fed(log).violations == []


@pytest.mark.parametrize(
    ("event", "words"),
    [
        (done("g2/0", 3.5), "g2/0 is interrupted and was not resumed"),
        (attrs.evolve(INTERRUPTED, episode_id="g2/0"), "g2/0 is interrupted"),
        (EpisodeResumed(t=3.5, episode_id="g2/0", policy_version=1), "inference serves v0"),
        (attrs.evolve(INTERRUPTED, episode_id="g9/0"), "g9/0 is not in flight"),
        (attrs.evolve(INTERRUPTED, reason="recycle"), "reason 'recycle'"),
    ],
)
def test_the_deciders_refuse_what_no_rule_makes(event: Event, words: str) -> None:
    loop, _ = started(INTERRUPT)
    loop.feed(done("g1/0", 1.0))
    loop.feed(done("g1/1", 2.0))
    loop.feed(VersionPending(t=3.0, version=1))
    loop.feed(EpisodeInterrupted(t=3.0, episode_id="g2/0", completion_tokens=3, reason="update"))
    seq = loop.next_seq
    with pytest.raises(InconsistentLogError, match=words) as refused:
        loop.feed(event)
    assert (refused.value.seq, refused.value.kind) == (seq, event.kind)


def test_an_update_interruption_under_recycle_alone_is_refused_for_its_reason() -> None:
    """Recycle on, weight_update freeze: only a recycle interrupts, and the refusal of an
    update's says so without calling recycle off."""
    loop, _ = started(attrs.evolve(FREEZE, recycle=True))
    with pytest.raises(InconsistentLogError) as refused:
        loop.feed(INTERRUPTED)
    assert refused.value.problem == "reason 'update' under weight_update 'freeze'"


def test_no_interruption_without_an_update_under_way() -> None:
    loop, _ = started(INTERRUPT)
    with pytest.raises(InconsistentLogError, match="no weight update under way"):
        loop.feed(INTERRUPTED)


def _planted(log: list[Event], at: int, event: Event) -> list[str]:
    """The account's verdict on `log` with `event` in place of its event `at`."""
    planted = [*log[:at], event, *log[at + 1 :]]
    return fed([with_seq(e, seq) for seq, e in enumerate(planted)]).violations


def test_the_account_catches_each_broken_rule_itself() -> None:
    log = finished_interrupted_run()
    index = {(e.kind, getattr(e, "episode_id", None)): n for n, e in enumerate(log)}
    resumed = index[("episode_resumed", "g2/0")]
    completed = index[("episode_completed", "g2/0")]
    interrupted = index[("episode_interrupted", "g3/1")]
    wrong_version = attrs.evolve(log[resumed], policy_version=0)
    report = f"seq {resumed} (episode_resumed): resumed under v0, but inference serves v1"
    assert report in _planted(log, resumed, wrong_version)
    fewer = attrs.evolve(log[completed], completion_tokens=2)
    assert any("completes with 2 tokens, had 3" in v for v in _planted(log, completed, fewer))
    skipped = attrs.evolve(log[interrupted], episode_id="g2/0")
    assert any("g3/1" in v and "uninterrupted" in v for v in _planted(log, interrupted, skipped))
    unresumed = attrs.evolve(log[resumed], episode_id="g1/0")
    assert any(
        "g2/0 is interrupted and was not resumed" in v for v in _planted(log, resumed, unresumed)
    )


DRAIN = attrs.evolve(FREEZE, weight_update="drain")


def _update_waits(config: RunConfig) -> tuple[ReactionLoop, list[Event]]:
    """Batch 1 ships, v1 is announced, and g2/0 arrives while the update waits."""
    loop, log = started(config)
    for event in (done("g1/0", 1.0), done("g1/1", 2.0), VersionPending(t=3.0, version=1)):
        log += loop.feed(event)
    return loop, log + loop.feed(done("g2/0", 3.5))


def test_a_drained_update_holds_train_dispatch_until_it_is_live() -> None:
    loop, log = _update_waits(DRAIN)
    assert log[-1].kind == "episode_completed"  # the freed permit stays free
    reaction = loop.feed(VersionLive(t=4.0, version=1))
    assert [e.kind for e in reaction[1:]] == ["group_opened", "episode_dispatched"]
    assert fed([*log, *reaction]).violations == [
        "seq 16 (version_live): in flight undrained at the update: ['g2/1', 'g3/0', 'g3/1']"
    ]


def test_the_account_catches_train_dispatch_while_a_drained_update_waits() -> None:
    """The freeze deciders refill at once; recorded as a drain run, the account says so."""
    _, log = _update_waits(FREEZE)
    assert log[-1].kind == "episode_dispatched"
    opened = attrs.evolve(log[0], config=DRAIN.to_dict())
    assert any("train dispatch while v1 waits" in v for v in fed([opened, *log[1:]]).violations)
