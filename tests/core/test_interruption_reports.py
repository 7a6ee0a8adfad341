"""The account's own reports of interruptions no rule makes, each whole: the seq, the kind and
the problem (docs/contract.md property 13).

The deciders refuse these events too, so a log that holds one is planted: one event put into
a valid interrupting run, and the account alone is asked. Each report must name its event;
a report at another seq or kind, or without its problem, is a report of nothing.
"""

from __future__ import annotations

import attrs

from rolloutlog.events.types import (
    EpisodeInterrupted,
    EpisodeResumed,
    Event,
    GroupOpened,
    VersionLive,
    VersionPending,
    with_seq,
)
from tests.core.interrupted_runs import INTERRUPT, done, started
from tests.core.planted import fed


def _interrupt(episode_id: str, tokens: int, t: float = 3.0) -> EpisodeInterrupted:
    return EpisodeInterrupted(t=t, episode_id=episode_id, completion_tokens=tokens, reason="update")


def _twice_updated() -> list[Event]:
    """v1 interrupts g2 and g3 (5 tokens each), which resume under v1; g2 ships batch 2 and
    v2 is announced while g3 is still generating (a bound of 2 keeps it fresh)."""
    loop, log = started(attrs.evolve(INTERRUPT, max_off_policy_steps=2))
    log += loop.feed(done("g1/0", 1.0)) + loop.feed(done("g1/1", 2.0))
    log += loop.feed(VersionPending(t=3.0, version=1))
    for episode_id in ("g2/0", "g2/1", "g3/0", "g3/1"):
        log += loop.feed(_interrupt(episode_id, 5))
    log += loop.feed(VersionLive(t=4.0, version=1))
    for episode_id in ("g2/0", "g2/1", "g3/0", "g3/1"):
        log += loop.feed(EpisodeResumed(t=4.0, episode_id=episode_id, policy_version=1))
    log += loop.feed(done("g2/0", 5.0)) + loop.feed(done("g2/1", 6.0))
    return log + loop.feed(VersionPending(t=7.0, version=2))


def _reports_with(log: list[Event], event: Event) -> tuple[int, list[str]]:
    """The seq `event` gets at the end of `log`, and the account's reports on the whole."""
    planted = [*log, with_seq(event, len(log))]
    return len(log), fed(planted).violations


def test_a_second_resumption_is_reported_at_its_seq() -> None:
    log = _twice_updated()
    seq, reports = _reports_with(log, EpisodeResumed(t=7.0, episode_id="g3/0", policy_version=1))
    assert reports == [f"seq {seq} (episode_resumed): g3/0 was not interrupted"]


def test_an_interruption_of_work_not_in_flight_is_reported_at_its_seq() -> None:
    log = _twice_updated()
    seq, reports = _reports_with(log, _interrupt("g2/0", 9, t=7.0))
    assert reports == [f"seq {seq} (episode_interrupted): g2/0 is not in flight"]


def test_an_interruption_with_fewer_tokens_than_the_last_is_reported() -> None:
    log = _twice_updated()
    seq, reports = _reports_with(log, _interrupt("g3/0", 4, t=7.0))
    assert reports == [f"seq {seq} (episode_interrupted): g3/0 has 4 tokens, fewer than 5 before"]


def test_an_interruption_of_a_frozen_source_is_reported() -> None:
    """g1 is frozen (a fraction of 0.3 at seed 0); g2 ships batch 1 and v1 is announced."""
    loop, log = started(attrs.evolve(INTERRUPT, frozen_fraction=0.3))
    assert [e.frozen for e in log if isinstance(e, GroupOpened)] == [True, False]
    log += loop.feed(done("g2/0", 1.0)) + loop.feed(done("g2/1", 2.0))
    log += loop.feed(VersionPending(t=3.0, version=1))
    seq, reports = _reports_with(log, _interrupt("g1/0", 0))
    assert reports == [f"seq {seq} (episode_interrupted): g1/0 is from a frozen source"]


def test_an_interruption_no_rule_makes_is_reported_with_its_reason() -> None:
    log = _twice_updated()
    recycled = attrs.evolve(_interrupt("g3/0", 9, t=7.0), reason="recycle")
    seq, reports = _reports_with(log, recycled)
    assert reports == [
        f"seq {seq} (episode_interrupted): reason 'recycle' under weight_update 'interrupt'"
    ]
