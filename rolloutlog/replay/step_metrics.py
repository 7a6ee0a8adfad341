"""Rollout age split in two, per step and per run, under prime-rl's metric names.

A trained episode of age `a` (`core.staleness.rollout_age` at the step it ships in, at
least 0),
dispatched at version `v`, that arrived while inference served version `w` (the last
`version_live`, 0 before any) spent `in_flight = min(a, max(0, w - v))` of its age being
generated and `in_queue = a - in_flight` waiting to be trained. Both parts are >= 0 and
add up to `a`. A large in-queue part says the trainer is the bottleneck; a large in-flight
part says rollouts are long.

`StepMetrics` reads a log as recorded (it decides and checks nothing; `replay` checks):
from event objects (`observe`) or straight from record batches (`from_batches`). Per step
it keeps `off_policy/mean|max` (age), `off_policy/in_flight/mean|max` and
`off_policy/in_queue/mean|max` over the episodes the batch trains, `off_policy/dropped`
(episodes the sink dropped as stale during the step), `off_policy/requeued` (groups of
them discarded whole and requeued: tinker, slime-lag), `off_policy/withheld` (of them, the
members scored with their group and withheld: prime-rl-withhold; a run-level value only
where a log withholds any), `off_policy/evicted` (queued episodes a bounded queue dropped
to make room, not counted as dropped), `off_policy/leftover` (episodes aborted in flight
or dropped finished once a batch filled, slime-oversample: counted in the step after that
batch), `cancelled/redundant` (in-flight members past G cancelled at their group's G-th
arrival, `group_redundancy`; at run level only where a run has one), `off_policy/masked_tokens`
(trained completion tokens that carried no gradient, `stale_tokens = mask`: a run-level
value only where a log masks any),
`dispatcher/off_policy/mean|max`
(the ages of in-flight train episodes each time a version went pending during the step)
and `reward/mean` (over the trained episodes); where a log interrupted episodes, the
split of trained tokens by version age (`replay.step_segments`). The run-level values
aggregate every episode (not the step means); see docs/replay.md.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final

import attrs
import pyarrow as pa

from rolloutlog.core.account.groups import Generated
from rolloutlog.core.staleness import rollout_age
from rolloutlog.events.errors import EventError, LogError
from rolloutlog.events.schema import batch_columns, iter_batch_columns
from rolloutlog.events.types import EVENT_TYPES, Event
from rolloutlog.replay.explain import WAIT_COLUMNS, ExplainError, explain_columns
from rolloutlog.replay.step_segments import SegmentSplit

if TYPE_CHECKING:
    from rolloutlog.replay.source import LogSource

OFF_POLICY: Final = "off_policy"
IN_FLIGHT: Final = "off_policy/in_flight"
IN_QUEUE: Final = "off_policy/in_queue"
DISPATCHER: Final = "dispatcher/off_policy"
DROPPED: Final = "off_policy/dropped"
REQUEUED: Final = "off_policy/requeued"
WITHHELD: Final = "off_policy/withheld"
EVICTED: Final = "off_policy/evicted"
LEFTOVER: Final = "off_policy/leftover"
REDUNDANT: Final = "cancelled/redundant"
MASKED: Final = "off_policy/masked_tokens"
# The per-step table's columns, in order (`rolloutlog metrics`).
STEP_COLUMNS: Final = (
    "step",
    "time",
    "trained",
    *(f"{name}/{stat}" for name in (OFF_POLICY, IN_FLIGHT, IN_QUEUE) for stat in ("mean", "max")),
    DROPPED,
    REQUEUED,
    WITHHELD,
    EVICTED,
    LEFTOVER,
    REDUNDANT,
    f"{DISPATCHER}/mean",
    f"{DISPATCHER}/max",
    "reward/mean",
)


def _age(version: int, step: int) -> int:
    """`rollout_age`, clamped at 0 as prime-rl clamps its lag: only a log that announced a
    version before its batch shipped (a violation `replay` names) has a negative one."""
    return max(0, rollout_age(version, step))


def age_split(age: int, dispatch_version: int, live_version: int) -> tuple[int, int]:
    """(in_flight, in_queue) of an episode of rollout age `age`."""
    in_flight = min(age, max(0, live_version - dispatch_version))
    return in_flight, age - in_flight


@attrs.define(slots=True)
class Stat:
    """Count, sum and max of samples; mean and max are None when empty."""

    count: int = 0
    total: float = 0.0
    largest: float | None = None

    def add(self, values: list[int] | list[float], times: int = 1) -> None:
        """Add each of `values` (`times` times over)."""
        if not values:
            return
        self.count += len(values) * times
        self.total += sum(values) * times
        top = max(values)
        self.largest = top if self.largest is None else max(self.largest, top)

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
    evicted: int = 0
    requeued: set[str] = attrs.Factory(set)  # groups discarded for requeue
    withheld: int = 0  # members scored with their group, then withheld
    leftover: int = 0  # episodes aborted in flight or dropped finished as leftovers (slime)
    redundant: int = 0  # in-flight members cancelled as redundant
    masked: int = 0  # trained tokens that carried no gradient (`stale_tokens = mask`)

    def values(self) -> dict[str, Any]:
        stats = ((OFF_POLICY, self.age), (IN_FLIGHT, self.in_flight), (IN_QUEUE, self.in_queue))
        out: dict[str, Any] = {}
        for name, stat in stats:
            out[f"{name}/mean"], out[f"{name}/max"] = stat.mean(), stat.largest
        out[DROPPED] = self.dropped
        out[REQUEUED] = len(self.requeued)
        out[WITHHELD] = self.withheld
        out[EVICTED] = self.evicted
        out[REDUNDANT] = self.redundant
        out[f"{DISPATCHER}/mean"] = self.dispatcher.mean()
        out[f"{DISPATCHER}/max"] = self.dispatcher.largest
        return out


# What each handler reads, by kind, in the order it takes them: from an event's attributes
# (`observe`) or from a row of a batch's columns (`read`), so each rule is written once.
_READS: Final[dict[str, tuple[str, ...]]] = {
    "group_opened": ("work", "group_id"),
    "episode_dispatched": ("group_id", "episode_id", "policy_version"),
    "episode_completed": ("episode_id", "reward", "completion_tokens"),
    "episode_failed": ("episode_id",),
    "episodes_cancelled": ("episode_ids", "reason"),
    "version_pending": (),
    "version_live": ("version",),
    "episode_dropped": ("episode_id", "reason"),
    "group_scored": ("group_id", "episode_ids", "admitted"),
    "batch_shipped": ("t", "step", "episode_ids", "trained_ids", "masked_tokens"),
    "episode_interrupted": ("episode_id", "completion_tokens"),
    "episode_resumed": ("episode_id", "policy_version"),
}
# The columns the handlers read: a third of the log schema, so decoding stays cheap.
_READ: Final = ("kind", *dict.fromkeys(name for names in _READS.values() for name in names))


def _values_of(names: tuple[str, ...]) -> Callable[[Event], tuple[Any, ...]]:
    """A function giving the values of `names` of an event, as a tuple."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        name = names[0]
        return lambda event: (getattr(event, name),)
    return lambda event: ()


_VALUES: Final = {EVENT_TYPES[kind]: _values_of(names) for kind, names in _READS.items()}


class StepMetrics:
    """The age split of every trained episode of a log, per step and for the whole run."""

    def __init__(self, *, keep_rows: bool = True) -> None:
        self.keep_rows = keep_rows  # False: run values only, memory flat in run length
        self.step = 1
        self.live_version = 0
        self.train_groups: set[str] = set()  # open train groups
        self.inflight: dict[str, int] = {}  # train episode -> dispatch version
        # id -> (v, w, reward, completion tokens: None where unknown, segments where it was
        # interrupted: `SegmentSplit.landed`)
        self.arrived: dict[str, tuple[int, int, float | None, int | None, Generated | None]] = {}
        self.members: dict[str, list[str]] = {}  # group -> its arrived train episodes
        self.segments = SegmentSplit()
        self.kept_rows: list[tuple[dict[str, Any], dict[str, Any]]] = []  # row, its split
        self.window = _Window()
        self.run = _Window()
        handlers: dict[str, Callable[..., None]] = {
            "group_opened": self.on_group_opened,
            "episode_dispatched": self.on_dispatched,
            "episode_completed": self.on_completed,
            "episode_failed": self.on_failed,
            "episodes_cancelled": self.on_cancelled,
            "version_pending": self.on_version_pending,
            "version_live": self.on_version_live,
            "episode_dropped": self.on_dropped,
            "group_scored": self.on_scored,
            "batch_shipped": self.on_shipped,
            "episode_interrupted": self.on_interrupted,
            "episode_resumed": self.segments.resumed,
        }
        self._handlers = handlers
        self._by_class = {cls: (handlers[cls.kind], values) for cls, values in _VALUES.items()}

    @property
    def rows(self) -> list[dict[str, Any]]:
        """One row a shipped batch (`STEP_COLUMNS`; then `SEGMENT_COLUMNS` where the log
        interrupted an episode)."""
        if self.segments.seen:
            return [{**row, **split} for row, split in self.kept_rows]
        return [row for row, _ in self.kept_rows]

    @classmethod
    def from_batches(cls, batches: Iterable[pa.RecordBatch]) -> StepMetrics:
        """Read a log's record batches, one column list at a time (no event objects)."""
        metrics = cls()
        metrics.read(batches)
        return metrics

    def read(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Read record batches; what was read stays counted if reading them fails."""
        handlers = self._handlers
        for batch in batches:
            columns = batch_columns(batch.select(_READ))
            reads = {kind: [columns[name] for name in names] for kind, names in _READS.items()}
            for i, kind in enumerate(columns["kind"]):
                handler = handlers.get(kind)
                if handler is not None:
                    handler(*[column[i] for column in reads[kind]])

    def observe(self, event: Event, loop: object = None) -> None:
        """Read one event; as a reaction loop's observer, as the loop appends it."""
        found = self._by_class.get(type(event))
        if found is not None:
            handler, values = found
            handler(*values(event))

    def settled(self, world_event: Event, loop: object = None) -> None:
        """Nothing to settle: the split counts events as they come (a loop observer)."""

    def run_values(self) -> dict[str, Any]:
        """The run-level values, under their metric names (`off_policy/withheld` only where
        the log withholds any, `off_policy/leftover` only where a run aborted leftovers and
        `cancelled/redundant` only where a run has one, so that every other log reads as
        before)."""
        values = self.run.values()
        if not self.run.withheld:
            del values[WITHHELD]
        if self.run.leftover:
            values[LEFTOVER] = self.run.leftover
        if not values[REDUNDANT]:
            del values[REDUNDANT]
        if self.run.masked:
            values[MASKED] = self.run.masked
        return {**values, **self.segments.run_values()}

    # --- per kind (also fed row by row by the columnar fold) ------------------------------

    def on_group_opened(self, work: str, group_id: str) -> None:
        if work == "train":
            self.train_groups.add(group_id)

    def on_dispatched(self, group_id: str, episode_id: str, version: int) -> None:
        if group_id in self.train_groups:
            self.inflight[episode_id] = version

    def on_failed(self, episode_id: str) -> None:
        self.on_completed(episode_id, None)

    def on_completed(
        self, episode_id: str, reward: float | None, completion_tokens: int | None = None
    ) -> None:
        version = self.inflight.pop(episode_id, None)
        if version is not None:  # a train episode, not late
            tokens = None if reward is None else completion_tokens  # the columnar fold: None
            segments = self.segments
            generated = segments.landed(episode_id, tokens) if segments.books else None
            self.arrived[episode_id] = (version, self.live_version, reward, tokens, generated)
            self.members.setdefault(episode_id.rpartition("/")[0], []).append(episode_id)

    def on_cancelled(self, episode_ids: Sequence[str], reason: str) -> None:
        if reason == "leftover":
            self.window.leftover += len(episode_ids)
            self.run.leftover += len(episode_ids)
        books = self.segments.books
        for episode_id in episode_ids:
            self.inflight.pop(episode_id, None)
            books.pop(episode_id, None)
        if reason == "redundant":
            for part in (self.window, self.run):
                part.redundant += len(episode_ids)

    def on_version_pending(self) -> None:
        # Counted here, once a step, rather than kept up to date on every dispatch and
        # arrival: the ages are integers, so their sums do not depend on the order.
        for version, count in Counter(self.inflight.values()).items():
            age = [_age(version, self.step)]
            self.window.dispatcher.add(age, count)
            self.run.dispatcher.add(age, count)

    def on_interrupted(self, episode_id: str, completion_tokens: int) -> None:
        version = self.inflight.get(episode_id)
        if version is not None:  # a train episode
            self.segments.interrupted(episode_id, version, completion_tokens)

    def on_version_live(self, version: int) -> None:
        self.live_version = version

    def on_dropped(self, episode_id: str, reason: str) -> None:
        self.arrived.pop(episode_id, None)
        window, run = self.window, self.run  # both count each drop: no loop over the two
        if reason == "evicted":  # a full queue's, of any age: not a stale drop
            window.evicted += 1
            run.evicted += 1
        elif reason == "leftover":  # not stale: lost with the abort
            window.leftover += 1
            run.leftover += 1
        else:
            window.dropped += 1
            run.dropped += 1
            if reason == "requeue":
                group_id = episode_id.rpartition("/")[0]
                window.requeued.add(group_id)
                run.requeued.add(group_id)
            elif reason == "withheld":
                window.withheld += 1
                run.withheld += 1

    def on_scored(self, group_id: str, episode_ids: Sequence[str], admitted: bool) -> None:
        """Members that will never train (failed, unscored, not admitted) are forgotten."""
        kept = set(episode_ids) if admitted else set()
        self.train_groups.discard(group_id)
        for episode_id in self.members.pop(group_id, ()):
            if episode_id not in kept:
                self.arrived.pop(episode_id, None)

    def on_shipped(
        self,
        t: float,
        step: int,
        episode_ids: Sequence[str],
        trained_ids: Sequence[str],
        masked_tokens: int = 0,
    ) -> None:
        window = self.window
        self.run.masked += masked_tokens or 0
        trained = set(trained_ids)
        ages: list[int] = []
        in_flight: list[int] = []
        rewards: list[float] = []
        segments = self.segments
        for episode_id in episode_ids:
            found = self.arrived.pop(episode_id, None)
            if found is None or episode_id not in trained:
                continue
            version, live, reward, tokens, generated = found
            segments.trained(version, tokens, generated, step)
            age = _age(version, step)
            ages.append(age)
            in_flight.append(age_split(age, version, live)[0])
            if reward is not None:
                rewards.append(reward)
        in_queue = [age - part for age, part in zip(ages, in_flight, strict=True)]
        for part in (window, self.run):
            part.age.add(ages)
            part.in_flight.add(in_flight)
            part.in_queue.add(in_queue)
            part.reward.add(rewards)
        split = segments.shipped()
        if self.keep_rows:
            self.kept_rows.append(
                (
                    {
                        "step": step,
                        "time": t,
                        "trained": len(trained),
                        **window.values(),
                        LEFTOVER: window.leftover,
                        "reward/mean": window.reward.mean(),
                    },
                    split,
                )
            )
        self.step, self.window = step + 1, _Window()


def run_age_split(source: LogSource) -> dict[str, Any]:
    """The run-level age split (`off_policy/*`, `dispatcher/off_policy/*`) of what could
    be read of the log; the replay beside it reports where the log stops."""
    metrics = StepMetrics()
    with contextlib.suppress(EventError, LogError):
        metrics.read(source.batches())
    return metrics.run_values()


def with_waits(
    rows: list[dict[str, Any]], batches: Iterable[pa.RecordBatch]
) -> list[dict[str, Any]]:
    """`rows` with each step's trainer wait and its causes after their columns
    (`WAIT_COLUMNS`, `replay.explain`): null for a batch the trainer had not started when
    the log ends, and throughout where the log cannot be explained (no readable config)."""
    try:
        found = explain_columns(iter_batch_columns(batches)).steps
    except (ExplainError, EventError, LogError):
        found = []
    waits = {wait.step: wait.columns() for wait in found}
    empty = dict.fromkeys(WAIT_COLUMNS)
    return [{**row, **waits.get(row["step"], empty)} for row in rows]
