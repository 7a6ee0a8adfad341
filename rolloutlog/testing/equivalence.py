"""The equivalence harness: run two implementations on the same log, name the first difference.

An implementation is anything that turns a log into a `Trace`: the events it appended
(or recorded), its digest chain and its run summary. Three kinds come ready-made:
- `decided_by(sink, dispatcher)` re-decides the log's world events with a pair of
  deciders (today's, a reference, a candidate; `configure` may change the config, as the
  per-group vs per-episode comparison does);
- `PLAIN_FOLD` and `COLUMNAR_FOLD` fold the recorded log, on the plain and the columnar path.
`first_difference(log, reference, candidate)` compares what `aspects` name, in seq order,
and returns the first difference, or None. `assert_equivalent` raises it. Random logs
come from `strategies.world_logs()` and `strategies.equivalence_logs()`, so that a future
change is checked against the previous implementation the way this project checks its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.digest import event_payload
from rolloutlog.core.loop import DISPATCHER, SINK, Decider, ReactionLoop
from rolloutlog.core.redecide import redecide
from rolloutlog.core.sink import SinkState
from rolloutlog.core.state import DispatcherState
from rolloutlog.events.types import WORLD_KINDS, Event, RunStarted
from rolloutlog.replay.chain import DigestChain
from rolloutlog.replay.chain import first_difference as first_digest_difference
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from rolloutlog.testing.reference import reference_log


@attrs.frozen
class Trace:
    """What one implementation made of a log."""

    events: tuple[Event, ...]  # appended by the deciders, or the recorded log for a fold
    digests: DigestChain
    summary: dict[str, Any] | None  # the replay summary (folds only)
    error: str | None  # why it stopped early, naming the seq
    path: str  # how it was made: "decided", "columnar", or "plain" (with the hand-over)


Implementation = Callable[[Sequence[Event]], Trace]

# What can be compared. The observations are what the equivalence property (docs/contract.md) names:
# batches (every `batch_shipped`), curriculum calls (every `group_scored` of a train group
# with scored members: what the curriculum saw and answered) and drops (every
# `episode_dropped` and cancellation, and their counts). `events` and `digests` compare
# everything; `summary` compares the replay summaries.
ASPECTS: Final = ("batches", "curriculum", "drops", "events", "digests", "summary", "error")
OBSERVATIONS: Final = ("batches", "curriculum", "drops")
EVERYTHING: Final = ("events", "digests", "summary", "error")


@attrs.frozen
class Difference:
    """The first place two traces differ: which aspect, at which seq, and both sides."""

    aspect: str
    seq: int | None  # in the reference's log; None for whole-run aspects (summary, error)
    reference: Any
    candidate: Any

    def __str__(self) -> str:
        where = "at the end" if self.seq is None else f"at seq {self.seq}"
        return (
            f"{self.aspect} differ {where}:\n  reference: {self.reference!r}\n"
            f"  candidate: {self.candidate!r}"
        )


class EquivalenceError(AssertionError):
    """Two implementations disagree on a log; the message is the first `Difference`."""


def decided_by(
    sink: Decider[SinkState] = SINK,
    dispatcher: Decider[DispatcherState] = DISPATCHER,
    *,
    configure: Callable[[RunConfig], RunConfig] | None = None,
) -> Implementation:
    """Re-decide a log's world events with these deciders (and optionally another config)."""

    def run(log: Sequence[Event]) -> Trace:
        world = [event for event in log if event.kind in WORLD_KINDS]
        if not world or not isinstance(world[0], RunStarted):
            return Trace((), DigestChain(), None, "the log opens without run_started", "decided")
        config = RunConfig.from_mapping(world[0].config)
        if configure is not None:
            config = configure(config)
            world[0] = attrs.evolve(world[0], config=config.to_dict())
        chain = _DigestRecorder()
        loop = ReactionLoop(config, sink=sink, dispatcher=dispatcher, observers=(chain,))
        unsequenced = (attrs.evolve(event, seq=-1) for event in world)
        events: list[Event] = []
        try:
            for _, event in redecide(unsequenced, start=lambda _: loop, recorded_decisions=False):
                if event is not None:
                    events.append(event)
        except Exception as error:  # a candidate may fail in any way: that is a difference
            failure = f"{type(error).__name__}: {error}"
            return Trace(tuple(events), chain.digests, None, failure, "decided")
        return Trace(tuple(events), chain.digests, None, None, "decided")

    return run


class _DigestRecorder:
    """A loop observer that keeps the digest after every appended event."""

    def __init__(self) -> None:
        self.digests = DigestChain()

    def observe(self, event: Event, loop: ReactionLoop) -> None:
        if loop.digest is None:
            raise ValueError("the digest recorder needs a loop that keeps its digest")
        self.digests.append(loop.digest)

    def settled(self, world_event: Event, loop: ReactionLoop) -> None:
        """Nothing to do once a world event settles."""


def folded_by(*, columnar: bool, batch_events: int = 61) -> Implementation:
    """Fold the recorded log as `replay` does, on the columnar or the plain path only.

    The log is cut into record batches of `batch_events` (a small prime by default), so
    that even short random logs cross batch boundaries anywhere.
    """

    def run(log: Sequence[Event]) -> Trace:
        source = MemoryLog(log, batch_events=batch_events)
        replay = replay_log(source, keep_digests=True, columnar=columnar)
        digests = replay.digests if replay.digests is not None else DigestChain()
        error = None if replay.error is None else str(replay.error)
        path = replay.path if replay.handover is None else f"plain ({replay.handover})"
        return Trace(tuple(log), digests, replay.summary, error, path)

    return run


def _reference_model(log: Sequence[Event]) -> Trace:
    """Re-decide the log's world events with the naive reference model (no digests)."""
    try:
        events = reference_log(attrs.evolve(event, seq=-1) for event in log)
    except Exception as error:  # the reference failing is a difference like any other
        return Trace((), DigestChain(), None, f"{type(error).__name__}: {error}", "reference")
    return Trace(tuple(events), DigestChain(), None, None, "reference")


PLAIN_FOLD: Final = folded_by(columnar=False)
COLUMNAR_FOLD: Final = folded_by(columnar=True)
TODAYS_DECIDERS: Final = decided_by()
REFERENCE_MODEL: Final[Implementation] = _reference_model


def first_difference(
    log: Sequence[Event],
    reference: Implementation,
    candidate: Implementation,
    aspects: Sequence[str] = EVERYTHING,
) -> Difference | None:
    """Run both implementations on `log`; the earliest difference in `aspects`, or None."""
    return compare_traces(reference(log), candidate(log), aspects)


def assert_equivalent(
    log: Sequence[Event],
    reference: Implementation,
    candidate: Implementation,
    aspects: Sequence[str] = EVERYTHING,
) -> None:
    """Raise `EquivalenceError` naming the first difference, if there is one."""
    difference = first_difference(log, reference, candidate, aspects)
    if difference is not None:
        raise EquivalenceError(str(difference))


def compare_traces(
    reference: Trace, candidate: Trace, aspects: Sequence[str] = EVERYTHING
) -> Difference | None:
    """The difference with the lowest seq among `aspects` (observations before digests)."""
    unknown = [aspect for aspect in aspects if aspect not in ASPECTS]
    if unknown:
        raise ValueError(f"unknown aspect {unknown[0]!r}; known: {', '.join(ASPECTS)}")
    found = [d for d in (_COMPARE[a](reference, candidate) for a in aspects) if d is not None]
    if not found:
        return None
    return min(found, key=lambda d: (d.seq is None, d.seq or 0, ASPECTS.index(d.aspect)))


def _observed(events: Sequence[Event], aspect: str) -> list[tuple[int, dict[str, Any]]]:
    """The observations of one kind, each as (seq, payload without its seq)."""
    keep = _OBSERVED[aspect]
    return [
        (event.seq, {k: v for k, v in event_payload(event).items() if k != "seq"})
        for event in events
        if keep(event)
    ]


_OBSERVED: Final[dict[str, Callable[[Event], bool]]] = {
    "batches": lambda e: e.kind == "batch_shipped",
    "curriculum": lambda e: e.kind == "group_scored" and bool(e.advantages),  # type: ignore[union-attr]
    "drops": lambda e: e.kind in ("episode_dropped", "episodes_cancelled"),
}


def _compare_observations(aspect: str) -> Callable[[Trace, Trace], Difference | None]:
    def compare(reference: Trace, candidate: Trace) -> Difference | None:
        ours, theirs = _observed(reference.events, aspect), _observed(candidate.events, aspect)
        for index in range(max(len(ours), len(theirs))):
            a = ours[index] if index < len(ours) else None
            b = theirs[index] if index < len(theirs) else None
            if a is None or b is None or a[1] != b[1]:
                seq = (a or b or (0, {}))[0]
                return Difference(aspect, seq, a and a[1], b and b[1])
        return None

    return compare


def _compare_events(reference: Trace, candidate: Trace) -> Difference | None:
    ours, theirs = reference.events, candidate.events
    for index in range(max(len(ours), len(theirs))):
        a = ours[index] if index < len(ours) else None
        b = theirs[index] if index < len(theirs) else None
        if a != b:
            return Difference("events", index, a, b)
    return None


def _compare_digests(reference: Trace, candidate: Trace) -> Difference | None:
    index = first_digest_difference(reference.digests, candidate.digests)
    if index is None:
        return None
    ours, theirs = _hex(reference.digests, index), _hex(candidate.digests, index)
    return Difference("digests", index, ours, theirs)


def _hex(chain: DigestChain, index: int) -> str | None:
    return chain[index].hex() if index < len(chain) else None


def _compare_summary(reference: Trace, candidate: Trace) -> Difference | None:
    ours, theirs = reference.summary or {}, candidate.summary or {}
    for key in dict.fromkeys([*ours, *theirs]):
        if ours.get(key) != theirs.get(key):
            return Difference("summary", None, {key: ours.get(key)}, {key: theirs.get(key)})
    return None


def _compare_error(reference: Trace, candidate: Trace) -> Difference | None:
    if reference.error == candidate.error:
        return None
    return Difference("error", None, reference.error, candidate.error)


_COMPARE: Final[dict[str, Callable[[Trace, Trace], Difference | None]]] = {
    **{aspect: _compare_observations(aspect) for aspect in OBSERVATIONS},
    "events": _compare_events,
    "digests": _compare_digests,
    "summary": _compare_summary,
    "error": _compare_error,
}
