"""The live driver's training side (a mixin of `driver.LiveDriver`): shipped batches go to
the trainer thread in step order, and each new version goes pending, then live.

Training runs on one worker thread so that inference goes on meanwhile; the version of
step `s` is announced (`version_pending`), made durable, published to every endpoint and
only then recorded live; `weight_update` says what happens to the work in flight meanwhile
(`_update`).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.staleness import rollout_age
from rolloutlog.events.types import BatchShipped, Event, VersionLive, VersionPending
from rolloutlog.runtime.live.crash_points import CrashPoints
from rolloutlog.runtime.live.digits import DigitTask
from rolloutlog.runtime.live.driver_options import DriverOptions
from rolloutlog.runtime.live.episodes import ShippedBatch
from rolloutlog.runtime.live.evaluation import evaluate
from rolloutlog.runtime.live.publish import LiveRunError, WeightPublisher
from rolloutlog.runtime.live.reports import StepStats
from rolloutlog.runtime.live.trainer import GRPOTrainer, StepReport


class TrainingMixin:
    """Training and weight updates; the rest of the driver is `LiveDriver`'s."""

    config: RunConfig
    trainer: GRPOTrainer
    publisher: WeightPublisher
    crash: CrashPoints
    counts: Counter[str]
    reward_curve: list[float | None]
    train_steps: list[dict[str, Any]]
    held_out: tuple[DigitTask, ...]
    version_live: int
    on_step: Callable[[StepStats], None] | None
    _batches: asyncio.Queue[ShippedBatch]
    _executor: ThreadPoolExecutor
    _done: asyncio.Event
    _changed: asyncio.Event
    _outstanding: set[str]
    loop: ReactionLoop
    _resume_interrupted: Callable[[int], None]
    _recycled_at_ship: set[str]
    _commit_due: bool
    options: DriverOptions
    _feed: Callable[[Event], None]
    _now: Callable[[], float]
    _commit: Callable[[], None]
    _stop: Callable[..., None]
    _stop_for: Callable[[BaseException, str], None]

    def _shipped(self, event: BatchShipped, batch: ShippedBatch) -> None:
        self.reward_curve.append(batch.mean_reward)
        ages = Counter(rollout_age(v, event.step) for v in batch.versions)
        self._batches.put_nowait(batch)
        self._commit_due = True  # each shipped step is durable once its reaction settles
        if self.on_step is not None:
            self.on_step(self._stats(event.step, batch, ages))
        if event.step >= self.options.steps:
            self._stop("steps")

    def _stats(self, step: int, batch: ShippedBatch, ages: Counter[int]) -> StepStats:
        return StepStats(
            step=step,
            mean_reward=batch.mean_reward,
            trained=len(batch.samples),
            ages=dict(sorted(ages.items())),
            version_live=self.version_live,
            wall_s=self._now(),
            cancelled_stale=self.counts["cancelled_stale"],
            dropped_stale=self.counts["dropped_stale"],
            failed=self.counts["failed"],
            late=self.counts["late"],
        )

    async def _train_worker(self) -> None:
        """Train shipped batches in order; each new version goes pending, then live (with
        `updates_per_sync = K`, only every K-th: between syncs inference keeps its weights)."""
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._batches.get()
            try:
                report = await loop.run_in_executor(self._executor, self._train, batch)
                syncs = batch.step % self.config.updates_per_sync == 0
                if syncs and not self._done.is_set():  # once stopping, trained, not made live
                    await self._update(report)
            except Exception as error:
                self._stop_for(error, f"training step {batch.step}: ")
            finally:
                self._batches.task_done()

    async def _update(self, report: StepReport) -> None:
        """Make `report.version` pending, then live, as the run's `weight_update` says.

        `freeze`: publish in keep mode. `drain`: first wait until the train episodes in
        flight at the announcement have arrived or been cancelled (the deciders dispatch
        no train work meanwhile). `interrupt`: publish in abort mode, then wait until every
        generate call sent before the pause has answered and every episode in flight at
        the announcement was interrupted or arrived, so each interruption is recorded while
        the update is under way; once live, the interrupted episodes are resubmitted.
        `recycle`: the update is recorded live once every train episode aborted for a
        shipped batch was interrupted or is gone, and resubmits them too. A run that stops
        meanwhile does not record the update live.
        """
        rule, version = self.config.weight_update, report.version
        owed = self._owed_at_update(rule)
        self._feed(VersionPending(t=self._now(), version=version))
        self._commit()  # an announced version is durable before it goes live
        self.crash.crash_at("pending")
        if rule == "drain" and not await self._until(lambda: self._left(owed) == set()):
            return
        at_pause: set[str] = set()
        await self.publisher.publish(
            report.weights_path,
            version,
            live=self.version_live,
            pause="abort" if rule == "interrupt" else "keep",
            on_paused=lambda: at_pause.update(self._outstanding),
        )
        state = self.loop.dispatcher_state
        if not await self._until(  # at once unless something is to be interrupted
            lambda: (
                not (rule == "interrupt" and at_pause & self._outstanding)
                and self._left(owed | self._recycled_at_ship) <= state.partial.interrupted.keys()
            )
        ):
            return
        self._feed(VersionLive(t=self._now(), version=version))
        self._resume_interrupted(version)

    def _owed_at_update(self, rule: str) -> set[str]:
        """What must be interrupted (`interrupt`: all in flight; the live runtime has no
        frozen source) or arrive (`drain`: the train work) before the update goes live."""
        state = self.loop.dispatcher_state
        if rule == "interrupt":
            return set(state.inflight)
        if rule == "drain":
            return {e for e, group in state.inflight.items() if state.groups[group].train}
        return set()

    def _left(self, owed: set[str]) -> set[str]:
        """Those of `owed` still in flight."""
        return owed & self.loop.dispatcher_state.inflight.keys()

    async def _until(self, settled: Callable[[], bool]) -> bool:
        """Wait until `settled()`, asked again after every answer and every fed event;
        False if the run stops first."""
        while not settled():
            if self._done.is_set():
                return False
            self._changed.clear()
            waits = {asyncio.ensure_future(self._changed.wait())}
            waits.add(asyncio.ensure_future(self._done.wait()))
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for wait in waits:
                wait.cancel()
        return True

    def _train(self, batch: ShippedBatch) -> StepReport:
        """On the trainer thread: one step, published as version `step` (v_s after batch s)."""
        if batch.restored:  # a resumed run's checkpoint: trained before the crash
            return self.trainer.restored()
        if not batch.samples:  # every episode pruned: the version must still follow the step
            return self.trainer.publish_unchanged(batch.step)
        report = self.trainer.train_step(batch.samples, version=batch.step)
        if not math.isfinite(report.loss):  # never make diverged weights live
            raise LiveRunError(f"step {batch.step} diverged: loss {report.loss}")
        self.train_steps.append(self._step_row(batch, report))
        return report

    def _step_row(self, batch: ShippedBatch, report: StepReport) -> dict[str, Any]:
        """The trained step's row: the trainer's figures, the ages it trained, and, every
        `eval_every` steps and at the last, the held-out evaluation of the new weights."""
        ages = Counter(rollout_age(v, batch.step) for v in batch.versions)
        row: dict[str, Any] = {
            "step": batch.step,
            **report.row(),
            "ages": {str(age): count for age, count in sorted(ages.items())},
        }
        every = self.options.eval_every
        if every > 0 and (batch.step % every == 0 or batch.step >= self.options.steps):
            row["eval"] = evaluate(
                self.trainer.model,
                self.held_out,
                step=batch.step,
                seed=self.options.seed,
                temperature=self.options.temperature,
            )
        return row
