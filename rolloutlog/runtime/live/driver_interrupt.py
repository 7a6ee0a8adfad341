"""The live driver under `weight_update = interrupt` (a mixin of `driver.LiveDriver`;
docs/contract.md, "Weight updates and work in flight").

The weight update pauses inference in abort mode, so every generate call then running
answers at once with its tokens so far. An abort answer while an update is under way, for
an episode in flight that the deciders did not cancel, is an interruption: the driver
keeps the `PartialGeneration` and records `episode_interrupted` (its completion tokens so
far). Once the update is recorded live, each interrupted episode is recorded
`episode_resumed` under the new version and resubmitted (`partial.resume`: the prompt plus
its tokens so far, the rest of the budget, the new weights' cache salt); its answer is
joined to the partial, so the rollout the trainer gets carries every token's version and
the behaviour logprob that version gave it. A cancelled interrupted episode is forgotten:
no answer of it will come.

The update is recorded live only when everything the pause could interrupt has answered
(see `driver_training`), so that each interruption lands while the update is under way.

Under `recycle` a shipped batch aborts the train requests then in flight, by id: each
abort answer is recorded `episode_interrupted` (reason `recycle`), and the next update is
recorded live only once every train episode in flight at a ship is interrupted or gone;
the recycled episodes are resubmitted with the interrupted ones, first (the deciders
dispatch no train work until they are resumed).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.types import (
    EpisodeDispatched,
    EpisodeInterrupted,
    EpisodeResumed,
    Event,
    InterruptReason,
)
from rolloutlog.runtime.live.endpoints import EndpointPool
from rolloutlog.runtime.live.episodes import Answer, EpisodeBook
from rolloutlog.runtime.live.partial import PartialGeneration, resume


class InterruptMixin:
    """Interruptions and resubmissions; the rest of the driver is `LiveDriver`'s."""

    config: RunConfig
    loop: ReactionLoop
    book: EpisodeBook
    pool: EndpointPool
    counts: Counter[str]
    _closed: bool
    _partials: dict[str, tuple[EpisodeDispatched, PartialGeneration]]
    _feed: Callable[[Event], None]
    _now: Callable[[], float]
    _spawn: Callable[[Any], None]
    _serve: Callable[[EpisodeDispatched, Awaitable[Answer]], Awaitable[None]]
    _abort: Callable[[list[str]], Awaitable[None]]
    _recycled_at_ship: set[str]

    def _interruption(self, episode_id: str) -> InterruptReason | None:
        """Why an abort answer for this episode is an interruption, or None: the episode is
        in flight and not interrupted already, and either it was aborted for a shipped batch
        under `recycle`, or an update is under way in interrupt mode."""
        state = self.loop.dispatcher_state
        if episode_id not in state.inflight or episode_id in state.partial.interrupted:
            return None
        if episode_id in self._recycled_at_ship and state.partial.recycling:
            return "recycle"
        updating = state.partial.live < state.version
        return "update" if self.config.weight_update == "interrupt" and updating else None

    def _interrupted(
        self, event: EpisodeDispatched, partial: PartialGeneration, reason: InterruptReason
    ) -> None:
        """Keep the tokens so far until the update is live; record the interruption."""
        self._partials[event.episode_id] = (event, partial)
        self.counts["interrupted"] += 1
        self._feed(
            EpisodeInterrupted(
                t=self._now(),
                episode_id=event.episode_id,
                completion_tokens=len(partial.token_ids),
                reason=reason,
            )
        )

    def _recycle(self) -> None:
        """`recycle`: a batch shipped; abort the train requests in flight (their answers are
        the recyclings: `_interruption`)."""
        state = self.loop.dispatcher_state
        train = [
            episode_id
            for episode_id, group_id in state.inflight.items()
            if state.groups[group_id].train and episode_id not in state.partial.interrupted
        ]
        self._recycled_at_ship.update(train)
        if train:
            self._spawn(self._abort(self.book.request_ids(train)))

    def _resume_interrupted(self, version: int) -> None:
        """`version` is live: record each interrupted episode resumed, and resubmit it."""
        partials, self._partials = self._partials, {}
        self._recycled_at_ship.clear()
        for episode_id, (event, partial) in partials.items():
            if self._closed:
                return
            self._feed(EpisodeResumed(t=self._now(), episode_id=episode_id, policy_version=version))
            generate = functools.partial(self.pool.generate, event.group_id)
            self._spawn(self._serve(event, resume(generate, partial, cache_salt=f"v{version}")))

    def _forget_interrupted(self, episode_ids: Iterable[str]) -> None:
        """Cancelled while interrupted: nothing is in flight at inference to answer."""
        for episode_id in episode_ids:
            if self._partials.pop(episode_id, None) is not None:
                self.book.forget_if_cancelled(episode_id)
