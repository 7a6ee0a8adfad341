"""Record another orchestrator's run as a rolloutlog log, from its own calls and its own ids.

`LogWriter` takes events; an orchestrator has calls ("I opened this group", "this episode
came back") and its own ids (strings, uuids). `Recorder` turns each call into its event and
keeps what the log's rules ask that the caller should not have to: ids `g<n>` and
`g<n>/<m>` in opening and dispatch order (the orchestrator's ids go to the log's notes),
each group's version and step, each dispatch's stamp, a drop's age, a batch's step and
tokens, and the end-of-run protocol (docs/contract.md § Semantics). It refuses, with one
line naming the call, what no run can do: time going backwards, an id it never saw, a
member the group does not owe, anything after the run finished. What the orchestrator
decided (cancelling, dropping, admitting, the batch) is recorded as it says, for `replay`
to check.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, cast

from rolloutlog.core.config import RunConfig
from rolloutlog.core.dispatcher import version_out_of_turn
from rolloutlog.core.presets import rules_for
from rolloutlog.core.staleness import rollout_age
from rolloutlog.events.log_writer import LogWriter, Notes
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    CANCEL_REASONS,
    INTERRUPT_REASONS,
    WORK_KINDS,
    BatchShipped,
    CancelReason,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodeInterrupted,
    EpisodeResumed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    InterruptReason,
    LimitSet,
    OverloadCut,
    RunFinished,
    RunStarted,
    VersionLive,
    VersionPending,
    Work,
)
from rolloutlog.record.groups import GroupBook
from rolloutlog.record.ids import ForeignId, ForeignIds, RecordError, foreign_text


class Recorder:
    """An open recorded run: one method per orchestrator call, each taking the call's `t`.

    `config` is the run configuration as plain data (keys left out take rolloutlog's
    defaults); `notes` are extra notes for the log's first batch (an importer's account
    of what it reconstructed). Use it as a context manager: a run left unfinished when the
    block ends cleanly is finished at the last recorded time with reason `closed`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        config: Mapping[str, Any],
        code_version: str,
        seed: int = 0,
        t: float = 0.0,
        overwrite: bool = False,
        notes: Mapping[str, str] | None = None,
    ) -> None:
        self.config = RunConfig.from_mapping(config, where="config", startable=False)
        # the version a dispatched member carries, as the core's rule stamps it
        self._stamp = rules_for(self.config).stamp
        self._ids = ForeignIds()
        self._first_notes = dict(notes or {})
        self._log = LogWriter(
            path, mode="overwrite" if overwrite else "create", notes=self._batch_notes()
        )
        self._t, self._last_call = t, "start"
        self.step, self.version = 1, 0
        self.finished = False
        self._groups: dict[str, GroupBook] = {}  # ours -> group
        self._episode_group: dict[str, GroupBook] = {}  # ours -> its group
        self._queued: dict[str, int] = {}  # admitted, not shipped: ours -> dispatch version
        self._append(
            "start",
            t,
            RunStarted(
                t=t,
                config=dict(config),
                seed=seed,
                schema_version=SCHEMA_VERSION,
                code_version=code_version,
            ),
        )

    # --- the dispatcher's calls --------------------------------------------------------

    def open_group(
        self,
        t: float,
        group: ForeignId,
        *,
        env: str,
        task: str,
        work: str = "train",
        size: int | None = None,
        frozen: bool = False,
    ) -> str:
        """A group opened, at the current version and step; returns its log id `g<n>`."""
        call = "open_group"
        key = self._new_id(call, "group", group)
        if work not in WORK_KINDS:
            raise RecordError(f"{call}: work must be one of {WORK_KINDS}, got {work!r}")
        ours = f"g{len(self._groups) + 1}"
        size = self.config.group_size if size is None else size
        self._append(
            call,
            t,
            GroupOpened(
                t=t,
                group_id=ours,
                work=cast(Work, work),  # checked against WORK_KINDS above
                env=env,
                task_id=task,
                group_size=size,
                policy_version=self.version,
                step=self.step,
                frozen=frozen,
            ),
            ("group", key, ours),
        )
        self._groups[ours] = GroupBook(
            ours, size, work == "train", frozen, self.version, env=env, task=task
        )
        return ours

    def dispatch(self, t: float, group: ForeignId, episode: ForeignId) -> str:
        """The group's next member went to inference; returns its log id `g<n>/<m>`."""
        call = "dispatch"
        found = self._group(call, group)
        key = self._new_id(call, "episode", episode)
        if found.unscheduled <= 0:
            raise RecordError(f"{call}: group {group!s} owes no member (G={found.size})")
        member = found.dispatched
        ours = f"{found.ours}/{member}"
        stamp = self._stamp(found.version, self.version)
        event = EpisodeDispatched(
            t=t, episode_id=ours, group_id=found.ours, member=member, policy_version=stamp
        )
        self._append(call, t, event, ("episode", key, ours))
        found.dispatched += 1
        found.inflight[ours] = stamp
        self._episode_group[ours] = found
        return ours

    def cancel(
        self,
        t: float,
        group: ForeignId,
        episodes: Iterable[ForeignId] = (),
        *,
        unscheduled: int = 0,
        reason: str,
    ) -> None:
        """The orchestrator cancelled these in-flight members and `unscheduled` owed ones."""
        call = "cancel"
        found = self._group(call, group)
        ours = [self._episode(call, e) for e in episodes]
        for episode, foreign in zip(ours, episodes, strict=True):
            if episode not in found.inflight:
                raise RecordError(f"{call}: episode {foreign!s} is not in flight in {group!s}")
        if reason not in CANCEL_REASONS:
            raise RecordError(f"{call}: reason must be one of {CANCEL_REASONS}, got {reason!r}")
        if not 0 <= unscheduled <= found.unscheduled:
            owed = found.unscheduled
            raise RecordError(f"{call}: {unscheduled} unscheduled, group {group!s} owes {owed}")
        self._append_cancel(call, t, found, ours, unscheduled, reason)

    # --- the world's calls -------------------------------------------------------------

    def complete(
        self,
        t: float,
        episode: ForeignId,
        *,
        reward: float,
        prompt_tokens: int,
        completion_tokens: int,
    ) -> None:
        """Inference and the environment finished an episode (a late one is recorded too)."""
        call = "complete"
        ours = self._episode(call, episode)
        event = EpisodeCompleted(
            t=t,
            episode_id=ours,
            reward=reward,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )
        self._append(call, t, event)
        self._arrive(ours, reward, prompt_tokens + completion_tokens)

    def fail(self, t: float, episode: ForeignId, *, error: str) -> None:
        """Inference or the environment failed an episode."""
        call = "fail"
        ours = self._episode(call, episode)
        self._append(call, t, EpisodeFailed(t=t, episode_id=ours, error=error))
        self._arrive(ours, None, 0)

    def interrupt(
        self, t: float, episode: ForeignId, *, completion_tokens: int, reason: str = "update"
    ) -> None:
        """Inference stopped an in-flight episode at a weight update (`update`) or when a
        batch shipped (`recycle`); it keeps its permit and its `completion_tokens` so far (all
        its segments) and goes on at `resume`. Whether the run's rules make this
        interruption is `replay`'s to check."""
        call = "interrupt"
        ours = self._in_flight(call, episode)
        if reason not in INTERRUPT_REASONS:
            raise RecordError(f"{call}: reason must be one of {INTERRUPT_REASONS}, got {reason!r}")
        if completion_tokens < 0:
            raise RecordError(f"{call}: completion_tokens must be >= 0, got {completion_tokens}")
        checked = cast(InterruptReason, reason)  # checked against INTERRUPT_REASONS above
        event = EpisodeInterrupted(
            t=t, episode_id=ours, completion_tokens=completion_tokens, reason=checked
        )
        self._append(call, t, event)

    def resume(self, t: float, episode: ForeignId, *, version: int) -> None:
        """Inference resubmitted an interrupted episode with its tokens so far; its next
        segment is generated under `version` (the one inference serves)."""
        call = "resume"
        ours = self._in_flight(call, episode)
        self._append(call, t, EpisodeResumed(t=t, episode_id=ours, policy_version=version))

    def version_pending(self, t: float, version: int) -> None:
        """The trainer published `version`: dispatches from now on carry it. A version is
        the weights after its batch, so it is announced once, in order, after that batch
        shipped (the deciders refuse any other)."""
        call = "version_pending"
        problem = version_out_of_turn(self.version, version, self.step - 1)
        if problem is not None and not self.finished:
            raise RecordError(f"{call}: {problem}")
        self._append(call, t, VersionPending(t=t, version=version))
        self.version = version

    def version_live(self, t: float, version: int) -> None:
        """`version` serves on every inference endpoint."""
        self._append("version_live", t, VersionLive(t=t, version=version))

    def set_limit(self, t: float, max_inflight: int) -> None:
        """The concurrency controller moved the permit limit."""
        self._append("set_limit", t, LimitSet(t=t, max_inflight=max_inflight))

    def overload_cut(self, t: float, n: int) -> None:
        """The concurrency controller asked to shed at least `n` episodes."""
        self._append("overload_cut", t, OverloadCut(t=t, n=n))

    # --- the sink's calls --------------------------------------------------------------

    def drop(self, t: float, episode: ForeignId) -> None:
        """The sink dropped an arrived or queued episode as stale; its age is the log's."""
        call = "drop"
        ours = self._episode(call, episode)
        group = self._episode_group[ours]
        if ours in self._queued:
            version = self._queued.pop(ours)
        elif ours in group.arrived and not group.scored and ours not in group.dropped:
            version = group.arrived[ours][1]
            group.dropped.add(ours)
        else:
            raise RecordError(f"{call}: episode {episode!s} is neither arrived nor queued")
        age = rollout_age(version, self.step)
        self._append(call, t, EpisodeDropped(t=t, episode_id=ours, reason="stale", age=age))

    def score(
        self,
        t: float,
        group: ForeignId,
        advantages: Mapping[str, float] | Mapping[uuid.UUID, float],
        *,
        admitted: bool,
    ) -> None:
        """The group finalized: its scored members with their advantages, and the verdict.

        An eval group is measured, never trained: its advantages are recorded empty."""
        call = "score"
        found = self._group(call, group)
        if found.scored:
            raise RecordError(f"{call}: group {group!s} was scored already")
        if not found.complete():
            owes = found.size - len(found.arrived) - found.cancelled
            raise RecordError(f"{call}: group {group!s} still owes {owes} of G={found.size}")
        scored = {self._episode(call, e): a for e, a in advantages.items()}
        order = sorted(scored, key=lambda e: found.arrived.get(e, (found.size,))[0])
        values = [scored[e] for e in order] if found.train else []
        self._append_scored(call, t, found, order, values, admitted)

    def ship(
        self,
        t: float,
        episodes: Iterable[ForeignId],
        *,
        trained: Iterable[ForeignId] | None = None,
        tokens: int | None = None,
    ) -> int:
        """A batch went to the trainer, for the current step; returns that step.

        `trained` defaults to the whole cut, `tokens` to the trained episodes' tokens."""
        call = "ship"
        cut = [self._episode(call, e) for e in episodes]
        kept = cut if trained is None else [self._episode(call, e) for e in trained]
        if tokens is None:
            tokens = sum(self._tokens(e) for e in kept)
        step = self.step
        event = BatchShipped(
            t=t, step=step, episode_ids=tuple(cut), trained_ids=tuple(kept), tokens=tokens
        )
        self._append(call, t, event)
        for episode in cut:
            self._queued.pop(episode, None)
        self.step = step + 1
        return step

    # --- the end of the run ------------------------------------------------------------

    def finish(self, t: float, reason: str = "steps") -> None:
        """End the run: `run_finished`, then the shutdown protocol of docs/contract.md.

        Everything still owed is cancelled (reason `shutdown`: in-flight and unscheduled
        members, one cancellation per group), then every group not yet scored is: arrivals
        stale at the current step are dropped, the rest get GRPO advantages and the
        curriculum's verdict, as the sink gives them (nothing ships after the run ended).
        The log then replays clean, and conforms where the run's decisions did.
        """
        call = "finish"
        if self.finished:  # a run finishes once (docs/log-format.md)
            raise RecordError(f"{call}: the run finished at t={self._t}")
        self._append(call, t, RunFinished(t=t, reason=reason))
        self.finished = True  # from here on, only this call's own events
        for group in self._groups.values():
            if group.inflight or group.unscheduled:
                owed = group.unscheduled
                self._append_cancel(call, t, group, list(group.inflight), owed, "shutdown")
        for group in self._groups.values():
            if not group.scored:
                self._score_at_shutdown(t, group)
        self._log.commit()

    def commit(self) -> None:
        """Make everything recorded so far durable (`LogWriter.commit`)."""
        self._log.commit()

    def close(self) -> None:
        """Close the log; a run not finished stays unfinished (as after a crash)."""
        self._log.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if kind is None and not self.finished:
                self.finish(self._t, reason="closed")
        finally:
            self.close()

    # --- bookkeeping -------------------------------------------------------------------

    def _batch_notes(self) -> Notes:
        first = self._first_notes

        def notes(events: Any) -> dict[str, str]:
            found = self._ids.notes(events)
            return {**first, **found} if events[0].seq == 0 else found

        return notes

    def _append(
        self, call: str, t: float, event: Event, new_id: tuple[str, str, str] | None = None
    ) -> None:
        if self.finished and call != "finish":
            raise RecordError(f"{call}: the run finished at t={self._t}")
        if t < self._t:
            raise RecordError(
                f"{call}: t={t} is before t={self._t} of the previous call ({self._last_call})"
            )
        if new_id is not None:
            self._ids.add(*new_id)
        self._log.append(event)
        self._t, self._last_call = t, call

    def _append_cancel(
        self, call: str, t: float, group: GroupBook, ours: list[str], owed: int, reason: str
    ) -> None:
        checked = cast(CancelReason, reason)  # checked against CANCEL_REASONS by the callers
        event = EpisodesCancelled(
            t=t, group_id=group.ours, episode_ids=tuple(ours), unscheduled=owed, reason=checked
        )
        self._append(call, t, event)
        for episode in ours:
            del group.inflight[episode]
        group.owed_cancelled += owed
        group.cancelled += len(ours) + owed
        group.stale_cancelled |= reason == "stale"

    def _append_scored(
        self,
        call: str,
        t: float,
        group: GroupBook,
        ours: list[str],
        advantages: list[float],
        admitted: bool,
    ) -> None:
        event = GroupScored(
            t=t,
            group_id=group.ours,
            episode_ids=tuple(ours),
            advantages=tuple(advantages),
            admitted=admitted,
        )
        self._append(call, t, event)
        group.scored = True
        if admitted and group.train:
            self._queued |= {e: group.arrived[e][1] for e in ours if e in group.arrived}

    def _score_at_shutdown(self, t: float, group: GroupBook) -> None:
        """The sink's finalization of a group the shutdown cancellations completed."""
        for episode, age in group.stale_arrivals(self.config, self.step):
            self._append(
                "finish", t, EpisodeDropped(t=t, episode_id=episode, reason="stale", age=age)
            )
            group.dropped.add(episode)
        ours, advantages = group.fresh_scores()
        admitted = group.admitted_at_shutdown(self.config)
        self._append_scored("finish", t, group, ours, advantages, admitted=admitted)

    def _arrive(self, ours: str, reward: float | None, tokens: int) -> None:
        group = self._episode_group[ours]
        version = group.inflight.pop(ours, None)
        if version is not None:  # else a late arrival: recorded, and nothing changes
            member = int(ours.rpartition("/")[2])
            group.arrived[ours] = (member, version, reward, tokens)

    def _tokens(self, ours: str) -> int:
        arrival = self._episode_group[ours].arrived.get(ours)
        return 0 if arrival is None else arrival[3]

    def _in_flight(self, call: str, value: ForeignId) -> str:
        ours = self._episode(call, value)
        if ours not in self._episode_group[ours].inflight:
            raise RecordError(f"{call}: episode {value!s} is not in flight")
        return ours

    def _new_id(self, call: str, what: str, value: ForeignId) -> str:
        key = foreign_text(value, call, what)
        if (what, key) in self._ids.ours:
            raise RecordError(f"{call}: {what} {value!s} was recorded before")
        return key

    def _group(self, call: str, value: ForeignId) -> GroupBook:
        ours = self._ids.ours.get(("group", foreign_text(value, call, "group")))
        if ours is None:
            raise RecordError(f"{call}: group {value!s} was never opened")
        return self._groups[ours]

    def _episode(self, call: str, value: ForeignId) -> str:
        ours = self._ids.ours.get(("episode", foreign_text(value, call, "episode")))
        if ours is None:
            raise RecordError(f"{call}: episode {value!s} was never dispatched")
        return ours
