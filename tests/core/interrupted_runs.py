"""Hand-built interrupted runs for the tests of `episode_interrupted` / `episode_resumed`."""

from __future__ import annotations

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    EpisodeCompleted,
    EpisodeInterrupted,
    EpisodeResumed,
    Event,
    RunFinished,
    RunStarted,
    VersionLive,
    VersionPending,
)

FREEZE = RunConfig(group_size=2, max_inflight=4, batch_size=2, max_off_policy_steps=1)
INTERRUPT = attrs.evolve(FREEZE, weight_update="interrupt")


def started(config: RunConfig) -> tuple[ReactionLoop, list[Event]]:
    """A loop past `run_started`: two groups of two in flight."""
    loop = ReactionLoop(config)
    log = loop.feed(
        RunStarted(
            t=0.0, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
        )
    )
    assert sorted(loop.dispatcher_state.inflight) == ["g1/0", "g1/1", "g2/0", "g2/1"]
    return loop, log


def done(episode_id: str, t: float, tokens: int = 9) -> EpisodeCompleted:
    """A completion at `t`, rewarded by its parity."""
    return EpisodeCompleted(
        t=t, episode_id=episode_id, reward=t % 2, prompt_tokens=2, completion_tokens=tokens
    )


def interrupted_run() -> tuple[ReactionLoop, list[Event]]:
    """g1 ships batch 1; v1 interrupts g2 and g3 (g2/0 with 3 tokens), which resume under v1."""
    loop, log = started(INTERRUPT)
    log += loop.feed(done("g1/0", 1.0)) + loop.feed(done("g1/1", 2.0))
    log += loop.feed(VersionPending(t=3.0, version=1))
    inflight = sorted(loop.dispatcher_state.inflight)
    assert inflight == ["g2/0", "g2/1", "g3/0", "g3/1"]
    for n, episode_id in enumerate(inflight):
        tokens = 3 if n == 0 else 0
        log += loop.feed(
            EpisodeInterrupted(
                t=3.0, episode_id=episode_id, completion_tokens=tokens, reason="update"
            )
        )
    log += loop.feed(VersionLive(t=4.0, version=1))
    for episode_id in inflight:
        log += loop.feed(EpisodeResumed(t=4.0, episode_id=episode_id, policy_version=1))
    return loop, log


def finished_interrupted_run() -> list[Event]:
    """`interrupted_run`, its four resumed episodes arrived (8, 7, 6, 5 tokens), finished."""
    loop, log = interrupted_run()
    for n, episode_id in enumerate(("g2/0", "g2/1", "g3/0", "g3/1")):
        log += loop.feed(done(episode_id, 5.0 + n, tokens=8 - n))
    return log + loop.feed(RunFinished(t=9.0, reason="steps"))
