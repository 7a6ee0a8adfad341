"""The live driver's generate and abort calls (a mixin of `driver.LiveDriver`).

Each dispatched episode becomes one generate task; its answer (or failure) becomes the
world event the driver feeds (in interrupt mode an abort during an update may be an
interruption instead: `driver_interrupt`). Cancelled episodes are aborted at inference. A task that
raises is a bug in the driver, so it stops the run loudly.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from rolloutlog.core.config import RunConfig
from rolloutlog.events.types import EpisodeDispatched, EpisodesCancelled, Event, InterruptReason
from rolloutlog.runtime.live.endpoints import EndpointPool, NoEndpointsLeft
from rolloutlog.runtime.live.episodes import Answer, EpisodeBook, request_id
from rolloutlog.runtime.live.partial import PartialGeneration, outcome
from rolloutlog.runtime.live.protocol import GenerateRequest, Generation, InferenceError
from rolloutlog.runtime.live.resume import ResumePoint
from rolloutlog.runtime.live.rollout_store import RolloutStore

_log = logging.getLogger(__name__)


class RequestsMixin:
    """Generate calls and aborts; the rest of the driver is `LiveDriver`'s."""

    book: EpisodeBook
    pool: EndpointPool
    store: RolloutStore | None
    resume: ResumePoint | None
    counts: Counter[str]
    _tasks: set[asyncio.Task[Any]]
    config: RunConfig
    _closed: bool
    _outstanding: set[str]
    _changed: asyncio.Event
    _feed: Callable[[Event], None]
    _now: Callable[[], float]
    _stop_for: Callable[[BaseException, str], None]
    _interruption: Callable[[str], InterruptReason | None]
    _interrupted: Callable[[EpisodeDispatched, PartialGeneration, InterruptReason], None]
    _forget_interrupted: Callable[[Iterable[str]], None]

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        """A generate or abort task that raised is a bug in the driver: stop, loudly."""
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._stop_for(task.exception() or RuntimeError(), "driver task: ")

    async def _generate(self, event: EpisodeDispatched, request: GenerateRequest) -> None:
        """One episode's generate call; its answer (or failure) becomes a world event."""
        if self.book.forget_if_cancelled(event.episode_id):
            return  # cancelled before it was sent: the cancellation accounts for it
        await self._serve(event, self._first_answer(event, request))

    async def _first_answer(self, event: EpisodeDispatched, request: GenerateRequest) -> Answer:
        """The answer to an episode's first call; in interrupt mode as `partial` reads it."""
        generation = await self.pool.generate(event.group_id, request)
        if self.config.weight_update != "interrupt" and not self.config.recycle:
            return generation
        return outcome(request, generation)

    async def _serve(self, event: EpisodeDispatched, call: Awaitable[Answer]) -> None:
        """Await one generate call of the episode (its first, or a resubmission) and feed
        what its answer amounts to; while it is outstanding the episode is `_outstanding`
        (what a weight update's pause may interrupt)."""
        self._outstanding.add(event.episode_id)
        try:
            await self._answered(event, call)
        finally:
            self._outstanding.discard(event.episode_id)
            self._changed.set()

    async def _answered(self, event: EpisodeDispatched, call: Awaitable[Answer]) -> None:
        try:
            answer = await call
        except InferenceError as failure:
            if isinstance(failure, NoEndpointsLeft):  # never sent: a resume cancels it
                self._stop_for(failure, "")
                return
            error = f"{type(failure).__name__}: {failure}"
            self._feed(self.book.failed(event.episode_id, error, self._now()))
            return
        if self._closed:
            return
        reason = self._interruption(event.episode_id)
        if isinstance(answer, PartialGeneration) and reason is not None:
            self._interrupted(event, answer, reason)
            return
        aborted = isinstance(answer, PartialGeneration) or (
            isinstance(answer, Generation) and answer.aborted
        )
        self.counts["late"] += self.book.is_cancelled(event.episode_id) and not aborted
        world = self.book.arrived(event, answer, self._now())
        kept = self.book.kept(event.episode_id)
        if self.store is not None and kept is not None:
            self.store.keep(event.episode_id, kept)
        if world is not None:
            self._feed(world)

    def _cancelled(self, event: EpisodesCancelled) -> None:
        self.counts[f"cancelled_{event.reason}"] += len(event.episode_ids)
        if not event.episode_ids:
            return
        self._forget_interrupted(event.episode_ids)
        if event.reason == "restart" and self.resume is not None:  # sent by the dead driver
            prefix = self.resume.previous_prefix
            self._spawn(self._abort([request_id(prefix, e) for e in event.episode_ids]))
            return
        self._spawn(self._abort(self.book.request_ids(event.episode_ids)))

    async def _abort(self, request_ids: list[str]) -> None:
        """Aborts save compute; one that fails costs only that (the sink is the guarantee)."""
        try:
            await self.pool.abort(request_ids)
            self.counts["aborts_sent"] += len(request_ids)
        except InferenceError as error:
            _log.warning("abort of %d request(s) failed: %s", len(request_ids), error)
