"""The dispatcher's books of interrupted and resumed episodes (docs/contract.md, "Weight
updates and work in flight").

Only the world interrupts and resumes episodes, and only where the run's rules make it do
so: under `weight_update = interrupt`, an in-flight episode not from a frozen source,
while an update is under way (announced, not yet live); under `recycle`, a train episode in
flight once a batch has shipped, until the next version goes live; its resumption under the
version inference serves (a recycled one's under a later version than it stopped at, and
train dispatch waits until every recycled episode is resumed: slime resumes them first).
The dispatcher refuses, at its seq, an interruption or a resumption no rule makes, and an
arrival of an episode still interrupted, so that `replay` and `verify` stop there. An
interrupted episode keeps its permit: nothing else here touches permits.
"""

from __future__ import annotations

from rolloutlog.core.errors import InconsistentLogError, require
from rolloutlog.core.rules.table import Rules
from rolloutlog.core.state import DispatcherState
from rolloutlog.events.types import (
    EpisodeCompleted,
    EpisodeFailed,
    EpisodeInterrupted,
    EpisodeResumed,
    VersionLive,
)


def check_interrupted(state: DispatcherState, event: EpisodeInterrupted) -> None:
    """An interruption happens only where the run's weight-update or recycle rule makes one."""
    seq, kind, episode = event.seq, event.kind, event.episode_id
    config = state.config
    rule = config.weight_update
    if event.reason == "recycle" and config.recycle:
        _check_recycled(state, event)
        return
    require(
        rule == "interrupt" and event.reason == "update",
        seq,
        kind,
        f"the run's weight_update is {rule} and recycle is off: no episode is interrupted"
        if rule == "freeze" and not config.recycle
        else f"reason {event.reason!r} under weight_update {rule!r}"
        + ("" if config.recycle else " and recycle off"),
    )
    group_id = _check_generating(state, event)
    require(
        state.partial.live < state.version,
        seq,
        kind,
        f"no weight update under way (v{state.version} is live)",
    )
    require(not state.groups[group_id].frozen, seq, kind, f"{episode} is from a frozen source")


def _check_generating(state: DispatcherState, event: EpisodeInterrupted) -> str:
    """The interrupted episode is in flight and generating: its group's id."""
    seq, kind, episode = event.seq, event.kind, event.episode_id
    group_id = state.inflight.get(episode)
    require(group_id is not None, seq, kind, f"{episode} is not in flight")
    require(episode not in state.partial.interrupted, seq, kind, f"{episode} is interrupted")
    return str(group_id)


def _check_recycled(state: DispatcherState, event: EpisodeInterrupted) -> None:
    """`recycle`: train work in flight, aborted after a batch shipped, before the next
    version goes live."""
    seq, kind, episode = event.seq, event.kind, event.episode_id
    group_id = _check_generating(state, event)
    require(
        state.partial.recycling,
        seq,
        kind,
        f"no batch shipped since v{state.partial.live} went live: nothing is recycled",
    )
    require(state.groups[group_id].train, seq, kind, f"{episode} is eval work")


def on_interrupted(rules: Rules, state: DispatcherState, event: EpisodeInterrupted) -> None:
    state.partial.interrupted[event.episode_id] = None
    if event.reason == "recycle":
        state.partial.recycled[event.episode_id] = state.partial.live


def on_shipped(rules: Rules, state: DispatcherState) -> None:
    """Under `recycle` (`Rules.recycles`), a shipped batch opens the abort of the train work
    in flight."""
    state.partial.recycling = rules.recycles


def check_resumed(state: DispatcherState, event: EpisodeResumed) -> None:
    """A resumption follows an interruption, under the version inference serves."""
    seq, kind, episode = event.seq, event.kind, event.episode_id
    require(episode in state.partial.interrupted, seq, kind, f"{episode} was not interrupted")
    live = state.partial.live
    require(
        event.policy_version == live,
        seq,
        kind,
        f"resumed under v{event.policy_version}, but inference serves v{live}",
    )
    stopped = state.partial.recycled.get(episode)
    require(
        stopped is None or stopped < live,
        seq,
        kind,
        f"{episode} was recycled under v{stopped}: it resumes once the next version is live",
    )


def on_resumed(rules: Rules, state: DispatcherState, event: EpisodeResumed) -> None:
    del state.partial.interrupted[event.episode_id]
    state.partial.recycled.pop(event.episode_id, None)
    if rules.keeps_segments:  # under `mask`, its stale cancellation reads this version
        state.partial.resumed[event.episode_id] = event.policy_version


def check_arrival(state: DispatcherState, event: EpisodeCompleted | EpisodeFailed) -> None:
    """An interrupted episode generates nothing until it is resumed (one test per arrival:
    `require`'s call is left for the refusal)."""
    episode = event.episode_id
    if episode in state.partial.interrupted:
        raise InconsistentLogError(
            event.seq, event.kind, f"{episode} is interrupted and was not resumed"
        )


def on_version_live(rules: Rules, state: DispatcherState, event: VersionLive) -> None:
    state.partial.live = event.version
    state.partial.recycling = False
    if state.partial.resumed:  # what left flight since is no one's business
        state.partial.resumed = {
            e: v for e, v in state.partial.resumed.items() if e in state.inflight
        }
