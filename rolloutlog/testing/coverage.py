"""Which hard cases a log reaches: measured over generated logs, with a floor for each.

A generator that never reaches a case proves nothing about it. `features(log)` names the
cases one log contains; `coverage_table` prints how often each occurs over many logs, and
`FLOORS` are the fractions the suite requires (tests/core/test_generator_coverage.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.events.types import Event

# Each case: what it is, and the fraction of generated logs that must contain it.
FLOORS: Final[dict[str, tuple[str, float]]] = {
    "pending_mixed": ("a version goes pending while a group has stale and fresh in flight", 0.15),
    "partial_after_stale": ("a partial group is scored after a stale cancellation", 0.05),
    "duplicate_arrival": ("a second completion or failure of one episode", 0.05),
    "arrival_after_finish": ("a completion or failure after run_finished", 0.05),
    "late_failure": ("a failure of an episode already cancelled", 0.05),
    "delayed_live": ("another world event between version_pending and its version_live", 0.05),
    "admission_smoothing": ("admission smoothing is on", 0.05),
    "requeue": ("a group discarded for requeue, its task opened again as a new group", 0.10),
    "verl_carry": ("a verl sync window restarts counting train groups open or queued", 0.02),
    "ship_wait": ("a full batch waited for work at its last chance (tinker-822)", 0.005),
    "withheld": ("a stale member scored with its group, then withheld from the batch", 0.05),
    "run_on": ("a stale group run to its end, then dropped at finalize (verl-drop)", 0.01),
    "eviction": ("a full queue evicts its oldest episodes for an admitted group", 0.05),
    "leftover_abort": ("a full batch aborts a group still in flight (slime's leftovers)", 0.05),
    "redundant": ("a group's G-th arrival cancels its members past G (redundant)", 0.10),
    "interrupted": ("a weight update interrupts an episode in flight (interrupt)", 0.05),
    "resumed": ("an interrupted episode is resumed, then completes", 0.05),
    "recycled": ("a shipped batch recycles an episode in flight (recycle)", 0.03),
    "masked": ("a shipped batch trains tokens past the bound masked (stale_tokens = mask)", 0.01),
}
# Measured and printed, without a floor.
REPORTED: Final[dict[str, str]] = {
    "shipped_batch": "at least one batch shipped",
    "several_batches": "three or more batches shipped",
    "stale_cancel": "a stale cancellation",
    "stale_drop": "an arrived or queued episode dropped as stale",
    "restart": "a driver resumed the run (run_resumed; opt-in: `world_logs(restarts=True)`)",
}


def features(log: Sequence[Event]) -> set[str]:
    """The cases of `FLOORS` and `REPORTED` that `log` contains."""
    seen = _Seen()
    for event in log:
        e: Any = event
        kind = event.kind
        if seen.live_owed is not None and kind != "version_live" and kind in _WORLD:
            seen.found.add("delayed_live")
        step = _STEPS.get(kind)
        if step is not None:
            step(seen, e)
    found = seen.found
    if seen.config.get("ship_wait") == "last-chance" and _waited(log):
        found.add("ship_wait")
    if seen.batches >= 1:
        found.add("shipped_batch")
    if seen.batches >= 3:
        found.add("several_batches")
    return found


class _Seen:
    """What `features` has read of a log so far, one method per event kind it reads."""

    def __init__(self) -> None:
        self.found: set[str] = set()
        self.config: dict[str, Any] = {}
        self.step, self.batches = 1, 0
        # group -> (ages: train, not frozen; in flight: episode id -> version)
        self.groups: dict[str, tuple[bool, dict[str, int]]] = {}
        self.stale_cancelled: set[str] = set()
        self.arrived: set[str] = set()
        self.cancelled: set[str] = set()
        self.finished = False
        self.live_owed: int | None = None
        self.requeue_owed = False
        self.outstanding: set[str] = set()  # train groups opened, not yet scored
        self.queued: set[str] = set()  # admitted episodes not yet shipped or dropped
        self.resumed: set[str] = set()  # episodes resumed, not yet arrived

    def run_started(self, e: Any) -> None:
        self.config = e.config
        if self.config.get("admission_smoothing"):
            self.found.add("admission_smoothing")

    def group_opened(self, e: Any) -> None:
        self.groups[e.group_id] = (e.work == "train" and not e.frozen, {})
        if self.requeue_owed and e.work == "train":
            self.found.add("requeue")
        if e.work == "train":
            self.outstanding.add(e.group_id)

    def episode_dispatched(self, e: Any) -> None:
        self.groups[e.group_id][1][e.episode_id] = e.policy_version

    def arrival(self, e: Any) -> None:
        episode_id, found = e.episode_id, self.found
        if episode_id in self.arrived:
            found.add("duplicate_arrival")
        if self.finished:
            found.add("arrival_after_finish")
        if e.kind == "episode_failed" and episode_id in self.cancelled:
            found.add("late_failure")
        if e.kind == "episode_completed" and episode_id in self.resumed:
            found.add("resumed")
        group = self.groups.get(episode_id.rpartition("/")[0])
        if group is not None and group[1].pop(episode_id, None) is not None:
            self.arrived.add(episode_id)

    def episodes_cancelled(self, e: Any) -> None:
        self.cancelled.update(e.episode_ids)
        for episode_id in e.episode_ids:
            self.groups[e.group_id][1].pop(episode_id, None)
        if e.reason == "stale":
            self.stale_cancelled.add(e.group_id)
            self.found.add("stale_cancel")
        if e.reason == "leftover" and e.episode_ids:
            self.found.add("leftover_abort")
        elif e.reason == "redundant":
            self.found.add("redundant")

    def version_pending(self, e: Any) -> None:
        self.live_owed = e.version
        if _mixed(self.groups, self.step, self.config.get("max_off_policy_steps", 0)):
            self.found.add("pending_mixed")
        if self.config.get("admission") == "verl" and (self.outstanding or self.queued):
            self.found.add("verl_carry")

    def version_live(self, e: Any) -> None:
        self.live_owed = None

    def group_scored(self, e: Any) -> None:
        self.outstanding.discard(e.group_id)
        self.queued.update(e.episode_ids if e.admitted else ())
        if e.group_id in self.stale_cancelled and e.episode_ids:
            self.found.add("partial_after_stale")

    def episode_dropped(self, e: Any) -> None:
        found = self.found
        found.add("eviction" if e.reason == "evicted" else "stale_drop")
        self.queued.discard(e.episode_id)
        self.requeue_owed = self.requeue_owed or e.reason == "requeue"
        if e.reason == "withheld":
            found.add("withheld")
        run_on = self.config.get("stale_member") == "run-on"
        if run_on and e.reason == "stale" and e.episode_id.rpartition("/")[0] in self.outstanding:
            found.add("run_on")

    def episode_interrupted(self, e: Any) -> None:
        self.found.add("recycled" if e.reason == "recycle" else "interrupted")

    def episode_resumed(self, e: Any) -> None:
        self.resumed.add(e.episode_id)

    def batch_shipped(self, e: Any) -> None:
        self.step, self.batches = e.step + 1, self.batches + 1
        self.queued.difference_update(e.episode_ids)
        if e.masked_tokens:
            self.found.add("masked")

    def run_finished(self, e: Any) -> None:
        self.finished = True

    def run_resumed(self, e: Any) -> None:
        self.found.add("restart")


_STEPS: Final[dict[str, Callable[[_Seen, Any], None]]] = {
    "run_started": _Seen.run_started,
    "group_opened": _Seen.group_opened,
    "episode_dispatched": _Seen.episode_dispatched,
    "episode_completed": _Seen.arrival,
    "episode_failed": _Seen.arrival,
    "episodes_cancelled": _Seen.episodes_cancelled,
    "version_pending": _Seen.version_pending,
    "version_live": _Seen.version_live,
    "group_scored": _Seen.group_scored,
    "episode_dropped": _Seen.episode_dropped,
    "episode_interrupted": _Seen.episode_interrupted,
    "episode_resumed": _Seen.episode_resumed,
    "batch_shipped": _Seen.batch_shipped,
    "run_finished": _Seen.run_finished,
    "run_resumed": _Seen.run_resumed,
}

_WORLD: Final = frozenset(
    {
        "episode_completed",
        "episode_failed",
        "limit_set",
        "overload_cut",
        "run_finished",
        "run_resumed",
    }
)


def _mixed(groups: dict[str, tuple[bool, dict[str, int]]], step: int, bound: int) -> bool:
    """Some live train group has in-flight members both past the bound and within it."""
    for live_train, inflight in groups.values():
        ages = [(step - 1) - version for version in inflight.values()]
        if live_train and any(a > bound for a in ages) and any(a <= bound for a in ages):
            return True
    return False


def _waited(log: Sequence[Event]) -> bool:
    """The account's own watch (`core.account.ship_wait`) counted a wait in `log`."""
    first: Any = log[0]
    account = Account(RunConfig.from_mapping(first.config, startable=False))
    account.raise_on_violation = False
    for event in log:
        account.feed(event)
    return account.run.ship_waits > 0


def fractions(logs: Iterable[Sequence[Event]]) -> tuple[int, dict[str, float]]:
    """How many logs, and the fraction of them that contain each case."""
    counts = dict.fromkeys([*FLOORS, *REPORTED], 0)
    total = 0
    for log in logs:
        total += 1
        for name in features(log):
            counts[name] += 1
    return total, {name: count / max(1, total) for name, count in counts.items()}


def coverage_table(total: int, measured: dict[str, float]) -> str:
    """A plain-text table: each case, its fraction, and its floor where it has one."""
    lines = [f"{'case':<22} {'logs':>7} {'floor':>6}  what", "-" * 78]
    for name, fraction in measured.items():
        floor = f"{FLOORS[name][1]:.0%}" if name in FLOORS else ""
        what = FLOORS[name][0] if name in FLOORS else REPORTED[name]
        lines.append(f"{name:<22} {fraction:>7.1%} {floor:>6}  {what}")
    lines.append(f"over {total} generated logs")
    return "\n".join(lines)
