"""When things happened in a prime-rl run, from what its folder gives.

The records give each group's dispatch version exactly (`run.work.policy.start`) and the
environment's start and end of each run; `metrics.jsonl` the orchestrator's row per shipped
step (just after the ship) and, in a default launch, the trainer's rows; the trainer's
`broadcasts/step_N/STABLE` marks when version N was published. `Times` puts them on one
clock so that they agree: version v goes pending at its publish time, no earlier than
batch v shipped, after every group that sampled an older version opened and before any
that sampled v or later; a group opens no earlier than its version went pending. What
had to move to agree is counted (`moved_s`), not hidden.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from rolloutlog.importers.prime_rl_records import Arrival
from rolloutlog.importers.prime_rl_reports import Metrics

EPSILON_S = 1e-6  # a version goes pending strictly after the last group of the one before


@attrs.define
class Group:
    """One prime-rl group: its arrivals (by the environment's start) and when it opened."""

    id: str
    members: list[Arrival]
    version: int | None  # None: frozen, or eval without a policy span
    size: int
    env: str
    task: str
    work: str = "train"
    frozen: bool = False
    opened: float = 0.0
    inflight_unarrived: int = 0  # members dispatched that never arrived (the log's counts)

    @classmethod
    def of(cls, members: list[Arrival], size: int) -> Group:
        first = members[0]
        versions = {a.version for a in members}
        version = first.version if len(versions) == 1 else min(v or 0 for v in versions)
        return cls(
            first.group_id,
            members,
            version,
            max(size, len(members)),
            first.env,
            first.task,
            first.work,
            first.frozen,
            opened=first.t0,
        )

    @property
    def last_arrival(self) -> float:
        return max((a.t1 for a in self.members), default=self.opened)


@attrs.define
class Times:
    """Ship and publish times (epoch seconds), and how far reconciling them moved things."""

    ships: dict[int, float]  # step -> batch_shipped
    pending: dict[int, float]  # version -> version_pending (and live)
    source: str  # where the publish times came from
    moved_s: float = 0.0  # seconds that group openings and publish times moved to agree


def group_versions(groups: Iterable[Group]) -> dict[int, list[Group]]:
    by_version: dict[int, list[Group]] = {}
    for group in groups:
        if group.version is not None and group.work == "train":
            by_version.setdefault(group.version, []).append(group)
    return by_version


def reconcile(
    groups: list[Group],
    trained: dict[int, list[str]],
    metrics: Metrics,
    marks: dict[int, float],
    origin: float,
    stale: list[tuple[int, int]],
) -> Times:
    """Ship times from the orchestrator's rows, or the trainer's receipt of the batch where
    that is earlier (the row is written after the ship's I/O), no earlier than the trained
    groups ended; publish times from STABLE marks, else the trainer's rows, else the ship."""
    ends = {a.episode_id: g.last_arrival for g in groups for a in g.members}
    source = "STABLE marks" if marks else "the trainer's rows" if metrics.trained_by_trainer else ""
    raw = marks or metrics.trained_by_trainer
    times = Times({}, {}, source or "none: each version at its batch's ship (assumed)")
    by_version = group_versions(groups)
    shipped = previous = origin
    for step in range(1, max(trained.keys() | metrics.ships.keys(), default=0) + 1):
        finished = [ends[e] for e in trained.get(step, ()) if e in ends]
        row = metrics.ships.get(step)
        if row is None:  # no row: no earlier than the version before went pending (the gate)
            row = times.pending.get(step - 1, origin)
        shipped = times.ships[step] = max(
            [shipped, min(row, metrics.received.get(step, row)), *finished]
        )
        before = [g.opened for v, gs in by_version.items() if v < step for g in gs]
        after = [g.opened for v, gs in by_version.items() if v >= step for g in gs]
        low = max([shipped, previous, *(t + EPSILON_S for t in before)])
        wanted = raw.get(step, shipped)
        at = max(low, min([wanted, *after])) if after else max(low, wanted)
        times.moved_s += abs(at - wanted)
        times.pending[step] = previous = at
    _ship_before_stale_cancels(times, stale, ends, trained)
    for version, members in by_version.items():
        start = times.pending.get(version, origin) if version else origin
        for group in members:
            times.moved_s += max(0.0, start - group.opened)
            group.opened = max(group.opened, start)
    return times


def _ship_before_stale_cancels(
    times: Times,
    stale: list[tuple[int, int]],
    ends: dict[str, float],
    trained: dict[int, list[str]],
) -> None:
    """A group of version k cancelled as stale at version v's pending proves that batch
    k + bound + 1 had shipped by then (`stale`: (that batch, v)). The orchestrator's row
    is written after its ship's I/O, so it can come later: the ship moves to just before
    the pending, no earlier than its trained groups ended (else the pending moves)."""
    for step, version in sorted(stale):
        at = times.pending.get(version)
        shipped = times.ships.get(step)
        if at is None or shipped is None or shipped < at:
            continue
        floor = max([times.ships.get(step - 1, 0.0), *(ends[e] for e in trained.get(step, ()))])
        moved = max(floor, at - EPSILON_S)
        times.moved_s += shipped - moved
        times.ships[step] = moved
        if moved >= at:
            times.pending[version] = moved + EPSILON_S
            times.moved_s += moved + EPSILON_S - at


def step_at(times: Times, t: float) -> int:
    """prime-rl's progress step at `t`: the batch being collected."""
    return 1 + sum(1 for shipped in times.ships.values() if shipped <= t)
