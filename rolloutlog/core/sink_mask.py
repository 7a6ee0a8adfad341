"""The sink's books of an episode's segments, read by `stale_tokens = mask` (docs/contract.md,
"Weight updates and work in flight").

Under `mask` an episode is dropped as stale only when its `end` (the version of its last
segment) is past the bound, and a shipped batch counts, in `masked_tokens`, the completion
tokens of its trained episodes' segments past it. So the sink keeps, for each in-flight
episode interrupted at least once, its tokens at each interruption and the versions it went
on under, and hands its arrival the segments `(version, completion tokens)`; only a run
that masks keeps them, so every other run's state is as it was.
"""

from __future__ import annotations

from rolloutlog.core.rules.table import Rules
from rolloutlog.core.state import Pieces, Segment, SinkState
from rolloutlog.events.types import EpisodeInterrupted, EpisodeResumed


def on_interrupted(rules: Rules, state: SinkState, event: EpisodeInterrupted) -> None:
    if rules.keeps_segments and event.episode_id in state.inflight:
        state.pieces.setdefault(event.episode_id, Pieces()).tokens.append(event.completion_tokens)


def on_resumed(rules: Rules, state: SinkState, event: EpisodeResumed) -> None:
    pieces = state.pieces.get(event.episode_id)
    if pieces is not None:
        pieces.versions.append(event.policy_version)


def forget(state: SinkState, episode_ids: tuple[str, ...]) -> None:
    """Cancelled episodes never arrive: their books close."""
    if state.pieces:
        for episode_id in episode_ids:
            state.pieces.pop(episode_id, None)


def segments_at_arrival(
    state: SinkState, episode_id: str, start: int, completion_tokens: int | None
) -> tuple[Segment, ...]:
    """An arrival's segments under `mask` (one, at `start`, if it was never interrupted);
    the sink asks only under `mask` (`Rules.keeps_segments`): `drop` reads `start` alone
    and keeps no pieces. Segment `k` runs under `v_k` and holds
    `c_{k+1} − c_k` tokens, the `c_k` its interruptions' counts (`c_0 = 0`, the last the
    completion's; a failure, None, holds what it had at its last interruption)."""
    pieces = state.pieces.pop(episode_id, None)
    if pieces is None:
        return ((start, completion_tokens or 0),)
    versions = [start, *pieces.versions]
    last = pieces.tokens[-1] if completion_tokens is None else completion_tokens
    counts = [0, *pieces.tokens[: len(versions) - 1], last]
    return tuple((version, counts[k + 1] - counts[k]) for k, version in enumerate(versions))
