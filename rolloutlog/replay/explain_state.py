"""What was true at each instant of a run, as far as the trainer's wait is concerned.

`explain` splits each of the trainer's waits by what held at each instant; this module
keeps that state as a log is read, one row at a time, from the log alone (it decides
nothing, and it reads the deciders' rules only for the lag of the gate and the ship hold):
the step the sink collects and the version announced, whether a weight update is under
way, the queue (in episodes, or in tokens for a token batch), the open train groups and
what each still owes, the permits, and what the current step has thrown away so far
(finished work dropped, failures) and the rollout seconds that work cost.

`cause()` names the first of `CAUSES` that holds in the current state; docs/explain.md
gives the rule for each.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.presets import rules_for
from rolloutlog.core.staleness import rollout_age

# In priority order: at each instant of a wait the first that holds takes it.
CAUSES: Final = (
    "pause",  # a weight update is under way (version_pending, its version_live not yet)
    "hold",  # a full batch is queued; the ship hold keeps it
    "held",  # a full batch is queued past the hold and not shipped: a rule keeps it
    "straggler",  # the batch would be full if the groups owing one last rollout had it
    "gate",  # the gate keeps train work back while a permit is free (or kept it, earlier)
    "redo",  # the batch would be full had the step's dropped work been kept
    "failed",  # ... and its failed rollouts too
    "fill",  # waiting for fresh arrivals
)
# Cancellations that throw away work (not the run's end: nothing would have used it).
WASTING_CANCELS: Final = frozenset(
    {"stale", "straggler", "overload", "leftover", "redundant", "restart"}
)


@attrs.define(slots=True)
class OpenGroup:
    """A train group not yet scored: what it owes, what arrived fresh and successful."""

    size: int
    frozen: bool
    resolved: int = 0  # arrivals and cancellations (unscheduled members counted)
    inflight: int = 0
    fresh: dict[str, int] = attrs.Factory(dict)  # successful arrival -> its dispatch version


@attrs.define(slots=True)
class StepWaste:
    """What the step being collected threw away so far (reset when its batch ships)."""

    dropped: float = 0.0  # finished work dropped, in batch units (episodes or tokens)
    failed: float = 0.0  # failed rollouts, in batch units
    episodes: int = 0  # episodes thrown away: dropped, or cancelled while generating
    rollout_s: float = 0.0  # their seconds from dispatch to the drop's arrival or the cancel
    gate_s: float = 0.0  # seconds the gate held train work back with a permit free, not yet
    # charged to a wait: what the rollouts the batch still waits for could have had


class RunState:
    """The run as `explain` reads it, fed row by row (`row(kind, t, columns, r)`)."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        rules = rules_for(config)
        self.lag = rules.lag(config)  # the ship hold's
        self.gate_lag = rules.gate(self.lag)  # the dispatch gate's (none: a lag never met)
        self.bound = config.max_off_policy_steps
        self.soft = config.staleness == "soft"
        self.by_tokens = config.token_batch_size is not None
        self.need = float(config.token_batch_size or config.batch_size or 0)
        self.redundancy = config.group_redundancy
        self.limit = config.max_inflight
        self.step, self.version, self.pending, self.live = 1, 0, 0, 0
        self.finished = False
        self.queue: dict[str, float] = {}
        self.queued = 0.0
        self.groups: dict[str, OpenGroup] = {}
        self.eval_groups: set[str] = set()
        self.inflight: dict[str, tuple[str, float, int]] = {}  # id -> group, dispatch t, version
        self.arrived: dict[str, tuple[float, float]] = {}  # id -> dispatch t, batch units
        self.completed, self.completed_tokens = 0, 0
        self.waste = StepWaste()

    # --- the cause of an instant -----------------------------------------------------

    @property
    def updating(self) -> bool:
        """A version was announced and does not serve yet."""
        return self.pending > self.live

    def cause(self) -> str:
        """The first of `CAUSES` that holds now (for a trainer waiting for batch `step`)."""
        if self.updating:
            return "pause"
        need, queued = self.need, self.queued
        if queued >= need:
            return "hold" if self.version < self.step - 1 - self.lag else "held"
        if queued + self.straggling() >= need:
            return "straggler"
        if self.gated():
            return "gate"
        if queued + self.waste.dropped >= need:
            return "redo"
        if queued + self.waste.dropped + self.waste.failed >= need:
            return "failed"
        return "fill"

    def describe(self, cause: str) -> str:
        """The numbers behind `cause` now, in a few words (`explain --step`)."""
        queue = f"queue {self._amount(self.queued)}/{self._amount(self.need)}"
        if cause == "pause":
            return f"the update to v{self.pending} (v{self.live} serves)"
        if cause == "hold":
            floor = self.step - 1 - self.lag
            return f"{queue}; the hold: v{self.version} < ({self.step} − 1) − {self.lag} = {floor}"
        if cause == "held":
            return f"{queue}, past the hold, not shipped"
        if cause == "straggler":
            return f"{queue}; waiting for {', '.join(self.stragglers()) or 'a last rollout'}"
        if cause == "gate":
            return self._gate_words()
        thrown = (
            f"{self._amount(self.waste.dropped)} dropped, {self._amount(self.waste.failed)} failed"
        )
        return f"{queue}; {thrown} this step; {len(self.inflight)} in flight"

    def _gate_words(self) -> str:
        lag = (self.step - 1) - self.version
        if self.gated():
            return f"the gate: ({self.step} − 1) − v{self.version} = {lag} > lag {self.gate_lag}"
        return "waiting for rollouts the gate held back earlier in the step"

    def _amount(self, value: float) -> str:
        return f"{value:,.0f} tokens" if self.by_tokens else f"{value:.0f}"

    def stragglers(self) -> list[str]:
        """The in-flight rollouts that groups owing one last member wait for."""
        waiting = {
            group_id
            for group_id, group in self.groups.items()
            if group.inflight == 1 and group.size - group.resolved == 1 and group.fresh
        }
        return [e for e, (group_id, _, _) in self.inflight.items() if group_id in waiting]

    def gated(self) -> bool:
        """The gate holds train dispatch back and a permit is free for it."""
        closed = (self.step - 1) - self.version > self.gate_lag
        return closed and not self.finished and len(self.inflight) < self.limit

    def straggling(self) -> float:
        """What the groups owing exactly one rollout, in flight, would add to the queue
        if it came: their fresh arrivals (a token batch: their tokens; the straggler's
        own tokens are not known, so it counts for none)."""
        total = 0.0
        for group in self.groups.values():
            if group.inflight == 1 and group.size - group.resolved == 1 and group.fresh:
                fresh = [e for e, v in group.fresh.items() if self._fresh(v, group.frozen)]
                if self.by_tokens:
                    total += sum(self.arrived[e][1] for e in fresh)
                else:
                    total += len(fresh) + 1
        return total

    def _fresh(self, version: int, frozen: bool) -> bool:
        return self.soft or frozen or rollout_age(version, self.step) <= self.bound

    # --- reading the log ----------------------------------------------------------------

    def row(self, kind: str, t: float, c: dict[str, list[Any]], r: int) -> None:
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, t, c, r)

    def opened(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        group_id = c["group_id"][r]
        if c["work"][r] == "eval":
            self.eval_groups.add(group_id)
            return
        size = c["group_size"][r] + self.redundancy
        self.groups[group_id] = OpenGroup(size=size, frozen=bool(c["frozen"][r]))

    def dispatched(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        group_id = c["group_id"][r]
        self.inflight[c["episode_id"][r]] = (group_id, t, c["policy_version"][r])
        group = self.groups.get(group_id)
        if group is not None:
            group.inflight += 1

    def completed_row(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        episode_id = c["episode_id"][r]
        found = self.inflight.pop(episode_id, None)
        if found is None:
            return  # late: recorded, otherwise ignored
        group_id, since, version = found
        tokens = c["prompt_tokens"][r] + c["completion_tokens"][r]
        self.completed, self.completed_tokens = self.completed + 1, self.completed_tokens + tokens
        self.arrived[episode_id] = (since, float(tokens) if self.by_tokens else 1.0)
        group = self.groups.get(group_id)
        if group is not None:
            group.inflight, group.resolved = group.inflight - 1, group.resolved + 1
            group.fresh[episode_id] = version

    def failed(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        found = self.inflight.pop(c["episode_id"][r], None)
        if found is None:
            return
        group = self.groups.get(found[0])
        if group is not None:
            group.inflight, group.resolved = group.inflight - 1, group.resolved + 1
            self.waste.failed += self._mean_size()

    def _mean_size(self) -> float:
        """A failed rollout's size in batch units: one episode, or the mean tokens so far."""
        if not self.by_tokens:
            return 1.0
        return self.completed_tokens / self.completed if self.completed else 0.0

    def cancelled(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        wasted = c["reason"][r] in WASTING_CANCELS
        ids = c["episode_ids"][r]
        group = self.groups.get(c["group_id"][r])
        for episode_id in ids:
            found = self.inflight.pop(episode_id, None)
            if found is None:
                continue
            if group is not None:
                group.inflight -= 1
            if wasted:
                self.waste.episodes += 1
                self.waste.rollout_s += t - found[1]
        if group is not None:
            group.resolved += len(ids) + c["unscheduled"][r]

    def dropped(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        episode_id = c["episode_id"][r]
        size = self.queue.pop(episode_id, None)
        if size is not None:
            self.queued -= size
        found = self.arrived.pop(episode_id, None)
        if found is not None:
            self.waste.dropped += found[1]
            self.waste.episodes += 1
            self.waste.rollout_s += t - found[0]
        group = self.groups.get(episode_id.rpartition("/")[0])
        if group is not None:  # dropped at its group's finalize, before the scoring
            group.fresh.pop(episode_id, None)

    def scored(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        group_id = c["group_id"][r]
        group = self.groups.pop(group_id, None)
        self.eval_groups.discard(group_id)
        if group is None:
            return
        admitted = set(c["episode_ids"][r]) if c["admitted"][r] else set()
        for episode_id in group.fresh:
            if episode_id in admitted and episode_id in self.arrived:
                size = self.arrived[episode_id][1]
                self.queue[episode_id] = size
                self.queued += size
            elif episode_id not in admitted:
                self.arrived.pop(episode_id, None)

    def shipped(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        for episode_id in c["episode_ids"][r]:
            size = self.queue.pop(episode_id, None)
            if size is not None:
                self.queued -= size
            self.arrived.pop(episode_id, None)
        self.step = c["step"][r] + 1
        self.waste = StepWaste()

    def announced(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        self.version = self.pending = max(self.pending, c["version"][r])

    def went_live(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        self.live = max(self.live, c["version"][r])

    def limited(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        self.limit = c["max_inflight"][r]

    def resumed_run(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        """A new driver restarts the trainer from its checkpoint: no update is under way."""
        self.version = self.pending = self.live = c["version"][r]


_HANDLERS: Final[dict[str, Any]] = {
    "group_opened": RunState.opened,
    "episode_dispatched": RunState.dispatched,
    "episode_completed": RunState.completed_row,
    "episode_failed": RunState.failed,
    "episodes_cancelled": RunState.cancelled,
    "episode_dropped": RunState.dropped,
    "group_scored": RunState.scored,
    "batch_shipped": RunState.shipped,
    "version_pending": RunState.announced,
    "version_live": RunState.went_live,
    "limit_set": RunState.limited,
    "run_resumed": RunState.resumed_run,
    "run_finished": lambda state, t, c, r: setattr(state, "finished", True),
}
