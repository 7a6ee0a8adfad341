"""`recycle` (docs/contract.md, "Weight updates and work in flight"; slime's partial
rollout): a shipped batch aborts the train work in flight (`episode_interrupted`, reason
`recycle`), which keeps its permits and resumes first, under the next version. The deciders
refuse a recycling no rule makes and hold train dispatch until the recycled work is resumed;
the account checks every step of it itself.
"""

from __future__ import annotations

import attrs
import pytest

from rolloutlog.core.config import RunConfig
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    EpisodeCompleted,
    EpisodeInterrupted,
    EpisodeResumed,
    EpisodesCancelled,
    Event,
    RunFinished,
    RunStarted,
    VersionLive,
    VersionPending,
    with_seq,
)
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.verify import verify_log
from tests.core.planted import fed

FREEZE = RunConfig(group_size=2, max_inflight=5, batch_size=2, max_off_policy_steps=1)
RECYCLE = attrs.evolve(FREEZE, recycle=True)


def _recycled(episode_id: str, t: float = 3.0, tokens: int = 3) -> EpisodeInterrupted:
    return EpisodeInterrupted(
        t=t, episode_id=episode_id, completion_tokens=tokens, reason="recycle"
    )


def _done(episode_id: str, t: float, tokens: int = 9) -> EpisodeCompleted:
    return EpisodeCompleted(
        t=t, episode_id=episode_id, reward=t % 2, prompt_tokens=2, completion_tokens=tokens
    )


def _shipped(config: RunConfig) -> tuple[ReactionLoop, list[Event]]:
    """g1 ships batch 1 while g2/0, g2/1, g3/0, g3/1 and g4/0 are in flight."""
    loop = ReactionLoop(config)
    log = loop.feed(
        RunStarted(
            t=0.0, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
        )
    )
    log += loop.feed(_done("g1/0", 1.0)) + loop.feed(_done("g1/1", 2.0))
    assert [e.kind for e in log].count("batch_shipped") == 1
    assert sorted(loop.dispatcher_state.inflight) == ["g2/0", "g2/1", "g3/0", "g3/1", "g4/0"]
    return loop, log


INFLIGHT = ("g2/0", "g2/1", "g3/0", "g3/1")


def _recycled_run(config: RunConfig = RECYCLE) -> tuple[ReactionLoop, list[Event]]:
    """Batch 1 ships; four of the five in flight are recycled, g4/0 wins its race and
    completes; v1 goes live and the four resume under it."""
    loop, log = _shipped(config)
    for episode_id in INFLIGHT:
        log += loop.feed(_recycled(episode_id))
    log += loop.feed(_done("g4/0", 3.2))
    log += loop.feed(VersionPending(t=3.5, version=1)) + loop.feed(VersionLive(t=4.0, version=1))
    for episode_id in INFLIGHT:
        log += loop.feed(EpisodeResumed(t=4.0, episode_id=episode_id, policy_version=1))
    return loop, log


def _finished() -> list[Event]:
    loop, log = _recycled_run()
    for n, episode_id in enumerate(INFLIGHT):
        log += loop.feed(_done(episode_id, 5.0 + n, tokens=8 - n))
    return log + loop.feed(RunFinished(t=9.0, reason="steps"))


def test_a_recycled_run_replays_clean_and_verifies() -> None:
    log = _finished()
    replay = replay_log(MemoryLog(log))
    assert replay.error is None and replay.summary["invariant_violations"] == []
    assert replay.summary["episodes_interrupted"] == 4
    assert replay.summary["partial_ratio"] is not None and replay.summary["partial_ratio"] > 0
    assert verify_log(MemoryLog(log)).divergence is None
    assert fed(log).violations == []


def test_train_dispatch_waits_for_the_recycled_work() -> None:
    """g4/0's completion frees a permit: under freeze it refills at once; under recycle
    nothing train goes out until the four recycled episodes are resumed."""
    loop, log = _shipped(RECYCLE)
    for episode_id in INFLIGHT:
        log += loop.feed(_recycled(episode_id))
    reaction = loop.feed(_done("g4/0", 3.2))
    assert "episode_dispatched" not in [e.kind for e in reaction]
    loop.feed(VersionPending(t=3.5, version=1))
    assert "episode_dispatched" not in [e.kind for e in loop.feed(VersionLive(t=4.0, version=1))]
    kinds = []
    for episode_id in INFLIGHT:
        kinds += [
            e.kind
            for e in loop.feed(EpisodeResumed(t=4.0, episode_id=episode_id, policy_version=1))
        ]
    assert kinds[-1] == "episode_dispatched"  # the last resumption frees the gate


@pytest.mark.parametrize(
    ("config", "words"),
    [(FREEZE, "weight_update is freeze and recycle is off"), (RECYCLE, "nothing is recycled")],
)
def test_a_recycling_before_any_ship_is_refused_at_its_seq(config: RunConfig, words: str) -> None:
    loop = ReactionLoop(config)
    log = loop.feed(
        RunStarted(
            t=0.0, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
        )
    )
    with pytest.raises(InconsistentLogError, match=words):
        loop.feed(_recycled("g1/0", t=0.5))
    recorded = MemoryLog([*log, with_seq(_recycled("g1/0", t=0.5), len(log))])
    replay = replay_log(recorded)
    assert replay.error is not None and replay.error.seq == len(log)
    assert verify_log(recorded).error is not None


@pytest.mark.parametrize(
    ("event", "words"),
    [
        (EpisodeResumed(t=3.1, episode_id="g2/0", policy_version=0), "resumes once the next"),
        (_done("g2/0", 3.1), "g2/0 is interrupted and was not resumed"),
        (_recycled("g2/0"), "g2/0 is interrupted"),
        (attrs.evolve(_recycled("g2/0"), reason="update"), "reason 'update'"),
    ],
)
def test_the_deciders_refuse_what_recycle_does_not_make(event: Event, words: str) -> None:
    loop, _ = _shipped(RECYCLE)
    loop.feed(_recycled("g2/0"))
    with pytest.raises(InconsistentLogError, match=words):
        loop.feed(event)


def _planted(log: list[Event], at: int, event: Event | None) -> list[str]:
    """The account's verdict on `log` with `event` in place of its event `at` (None: left out)."""
    planted = [*log[:at], *([] if event is None else [event]), *log[at + 1 :]]
    return fed([with_seq(e, seq) for seq, e in enumerate(planted)]).violations


def test_the_account_catches_each_broken_recycle_rule_itself() -> None:
    log = _finished()
    index = {(e.kind, getattr(e, "episode_id", None)): n for n, e in enumerate(log)}
    recycled = index[("episode_interrupted", "g3/1")]
    resumed = index[("episode_resumed", "g3/1")]
    live = index[("version_live", None)]
    # an episode in flight at the ship left generating through the update
    skipped = attrs.evolve(log[recycled], episode_id="g2/0")
    assert any("unrecycled since the ship: ['g3/1']" in v for v in _planted(log, recycled, skipped))
    # a recycled episode resumed before the next version went live
    early = [*log[:live], attrs.evolve(log[resumed], policy_version=0), *log[live:resumed]]
    early += log[resumed + 1 :]
    violations = fed([with_seq(e, seq) for seq, e in enumerate(early)]).violations
    assert any("g3/1 recycled and resumed under v0" in v for v in violations)
    # a recycling where no batch shipped: the log recorded as a freeze run
    opened = attrs.evolve(log[0], config=FREEZE.to_dict())
    assert any("reason 'recycle'" in v for v in fed([opened, *log[1:]]).violations)


def test_the_account_catches_train_dispatch_before_the_recycled_work_resumed() -> None:
    """The freeze deciders refill at once when g4/0 completes; recorded as a recycle run
    (with the same recyclings), the account says so."""
    loop, log = _shipped(FREEZE)
    recyclings = [with_seq(_recycled(e), len(log) + n) for n, e in enumerate(INFLIGHT)]
    reaction = [with_seq(e, e.seq + len(recyclings)) for e in loop.feed(_done("g4/0", 3.2))]
    assert "episode_dispatched" in [e.kind for e in reaction]
    opened = attrs.evolve(log[0], config=RECYCLE.to_dict())
    violations = fed([opened, *log[1:], *recyclings, *reaction]).violations
    assert any(
        "train dispatch before the recycled ['g2/0', 'g2/1', 'g3/0']" in v for v in violations
    )


def test_a_recycled_episode_cancelled_as_stale_before_it_resumed_holds_no_dispatch() -> None:
    """Regression (12ff4bf): g2/0, recycled at the ship, is cancelled as stale at the next
    `version_pending`, and the permits it freed refill at once. Nothing recycled is in
    flight then, so the account must not report that train dispatch as before a resumption
    (it once kept the cancelled episode waiting until the version went live)."""
    config = RunConfig(
        group_size=1, max_inflight=2, batch_size=1, max_off_policy_steps=0, recycle=True
    )
    loop = ReactionLoop(config)
    log = loop.feed(
        RunStarted(
            t=0.0, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
        )
    )
    log += loop.feed(_done("g1/0", 1.0)) + loop.feed(_recycled("g2/0", t=2.0))
    reaction = loop.feed(VersionPending(t=3.0, version=1))
    kinds = [(e.kind, getattr(e, "reason", None)) for e in reaction]
    assert kinds.index(("episodes_cancelled", "stale")) < kinds.index(("episode_dispatched", None))
    assert fed([*log, *reaction]).violations == []


@pytest.mark.parametrize(("stale_tokens", "cancelled"), [("drop", ("g3/0", "g3/1")), ("mask", ())])
def test_a_resumed_episode_is_judged_by_what_it_goes_on_under_at_the_next_update(
    stale_tokens: str, cancelled: tuple[str, ...]
) -> None:
    """g3/0 and g3/1, stamped v0, were recycled and resumed under v1; batch 2 ships and v2 is
    announced before their next recycling arrives. At step 3 (bound 1) v0 is stale and v1 is
    not: `drop` cancels them by their stamp, `mask` keeps them, as their next tokens come
    from v1, and the account must read them the same way (an account that read the stamp
    would report them as stale in flight: mutation seed 25's `_goes_on_under_3`)."""
    loop, log = _recycled_run(attrs.evolve(RECYCLE, stale_tokens=stale_tokens))
    log += loop.feed(_done("g2/0", 5.0)) + loop.feed(_done("g2/1", 5.1))
    assert "batch_shipped" in [e.kind for e in log[-7:]]
    reaction = loop.feed(VersionPending(t=5.5, version=2))
    stale = [e.episode_ids for e in reaction if isinstance(e, EpisodesCancelled)]
    assert stale == ([cancelled] if cancelled else [])
    log += reaction
    for episode_id in sorted(loop.dispatcher_state.inflight):
        log += loop.feed(_recycled(episode_id, t=5.6, tokens=4))
    log += loop.feed(VersionLive(t=6.0, version=2))
    for episode_id in sorted(loop.dispatcher_state.inflight):
        log += loop.feed(EpisodeResumed(t=6.0, episode_id=episode_id, policy_version=2))
    log += loop.feed(RunFinished(t=9.0, reason="steps"))
    replay = replay_log(MemoryLog(log))
    assert replay.error is None and replay.summary["invariant_violations"] == []
    assert verify_log(MemoryLog(log)).divergence is None
    assert fed(log).violations == []
