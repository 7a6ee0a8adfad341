"""Why the trainer waited: each shipped batch's wait, split into causes that add up to it.

The trainer takes batches one at a time (docs/timeline.md § The trainer's spans): it
trains batch `s` from `start(s)`, publishes (`version_pending`), takes part in the weight
update until `version_live`, and is then free. Its **wait before batch `s`** runs from the
moment it was done with the batch before (the `version_pending` after it; the log's first
event for batch 1) to `start(s)`: the later of `batch_shipped(s)` and the `version_live`
that ends the update under way. A batch that ships while the trainer is busy and is
trained before the next publication (`updates_per_sync > 1`, a skipped version) shows no
wait: the log does not say where one batch's training ended and the next began.

Each wait is partitioned by what held at each instant (`explain_state.CAUSES`, in
priority order: the first that holds takes the instant), so the causes add up to the wait
exactly (in exact arithmetic; each is a correctly rounded sum, so the printed floats agree
to about 1e-12 s). docs/explain.md gives the rule for each cause.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import Any, Final

import attrs

from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.events.errors import EventError, LogError
from rolloutlog.events.schema import iter_batch_columns
from rolloutlog.replay.explain_state import CAUSES, RunState, StepWaste
from rolloutlog.replay.source import LogSource

# How the run summary names each cause.
DESCRIBED: Final = {
    "pause": "the weight update",
    "hold": "the ship hold",
    "held": "a full queue a rule keeps from shipping (a last-chance wait, ROLL's window)",
    "straggler": "stragglers (a group waiting for its last rollout)",
    "gate": "the gate",
    "redo": "refilling after work thrown away",
    "failed": "refilling after failures",
    "fill": "waiting for fresh rollouts",
}


class ExplainError(ValueError):
    """The log cannot be explained: no `run_started` first, or a config that cannot load."""


@attrs.frozen
class StepWait:
    """The trainer's wait before one shipped batch, and what the step threw away."""

    step: int
    shipped_at: float
    wait_from: float
    wait_to: float  # the trainer starts on the batch
    causes: dict[str, float]  # every name of CAUSES, seconds each
    wasted_episodes: int
    wasted_rollout_s: float

    @property
    def wait(self) -> float:
        return self.wait_to - self.wait_from

    def columns(self) -> dict[str, Any]:
        """The row's values under `rolloutlog metrics`' names (`WAIT_COLUMNS`)."""
        return {
            "wait/trainer": self.wait,
            **{f"wait/{cause}": self.causes[cause] for cause in CAUSES},
            "wasted/episodes": self.wasted_episodes,
            "wasted/rollout_s": self.wasted_rollout_s,
        }


WAIT_COLUMNS: Final = (
    "wait/trainer",
    *(f"wait/{cause}" for cause in CAUSES),
    "wasted/episodes",
    "wasted/rollout_s",
)


@attrs.frozen
class Explanation:
    """Every shipped batch's wait, and the wait after the last one (for no batch)."""

    steps: list[StepWait]
    tail_s: float  # the trainer's wait after its last batch, until the log ends
    # the traced step's wait: (start, end, cause, its numbers), in time order
    spans: list[tuple[float, float, str, str]] = attrs.Factory(list)
    # with `bands`: every wait, the tail's too, as (start, end, index into CAUSES)
    bands: list[tuple[float, float, int]] = attrs.Factory(list)

    def totals(self) -> dict[str, float]:
        """Seconds per cause over every step."""
        return {c: math.fsum(s.causes[c] for s in self.steps) for c in CAUSES}

    def total_wait(self) -> float:
        return math.fsum(s.wait for s in self.steps)

    def summary(self) -> str:
        """One sentence: the share of the trainer's waiting each cause took, largest first."""
        total = self.total_wait()
        if not self.steps:
            return "no batch shipped: the trainer never started"
        if total <= 0:
            return f"the trainer never waited before its {len(self.steps)} batches"
        parts = sorted(self.totals().items(), key=lambda item: -item[1])
        shares = [f"{seconds / total:.0%} is {DESCRIBED[c]}" for c, seconds in parts if seconds > 0]
        return (
            f"the trainer waited {total:.2f} s before its {len(self.steps)} batches "
            f"(idle or updating weights): " + "; ".join(shares)
        )

    def to_json(self) -> dict[str, Any]:
        total = self.total_wait()
        totals = self.totals()
        return {
            "steps": [
                {"step": s.step, "shipped_at": s.shipped_at, **s.columns()} for s in self.steps
            ],
            "run": {
                "wait/trainer": total,
                **{f"wait/{c}": totals[c] for c in CAUSES},
                "share": {c: (totals[c] / total if total > 0 else None) for c in CAUSES},
                "wasted/episodes": sum(s.wasted_episodes for s in self.steps),
                "wasted/rollout_s": math.fsum(s.wasted_rollout_s for s in self.steps),
                "tail_s": self.tail_s,
            },
            "summary": self.summary(),
        }


class WaitSplit:
    """The trainer's phase and the current wait's causes, fed the log row by row."""

    def __init__(
        self, config: RunConfig, t0: float, trace_step: int | None = None, bands: bool = False
    ) -> None:
        self.state = RunState(config)
        self.trace_step = trace_step  # keep this step's wait as spans, with their numbers
        self.bands: list[tuple[float, float, int]] | None = [] if bands else None
        self.spans: list[tuple[float, float, str, str]] = []
        self.traced: list[tuple[float, float, str, str]] = []
        self.now = self.free_since = t0
        self.busy = False
        self.backlog: deque[int] = deque()  # shipped, waiting for the trainer
        self.shipped: dict[int, tuple[float, StepWaste]] = {}
        self.parts: dict[str, list[float]] = {cause: [] for cause in CAUSES}
        self.steps: list[StepWait] = []

    def row(self, kind: str, t: float, c: dict[str, list[Any]], r: int) -> None:
        if t > self.now:
            self._advance(t)
        waste = self.state.waste
        self.state.row(kind, t, c, r)
        if kind == "batch_shipped":
            self._ship(c["step"][r], t, waste)
        elif kind == "version_pending":
            self._publish(c["version"][r], t)
        elif kind in ("version_live", "run_resumed"):
            self._free(t)

    def _advance(self, t: float) -> None:
        """Close the instants [now, t): while the trainer waits, charge them to their cause.

        Waiting for rollouts (a straggler, or fresh ones) is charged to the gate first, for
        as long as the gate held train work back with a permit free since the step began
        (while the trainer trained, or under a cause ahead of it): the rollouts the batch
        waits for could have gone out that much earlier.
        """
        now, state = self.now, self.state
        cause = "busy" if self.busy else state.cause()
        if cause in ("straggler", "fill") and state.waste.gate_s > 0:
            owed = min(t - now, state.waste.gate_s)
            self._charge("gate", now, now + owed)
            state.waste.gate_s -= owed
            self._charge(cause, now + owed, t)
        elif cause != "busy":
            self._charge(cause, now, t)
        if cause not in ("gate", "straggler", "fill") and state.gated():
            state.waste.gate_s += t - now
        self.now = t

    def _charge(self, cause: str, start: float, end: float) -> None:
        if end > start:
            self.parts[cause] += [end, -start]
            if self.trace_step is not None:
                self.spans.append((start, end, cause, self.state.describe(cause)))
            if self.bands is not None:
                self._band(start, end, CAUSES.index(cause))

    def _band(self, start: float, end: float, code: int) -> None:
        """Every wait's causes over the run, a span joined to the one before it if it
        goes on with the same cause (the timeline's band)."""
        bands = self.bands if self.bands is not None else []
        if bands and bands[-1][1] == start and bands[-1][2] == code:
            bands[-1] = (bands[-1][0], end, code)
        else:
            bands.append((start, end, code))

    def _ship(self, step: int, t: float, waste: StepWaste) -> None:
        self.shipped[step] = (t, waste)
        self.backlog.append(step)
        self._free(t)

    def _publish(self, version: int, t: float) -> None:
        """The trainer published: what it trained is done (batches it took without a
        visible wait included), and the weight update starts its next wait."""
        while self.backlog and self.backlog[0] <= version:
            step = self.backlog.popleft()
            self._record(
                step, self.shipped[step][0], self.shipped[step][0], dict.fromkeys(CAUSES, 0.0)
            )
        if self.busy:
            self.busy, self.free_since = False, t

    def _free(self, t: float) -> None:
        """The trainer starts the oldest waiting batch if it is neither busy nor updating."""
        if self.busy or self.state.updating or not self.backlog:
            return
        causes = {cause: math.fsum(parts) for cause, parts in self.parts.items()}
        step = self.backlog.popleft()
        self._record(step, self.free_since, t, causes)
        if step == self.trace_step:
            self.traced = self.spans
        self.parts = {cause: [] for cause in CAUSES}
        self.spans = []
        self.busy = True

    def _record(self, step: int, since: float, to: float, causes: dict[str, float]) -> None:
        shipped_at, waste = self.shipped.pop(step)
        self.steps.append(
            StepWait(step, shipped_at, since, to, causes, waste.episodes, waste.rollout_s)
        )

    def explanation(self) -> Explanation:
        tail = 0.0 if self.busy else math.fsum(v for parts in self.parts.values() for v in parts)
        steps = sorted(self.steps, key=lambda s: s.step)
        return Explanation(steps, tail, self.traced, self.bands or [])


def config_of(row_config: Any, seq: int) -> RunConfig:
    """The run's config from its `run_started` row; an `ExplainError` if it cannot load."""
    try:
        return RunConfig.from_mapping(row_config, where="run_started.config", startable=False)
    except ConfigError as error:
        raise ExplainError(f"seq {seq} (run_started): {error}") from error


def explain_columns(
    batches: Iterable[dict[str, list[Any]]], trace_step: int | None = None, bands: bool = False
) -> Explanation:
    """The waits of a log given as `batch_columns` dicts (an empty log: no step); with
    `trace_step`, that step's wait as spans of one cause each, with their numbers; with
    `bands`, every wait's causes over time (`Explanation.bands`)."""
    split: WaitSplit | None = None
    for columns in batches:
        kinds, times = columns["kind"], columns["t"]
        for r, kind in enumerate(kinds):
            if split is None:
                if kind != "run_started":
                    raise ExplainError(
                        f"seq {columns['seq'][r]} ({kind}): a log starts with run_started"
                    )
                config = config_of(columns["config"][r], columns["seq"][r])
                split = WaitSplit(config, times[r], trace_step, bands)
            split.row(kind, times[r], columns, r)
    return split.explanation() if split is not None else Explanation([], 0.0)


def explain_log(source: LogSource, trace_step: int | None = None) -> Explanation:
    """Every shipped batch's wait in `source`, split into its causes."""
    return explain_columns(iter_batch_columns(source.batches()), trace_step)


def cause_bands(source: LogSource) -> list[tuple[float, float, int]]:
    """The trainer's waits over the whole run as (start, end, index into CAUSES); none for
    a log that cannot be explained (the timeline draws the rest of it all the same)."""
    try:
        return explain_columns(iter_batch_columns(source.batches()), bands=True).bands
    except (ExplainError, EventError, LogError):
        return []
