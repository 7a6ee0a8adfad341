"""The live driver: real inference and a torch trainer, feeding the core's reaction loop.

The driver is thin, as docs/contract.md asks. It turns what happens outside into world events,
feeds each to `ReactionLoop.feed`, writes what the loop appended to the log, and carries
out the decided events:

- `group_opened`: remember the group's task and its prefix-cache salt (`v<start version>`);
- `episode_dispatched`: `pool.generate` on the group's endpoint; the answer becomes
  `episode_completed` (reward, token counts) or `episode_failed`;
- `episodes_cancelled`: `pool.abort` the in-flight ids (their `abort` answers are not
  recorded: the cancellation already accounts for them);
- `episode_dropped`, `group_scored`: forget rollouts that will never train, keep the
  advantages of admitted ones;
- `batch_shipped`: hand the trained episodes to the trainer (a worker thread, so that
  inference goes on meanwhile).

A trained batch becomes `version_pending(v)` (the dispatcher cancels stale in-flight
episodes), then the weights are published to every endpoint, then `version_live(v)`.

Generate and abort calls are `driver_requests`, training and weight updates
`driver_training` (`drain` waits there), interruptions and resubmissions under
`weight_update = interrupt` `driver_interrupt`, the options `driver_options`.

Everything that touches the loop runs on one asyncio event loop, so the deciders see one
event at a time; only the trainer runs on another thread. World events carry `t`, seconds
since the run started (`time.monotonic`): the core stays pure, the clock is read here.
Faults end the run cleanly: `run_finished` (with the fault as its reason) is recorded when
the loop can still take it, and the log is committed only at settled points, so it
verifies up to the fault. Losing every inference endpoint is the exception: the pool waits
`endpoint_wait_s` for one to come back, and if none does the run stops as a crash does,
without `run_finished`, so that `rolloutlog train --resume` continues it once inference is
back (a recorded `run_finished` is final).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import rolloutlog
from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    GroupScored,
    RunFinished,
    RunStarted,
    VersionLive,
)
from rolloutlog.runtime.live.crash_points import CrashPoints, tear_commit
from rolloutlog.runtime.live.digits import held_out_tasks
from rolloutlog.runtime.live.driver_interrupt import InterruptMixin
from rolloutlog.runtime.live.driver_options import (
    DriverOptions,
    LogAppender,
    RunOutputs,
    new_request_prefix,
)
from rolloutlog.runtime.live.driver_requests import RequestsMixin
from rolloutlog.runtime.live.driver_training import TrainingMixin
from rolloutlog.runtime.live.endpoints import EndpointPool, NoEndpointsLeft
from rolloutlog.runtime.live.episodes import EpisodeBook, ShippedBatch, masked_past
from rolloutlog.runtime.live.partial import PartialGeneration
from rolloutlog.runtime.live.protocol import InferenceError
from rolloutlog.runtime.live.publish import LiveRunError, WeightPublisher, WeightUpdateFailed
from rolloutlog.runtime.live.reports import LiveResult, endpoint_report
from rolloutlog.runtime.live.resume import ResumePoint
from rolloutlog.runtime.live.trainer import GRPOTrainer

__all__ = ["DriverOptions", "LiveDriver", "LogAppender", "RunOutputs", "new_request_prefix"]

COMMIT_EVENTS: Final = 4096  # commit each step, and at least this often; always settled
SHUTDOWN_GRACE_S: Final = 0.1
TICK_POLL_S: Final = 0.5  # how often the smoothing timer asks the core whether a tick is owed
# Ends decided by the log itself finish at the event that decided them, so the log ends
# exactly there; a fault first gives answers already on their way a moment to arrive.
FINISH_AT_ONCE: Final = frozenset({"steps", "zero_output"})
# Ends that leave the run resumable: no run_finished is recorded (inference may come back;
# Ctrl-C and SIGTERM, a scheduler's pre-emption, stop the process, not the run).
RESUMABLE: Final = frozenset({"inference_lost", "interrupted"})
_log = logging.getLogger(__name__)


class LiveDriver(RequestsMixin, InterruptMixin, TrainingMixin):
    """One live run: `await run()` drives it to `steps` shipped batches or to a fault."""

    def __init__(
        self,
        config: RunConfig,
        *,
        pool: EndpointPool,
        trainer: GRPOTrainer,
        options: DriverOptions,
        outputs: RunOutputs | None = None,
        resume: ResumePoint | None = None,
    ) -> None:
        if config.frozen_fraction > 0:
            raise LiveRunError("frozen_fraction > 0: the live runtime has no frozen policy")
        self.config, self.pool, self.trainer, self.options = config, pool, trainer, options
        outputs = outputs or RunOutputs()
        self.log, self.on_events, self.on_step = outputs.log, outputs.on_events, outputs.on_step
        self.store, self.resume = outputs.store, resume
        self.crash = CrashPoints.from_environment()
        if resume is not None:  # deciders and book as the log left them
            self.loop, self.book = resume.loop, resume.book
        else:
            observers = (Account(config),) if options.check_invariants else ()
            self.loop = ReactionLoop(config, observers=observers)
            self.book = EpisodeBook(
                run_seed=options.seed,
                temperature=options.temperature,
                request_prefix=new_request_prefix(),
                hard_task_share=options.hard_task_share,
            )
            self.book.mask_past = masked_past(config)
        self.counts: Counter[str] = Counter()
        self.reward_curve: list[float | None] = []
        self.train_steps: list[dict[str, Any]] = []  # appended on the trainer thread
        self.held_out = (
            held_out_tasks(options.eval_tasks, options.hard_task_share)
            if options.eval_every > 0
            else ()
        )
        self.version_live = 0
        self._batches: asyncio.Queue[ShippedBatch] = asyncio.Queue()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._outstanding: set[str] = set()  # episodes with a generate call outstanding
        self._partials: dict[str, tuple[EpisodeDispatched, PartialGeneration]] = {}
        self._recycled_at_ship: set[str] = set()  # `recycle`: aborted for a shipped batch
        self._changed = asyncio.Event()  # an answer came or an event was fed
        self._done = asyncio.Event()
        self._reason: str | None = None
        self._error: str | None = None
        self._closed = False  # no more events: run_finished is recorded, or the loop broke
        self._finishing = False
        self._first_seq = self.loop.next_seq  # a resumed loop starts where the log ends
        self._start = time.monotonic()
        self._committed_seq = self.loop.next_seq
        self._commit_due = False
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="trainer")
        self.publisher = WeightPublisher(
            pool,
            trainer.broadcast,
            attempts=options.publish_attempts,
            backoff_s=options.publish_backoff_s,
        )

    # ---- the run -----------------------------------------------------------------------
    async def run(self) -> LiveResult:
        """Make v0 live, start the run, wait for its end, and shut down cleanly."""
        self._start = time.monotonic() - (self.resume.t_end if self.resume else 0.0)
        if self.store is not None:
            self.store.note(request_prefix=self.book.request_prefix)
        trainer_task = asyncio.create_task(self._train_worker())
        heartbeat = asyncio.create_task(self._smoothing_heartbeat())
        try:
            if self.resume is not None:
                await self._take_over(self.resume)
            else:
                initial = await asyncio.get_running_loop().run_in_executor(
                    self._executor, self.trainer.publish_initial
                )
                await self.publisher.publish(initial, 0, live=0)
                self._feed(self._run_started())
            self.pool.wait_for_endpoints(self.options.endpoint_wait_s)  # the run is under way
            await self._done.wait()
        except asyncio.CancelledError:  # Ctrl-C under asyncio.run: shut down cleanly
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()  # the shutdown's own timeouts must still work
            self._stop("interrupted", "the run was interrupted")
        except Exception as error:
            self._stop_for(error)
        heartbeat.cancel()
        await self._shutdown(trainer_task)
        return self._result()

    async def _take_over(self, point: ResumePoint) -> None:
        """Resume (see `resume`): inference serves the announced version, the restart is
        recorded (what was in flight gets cancelled and aborted), then the trainer works
        through what it owes before anything new."""
        path = self.trainer.broadcast.path(point.announced)
        await self.publisher.publish(path, point.announced, live=point.live)
        # What the trainer owes goes first: feeding the restart can ship a batch at once
        # from the folded queue, which must train after them (no await until the feed)
        for batch in point.training_owed():
            self._batches.put_nowait(batch)
        self._feed(point.resumed(self._now()))
        if point.live < point.announced:
            self._feed(VersionLive(t=self._now(), version=point.announced))
        self.version_live = point.announced
        if point.shipped >= self.options.steps:
            self._stop("steps")
            self._finish()

    async def _smoothing_heartbeat(self) -> None:
        """A timer for the core's tick (admission smoothing, `ReactionLoop.next_tick`): the
        dispatcher sees time only through events, and with nothing in flight no event would
        come to open the next window (the simulator does the same)."""
        if self.loop.rules.window_after is None:  # no smoothing: no tick is ever owed
            return
        while not self._closed:
            due = self.loop.next_tick(self._now()) if self.loop.next_seq > 0 else None
            if due is None:
                await asyncio.sleep(TICK_POLL_S)
                continue
            await asyncio.sleep(max(0.0, due - self._now()) + 0.01)
            if self.loop.next_tick(due - 0.01) == due:  # still owed: nothing came meanwhile
                self._feed(self.loop.tick(self._now()))

    def _stop(self, reason: str, error: str | None = None) -> None:
        """End the run (the first reason wins); `run` records it and shuts down."""
        if self._reason is None:
            self._reason, self._error = reason, error
            if error is not None:
                _log.error("live run stopping (%s): %s", reason, error)
        self._done.set()

    def _finish(self) -> None:
        """Record `run_finished` (the loop cancels what is owed); nothing is fed after it.

        Only a process that recorded its start (`run_started` or `run_resumed`) ends the
        run: a resume that failed before `run_resumed` leaves the crashed run resumable, and
        so does a `RESUMABLE` end.
        """
        started = self.loop.next_seq > self._first_seq
        if not self._closed and not self._finishing and started and self._reason not in RESUMABLE:
            self._finishing = True
            self._feed(RunFinished(t=self._now(), reason=self._reason or "interrupted"))
        self._closed = True

    def _stop_for(self, error: BaseException, where: str = "") -> None:
        """Stop for an exception, with a reason that names the kind of fault."""
        message = f"{where}{type(error).__name__}: {error}"
        if isinstance(error, WeightUpdateFailed):
            self._stop("weight_update_failed", str(error))
        elif isinstance(error, NoEndpointsLeft):
            self._stop("inference_lost", message)
        elif isinstance(error, InferenceError):
            self._stop("inference_error", message)
        else:
            self._stop("error", message)

    async def _shutdown(self, trainer_task: asyncio.Task[None]) -> None:
        """Record `run_finished`, abort what it cancels, let the trainer finish what shipped."""
        unfinished = {task for task in self._tasks if not task.done()}
        if unfinished and not self._closed:  # answers on their way (a lost endpoint's failures)
            await asyncio.wait(unfinished, timeout=SHUTDOWN_GRACE_S)
        self._finish()
        unfinished = {task for task in self._tasks if not task.done()}
        if unfinished:
            _, late = await asyncio.wait(unfinished, timeout=self.options.shutdown_timeout_s)
            for task in late:
                task.cancel()
        if self._error is None:
            drain = asyncio.ensure_future(self._batches.join())
            await asyncio.wait(
                {drain, trainer_task},
                timeout=self.options.shutdown_timeout_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            drain.cancel()
        trainer_task.cancel()
        await asyncio.gather(trainer_task, return_exceptions=True)
        await self.publisher.leave_running(self.options.shutdown_timeout_s)
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown)
        self._commit()

    def _result(self) -> LiveResult:
        return LiveResult(
            finished_reason=self._reason or "interrupted",
            error=self._error,
            steps_shipped=len(self.reward_curve),
            reward_curve=tuple(self.reward_curve),
            wall_seconds=time.monotonic() - self._start,
            events=self.loop.next_seq,
            version_live=self.version_live,
            versions_trained=self.trainer.version,
            counts=dict(self.counts),
            endpoints=tuple(endpoint_report(e) for e in self.pool.endpoints),
            train_steps=tuple(self.train_steps),
        )

    # ---- feeding the loop --------------------------------------------------------------
    def _now(self) -> float:
        return time.monotonic() - self._start

    def _run_started(self) -> RunStarted:
        return RunStarted(
            t=self._now(),
            config=self.config.to_dict(),
            seed=self.options.seed,
            schema_version=SCHEMA_VERSION,
            code_version=f"rolloutlog {rolloutlog.__version__}",
        )

    def _feed(self, event: Event) -> None:
        """Feed one world event, record what it set off, and act on the decisions.

        A failure here (a decider bound, an invariant, the log) breaks the loop: nothing
        more is fed, and the log keeps what was committed before it.
        """
        if self._closed:
            return
        try:
            appended = self.loop.feed(event)
            if self.log is not None:
                for recorded in appended:
                    self.log.append(recorded)
            if self.on_events is not None:
                self.on_events(appended)
        except Exception as error:
            self._closed = True
            self._stop("error", f"recording {event.kind}: {type(error).__name__}: {error}")
            return
        self._count_world(appended[0])
        for decided in appended[1:]:
            self._react(decided)
        if self._commit_due or self.loop.next_seq - self._committed_seq >= COMMIT_EVENTS:
            self._commit()
        zero_output = self.loop.zero_output_reason()
        if zero_output is not None:
            self._stop("zero_output", zero_output)
        if self._reason in FINISH_AT_ONCE:
            self._finish()
        self._changed.set()

    def _commit(self) -> None:
        """Make everything appended so far durable; called only between two world events."""
        shipped, self._commit_due = self._commit_due, False
        if self.log is None or self._committed_seq == self.loop.next_seq:
            return
        try:
            if self.store is not None:  # every durable completion has its rollout on disk
                self.store.sync()
            if self.crash.reached("commit"):
                tear_commit(self.log)
            self.log.commit()
            self._committed_seq = self.loop.next_seq
        except Exception as error:
            self._closed = True
            self._stop("error", f"committing the log: {type(error).__name__}: {error}")
            return
        if shipped:
            self.crash.crash_at("shipped")

    def _count_world(self, event: Event) -> None:
        match event:
            case EpisodeFailed():
                self.counts["failed"] += 1
            case VersionLive():
                self.version_live = event.version
            case _:
                pass

    # ---- carrying out decisions --------------------------------------------------------
    def _react(self, event: Event) -> None:
        batch = self.book.decided(event)  # the bookkeeping a resume's fold repeats
        match event:
            case EpisodeDispatched():
                self.crash.crash_at("dispatch")
                self._spawn(self._generate(event, self.book.request(event)))
            case EpisodesCancelled():
                self._cancelled(event)
            case EpisodeDropped():
                self.counts["dropped_stale"] += event.reason != "evicted"  # a full queue's
            case GroupScored():
                self.pool.forget_group(event.group_id)
            case BatchShipped() if batch is not None:
                self._shipped(event, batch)
                if self.config.recycle:
                    self._recycle()
            case _:
                pass
