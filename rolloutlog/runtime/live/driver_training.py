"""The live driver's training side (a mixin of `driver.LiveDriver`): shipped batches go to
the trainer thread in step order, and each new version goes pending, then live.

Training runs on one worker thread so that inference goes on meanwhile; the version of
step `s` is announced (`version_pending`), made durable, published to every endpoint and
only then recorded live.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from rolloutlog.core.config import RunConfig
from rolloutlog.core.staleness import rollout_age
from rolloutlog.events.types import BatchShipped, Event, VersionLive, VersionPending
from rolloutlog.runtime.live.crash_points import CrashPoints
from rolloutlog.runtime.live.driver_options import DriverOptions
from rolloutlog.runtime.live.episodes import ShippedBatch
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
    version_live: int
    on_step: Callable[[StepStats], None] | None
    _batches: asyncio.Queue[ShippedBatch]
    _executor: ThreadPoolExecutor
    _done: asyncio.Event
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
                    self._feed(VersionPending(t=self._now(), version=report.version))
                    self._commit()  # an announced version is durable before it goes live
                    self.crash.crash_at("pending")
                    await self.publisher.publish(
                        report.weights_path, report.version, live=self.version_live
                    )
                    self._feed(VersionLive(t=self._now(), version=report.version))
            except Exception as error:
                self._stop_for(error, f"training step {batch.step}: ")
            finally:
                self._batches.task_done()

    def _train(self, batch: ShippedBatch) -> StepReport:
        """On the trainer thread: one step, published as version `step` (v_s after batch s)."""
        if batch.restored:  # a resumed run's checkpoint: trained before the crash
            return self.trainer.restored()
        if not batch.samples:  # every episode pruned: the version must still follow the step
            return self.trainer.publish_unchanged(batch.step)
        report = self.trainer.train_step(batch.samples, version=batch.step)
        if not math.isfinite(report.loss):  # never make diverged weights live
            raise LiveRunError(f"step {batch.step} diverged: loss {report.loss}")
        return report
