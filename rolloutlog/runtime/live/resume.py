"""Resuming a live run whose driver died: the state is a fold of the log.

`prepare` reads the log (keeping what precedes a torn tail, as the reader does), feeds every
world event to fresh deciders and checks that each recorded decision is re-decided
exactly (a log that does not verify is never continued), and folds the driver's
`EpisodeBook` alongside, with the rollouts from the rollout store. It finds the newest
complete checkpoint in the broadcast directory (refused if its READY names another run)
and works out what was outstanding:

- episodes in flight at the crash: `run_resumed` names them and the dispatcher cancels
  them (reason `restart`); the driver aborts them on the servers;
- the checkpoint `v_K` (K between the last announced version and the last shipped batch):
  the trainer restarts from it; if it was never announced, it is announced first;
- batches `K+1 ..` that shipped but never produced a version: trained again, in order,
  from the stored rollouts (the checkpoint contains none of them, so none trains twice).

The sink's queue and open groups come back from the fold as they were: nothing admitted
is lost. docs/runtime.md § Crashes and resume says why each choice.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import attrs

from rolloutlog.core.account import InvariantViolation
from rolloutlog.core.config import ConfigError
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import Observer, ReactionLoop
from rolloutlog.core.redecide import redecide
from rolloutlog.events.errors import LogError
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.types import (
    WORLD_KINDS,
    EpisodeCompleted,
    EpisodeFailed,
    Event,
    RunResumed,
    RunStarted,
    VersionLive,
)
from rolloutlog.runtime.live.broadcast import BroadcastError, WeightBroadcast, new_run_id
from rolloutlog.runtime.live.episodes import BookError, EpisodeBook, ShippedBatch, masked_past
from rolloutlog.runtime.live.rollout_store import StoredRun


class ResumeError(RuntimeError):
    """The run cannot be continued; the message says why and where."""


@attrs.frozen(kw_only=True)
class ResumePoint:
    """Where a resumed run picks up: folded deciders and book, versions, owed training."""

    loop: ReactionLoop
    book: EpisodeBook
    t_end: float  # `t` of the last durable event: the resumed clock continues from it
    announced: int  # the last version_pending (inference serves it on resume)
    live: int  # the last version_live
    shipped: int  # the last batch shipped
    checkpoint: int  # the newest complete checkpoint: the trainer restarts from it
    retrain: tuple[ShippedBatch, ...]  # batches after the checkpoint, in step order
    outstanding: tuple[str, ...]  # in flight at the crash
    previous_prefix: str  # the dead driver's request prefix (its requests are aborted)
    reason: str
    run_id: str  # the run's identity (new if an older rolloutlog started it without one)

    def resumed(self, t: float) -> RunResumed:
        """The world event that records the restart."""
        return RunResumed(
            t=t, reason=self.reason, episode_ids=self.outstanding, version=self.checkpoint
        )

    def training_owed(self) -> list[ShippedBatch]:
        """What the trainer worker does first: announce the checkpoint if the log never
        did, then train the batches it does not contain."""
        jobs = list(self.retrain)
        if self.checkpoint > self.announced:
            jobs.insert(
                0,
                ShippedBatch(
                    step=self.checkpoint,
                    samples=(),
                    versions=(),
                    mean_reward=None,
                    restored=True,
                ),
            )
        return jobs


def newest_checkpoint(broadcast: WeightBroadcast) -> int:
    """The newest version in the broadcast directory whose READY marker checks out."""
    problems = []
    for version in reversed(broadcast.versions()):
        try:
            broadcast.require_ready(version)
            return version
        except BroadcastError as error:  # a checkpoint torn by the crash: take the one before
            problems.append(str(error))
    raise ResumeError(
        f"{broadcast.root}: no complete checkpoint to restart from"
        + (f" ({problems[0]})" if problems else "")
    )


def prepare(
    log_path: Path,
    *,
    stored: StoredRun,
    broadcast: WeightBroadcast,
    request_prefix: str,
    seed: int,
    temperature: float,
    observers: tuple[Observer, ...] = (),
    hard_task_share: float = 0.0,
) -> ResumePoint:
    """Fold the log and the store into the point a resumed run continues from.

    It only reads (the log, the store, the broadcast directory), so a refused resume
    changes nothing; the appending writer opened afterwards cuts the torn tail it saw.
    """
    checkpoint = newest_checkpoint(broadcast)
    run_id, writer = stored.meta.get("run_id"), broadcast.run_of(checkpoint)
    if writer is not None and writer != run_id:  # publishing would overwrite the other run's
        raise ResumeError(
            f"{broadcast.path(checkpoint)}: written by run {writer}, but this run is "
            f"{run_id or 'unnamed (started by an older rolloutlog)'}: "
            "not this run's weights directory"
        )
    book = EpisodeBook(
        run_seed=seed,
        temperature=temperature,
        request_prefix=request_prefix,
        hard_task_share=hard_task_share,
    )
    fold = _Fold(book, checkpoint)
    reader = LogReader(log_path, warn=False)
    try:
        loop = fold.run(reader, stored, observers)
    except (LogError, ConfigError, BookError, InconsistentLogError, InvariantViolation) as error:
        raise ResumeError(f"{log_path}: {error}") from error
    announced = loop.dispatcher_state.version
    if not announced <= checkpoint <= fold.shipped:
        raise ResumeError(
            f"{broadcast.root}: the newest complete checkpoint is v{checkpoint}, but the log "
            f"announced v{announced} and shipped {fold.shipped} batches: "
            "not this run's weights directory?"
        )
    if announced != checkpoint and not _ready(broadcast, announced):
        raise ResumeError(f"{broadcast.root}: v{announced}, which inference served, is gone")
    book.forget_cancelled()
    cut = "" if reader.torn_tail is None else f"; {reader.torn_tail.describe()} was cut"
    return ResumePoint(
        loop=loop,
        book=book,
        t_end=fold.t_end,
        announced=announced,
        live=fold.live,
        shipped=fold.shipped,
        checkpoint=checkpoint,
        retrain=tuple(fold.retrain),
        outstanding=tuple(loop.dispatcher_state.inflight),
        previous_prefix=str(stored.meta.get("request_prefix", request_prefix)),
        reason=f"the driver died at seq {loop.next_seq - 1} without run_finished{cut}",
        run_id=str(run_id or new_run_id()),
    )


def _ready(broadcast: WeightBroadcast, version: int) -> bool:
    try:
        broadcast.require_ready(version)
    except BroadcastError:
        return False
    return True


class _Fold:
    """Re-decide the log event by event, and keep the book as the dead driver kept it."""

    def __init__(self, book: EpisodeBook, checkpoint: int) -> None:
        self.book, self.checkpoint = book, checkpoint
        self.retrain: list[ShippedBatch] = []
        self.shipped = self.live = 0
        self.t_end = 0.0

    def run(
        self, reader: LogReader, stored: StoredRun, observers: tuple[Observer, ...]
    ) -> ReactionLoop:
        events = iter(reader)
        first = next(events, None)
        if not isinstance(first, RunStarted):
            raise ResumeError(f"{reader.path}: the log holds no run_started")
        loop = ReactionLoop.from_run_started(first, observers=observers)
        self.book.mask_past = masked_past(loop.config)
        for event, expected in redecide(itertools.chain((first,), events), start=lambda _: loop):
            owed = "nothing" if expected is None else expected.kind
            if event is None:
                raise ResumeError(f"the log ends inside a reaction: it lacks {owed}")
            if expected != event:
                if event.kind in WORLD_KINDS:
                    raise ResumeError(f"seq {event.seq}: the log lacks {owed} before it")
                raise ResumeError(
                    f"seq {event.seq}: the recorded {event.kind} is not what the deciders "
                    "decide (check it with rolloutlog verify)"
                )
            if event.kind == "run_finished":  # final: nothing may follow it in a log
                raise ResumeError(
                    f"the run finished at seq {event.seq} ({event.reason}); "  # type: ignore[union-attr]
                    "a log ends at run_finished, so there is nothing to resume (--resume "
                    "continues a run whose process stopped without one: Ctrl-C, SIGTERM, "
                    "SIGKILL or a crash): start a new run"
                )
            self._book(event, stored)
            self.t_end = event.t
        return loop

    def _book(self, event: Event, stored: StoredRun) -> None:
        """What the driver did to its book on this event (`EpisodeBook.decided` for a
        decision; for the world events, what `LiveDriver._generate` did)."""
        batch = self.book.decided(event)
        if batch is not None:
            self.shipped = batch.step
            if batch.step > self.checkpoint:
                self.retrain.append(batch)
        elif isinstance(event, EpisodeCompleted):
            self.book.restore(event, stored.rollout(event.episode_id))
        elif isinstance(event, EpisodeFailed):
            self.book.failed(event.episode_id, event.error, event.t)
        elif isinstance(event, VersionLive):
            self.live = event.version
