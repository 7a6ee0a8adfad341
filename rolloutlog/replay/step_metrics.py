"""Rollout age split in two, per step and per run, under prime-rl's metric names.

A trained episode of age `a` (`core.staleness.rollout_age` at the step it ships in),
dispatched at version `v`, that arrived while inference served version `w` (the last
`version_live`, 0 before any) spent `in_flight = min(a, max(0, w - v))` of its age being
generated and `in_queue = a - in_flight` waiting to be trained. Both parts are >= 0 and
add up to `a`. A large in-queue part says the trainer is the bottleneck; a large in-flight
part says rollouts are long.

`StepMetrics` reads a log as recorded (it decides and checks nothing; `replay` checks):
from event objects (`observe`) or straight from record batches (`from_batches`). Per step
it keeps `off_policy/mean|max` (age), `off_policy/in_flight/mean|max` and
`off_policy/in_queue/mean|max` over the episodes the batch trains, `off_policy/dropped`
(episodes the sink dropped as stale during the step), `dispatcher/off_policy/mean|max`
(the ages of in-flight train episodes each time a version went pending during the step)
and `reward/mean` (over the trained episodes). The run-level values aggregate every
episode (not the step means); see docs/replay.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

import attrs
import pyarrow as pa

from rolloutlog.core.staleness import rollout_age
from rolloutlog.events.schema import batch_columns
from rolloutlog.events.types import Event

OFF_POLICY: Final = "off_policy"
IN_FLIGHT: Final = "off_policy/in_flight"
IN_QUEUE: Final = "off_policy/in_queue"
DISPATCHER: Final = "dispatcher/off_policy"
DROPPED: Final = "off_policy/dropped"
# The per-step table's columns, in order (`rolloutlog metrics`).
STEP_COLUMNS: Final = (
    "step",
    "time",
    "trained",
    *(f"{name}/{stat}" for name in (OFF_POLICY, IN_FLIGHT, IN_QUEUE) for stat in ("mean", "max")),
    DROPPED,
    f"{DISPATCHER}/mean",
    f"{DISPATCHER}/max",
    "reward/mean",
)


def age_split(age: int, dispatch_version: int, live_version: int) -> tuple[int, int]:
    """(in_flight, in_queue) of an episode of rollout age `age`."""
    in_flight = min(age, max(0, live_version - dispatch_version))
    return in_flight, age - in_flight


@attrs.define(slots=True)
class Stat:
    """Count, sum and max of integer samples; mean and max are None when empty."""

    count: int = 0
    total: float = 0.0
    largest: float | None = None

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.largest = value if self.largest is None else max(self.largest, value)

    def mean(self) -> float | None:
        return None if self.count == 0 else self.total / self.count


@attrs.define(slots=True)
class _Window:
    """What one step (or the whole run) has seen so far."""

    age: Stat = attrs.Factory(Stat)
    in_flight: Stat = attrs.Factory(Stat)
    in_queue: Stat = attrs.Factory(Stat)
    dispatcher: Stat = attrs.Factory(Stat)
    reward: Stat = attrs.Factory(Stat)
    dropped: int = 0

    def values(self) -> dict[str, Any]:
        stats = ((OFF_POLICY, self.age), (IN_FLIGHT, self.in_flight), (IN_QUEUE, self.in_queue))
        out: dict[str, Any] = {}
        for name, stat in stats:
            out[f"{name}/mean"], out[f"{name}/max"] = stat.mean(), stat.largest
        out[DROPPED] = self.dropped
        out[f"{DISPATCHER}/mean"] = self.dispatcher.mean()
        out[f"{DISPATCHER}/max"] = self.dispatcher.largest
        return out


Get = Callable[[str], Any]


def _cell(columns: dict[str, list[Any]], i: int) -> Get:
    """Row `i` of a batch's columns, read by field name like an event's attributes."""
    return lambda name: columns[name][i]


class StepMetrics:
    """The age split of every trained episode of a log, per step and for the whole run."""

    def __init__(self) -> None:
        self.step = 1
        self.live_version = 0
        self.train_groups: set[str] = set()  # open train groups
        self.inflight: dict[str, int] = {}  # train episode -> dispatch version
        self.arrived: dict[str, tuple[int, int, float | None]] = {}  # id -> (v, w, reward)
        self.members: dict[str, list[str]] = {}  # group -> its arrived train episodes
        self.rows: list[dict[str, Any]] = []
        self.window = _Window()
        self.run = _Window()
        self._handlers: dict[str, Callable[[Get, float], None]] = {
            "group_opened": self._group_opened,
            "episode_dispatched": self._dispatched,
            "episode_completed": self._completed,
            "episode_failed": self._failed,
            "episodes_cancelled": self._cancelled,
            "version_pending": self._version_pending,
            "version_live": self._version_live,
            "episode_dropped": self._dropped,
            "group_scored": self._scored,
            "batch_shipped": self._shipped,
        }

    @classmethod
    def from_batches(cls, batches: Iterable[pa.RecordBatch]) -> StepMetrics:
        """Read a log's record batches, one column list at a time (no event objects)."""
        metrics = cls()
        metrics.read(batches)
        return metrics

    def read(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Read record batches; what was read stays counted if reading them fails."""
        for batch in batches:
            columns = batch_columns(batch)
            for i, (kind, t) in enumerate(zip(columns["kind"], columns["t"], strict=True)):
                handler = self._handlers.get(kind)
                if handler is not None:
                    handler(_cell(columns, i), t)

    def observe(self, event: Event) -> None:
        """Read one event."""
        handler = self._handlers.get(event.kind)
        if handler is not None:
            handler(lambda name: getattr(event, name), event.t)

    def run_values(self) -> dict[str, Any]:
        """The run-level values, under their metric names."""
        return self.run.values()

    # --- per kind ------------------------------------------------------------------------

    def _group_opened(self, get: Get, t: float) -> None:
        if get("work") == "train":
            self.train_groups.add(get("group_id"))

    def _dispatched(self, get: Get, t: float) -> None:
        if get("group_id") in self.train_groups:
            self.inflight[get("episode_id")] = get("policy_version")

    def _completed(self, get: Get, t: float) -> None:
        self._arrive(get("episode_id"), get("reward"))

    def _failed(self, get: Get, t: float) -> None:
        self._arrive(get("episode_id"), None)

    def _arrive(self, episode_id: str, reward: float | None) -> None:
        version = self.inflight.pop(episode_id, None)
        if version is not None:  # a train episode, not late
            self.arrived[episode_id] = (version, self.live_version, reward)
            self.members.setdefault(episode_id.rpartition("/")[0], []).append(episode_id)

    def _cancelled(self, get: Get, t: float) -> None:
        for episode_id in get("episode_ids"):
            self.inflight.pop(episode_id, None)

    def _version_pending(self, get: Get, t: float) -> None:
        for version in self.inflight.values():
            age = rollout_age(version, self.step)
            self.window.dispatcher.add(age)
            self.run.dispatcher.add(age)

    def _version_live(self, get: Get, t: float) -> None:
        self.live_version = get("version")

    def _dropped(self, get: Get, t: float) -> None:
        self.arrived.pop(get("episode_id"), None)
        self.window.dropped += 1
        self.run.dropped += 1

    def _scored(self, get: Get, t: float) -> None:
        """Members that will never train (failed, unscored, not admitted) are forgotten."""
        group_id, kept = get("group_id"), set(get("episode_ids")) if get("admitted") else set()
        self.train_groups.discard(group_id)
        for episode_id in self.members.pop(group_id, ()):
            if episode_id not in kept:
                self.arrived.pop(episode_id, None)

    def _shipped(self, get: Get, t: float) -> None:
        step, window = get("step"), self.window
        trained = set(get("trained_ids"))
        for episode_id in get("episode_ids"):
            found = self.arrived.pop(episode_id, None)
            if found is None or episode_id not in trained:
                continue
            version, live, reward = found
            age = rollout_age(version, step)
            in_flight, in_queue = age_split(age, version, live)
            for part in (window, self.run):
                part.age.add(age)
                part.in_flight.add(in_flight)
                part.in_queue.add(in_queue)
                if reward is not None:
                    part.reward.add(reward)
        self.rows.append(
            {
                "step": step,
                "time": t,
                "trained": len(trained),
                **window.values(),
                "reward/mean": window.reward.mean(),
            }
        )
        self.step, self.window = step + 1, _Window()
