"""What a prime-rl run reported besides its records: metrics rows, log lines, publish marks.

prime-rl 559b447's orchestrator writes one row per shipped step to `metrics.jsonl`; in a
default launch its trainer writes its own rows (timings, losses) to the same file, with the
same `step`: the two are told apart by their keys. Its log (`orchestrator.log` in the latest
attempt's folder under `logs`) counts what no record shows: stale cancellations
(WARNING `Cancelled N train episodes past ...`, and at DEBUG one line per dropped group
with its in-flight/unscheduled split), queued traces swept as stale (`Dropped N queued
traces ...`), the drain at `max_steps` (`cancelled N in-flight train episode(s)`) and
batches whose every sample was pruned (`Step N: empty train batch`). The trainer marks
each published version with `broadcasts/step_N/STABLE`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import attrs

from rolloutlog.importers.errors import ForeignRunError, field, read_jsonl

# keys only prime-rl's orchestrator writes in its per-step row / only its trainer writes
ORCHESTRATOR_KEYS: Final = ("off_policy/dropped", "progress/rollouts", "time/wait_for_policy")
TRAINER_KEYS: Final = ("time/forward_backward", "time/broadcast_weights", "time/wait_for_batch")
_ANSI: Final = re.compile(r"\x1b\[[0-9;]*m")
_STALE: Final = re.compile(r"Cancelled (\d+) train episodes past max_off_policy_steps")
_SWEPT: Final = re.compile(r"Dropped (\d+) queued traces past max_off_policy_steps")
_DRAIN: Final = re.compile(r"draining pipeline \(cancelled (\d+) in-flight train episode")
_EMPTY: Final = re.compile(r"Step (\d+): empty train batch")
_UPDATE: Final = re.compile(r"Updating policy in-flight to v(\d+)")
_DROP: Final = re.compile(
    r"drop train \| group=([0-9a-f]{8}) env=(\S+) reason=(\w+) \| cancelled=\d+ "
    r"\(inflight=(\d+) unscheduled=(\d+)\)"
)


@attrs.frozen
class Metrics:
    """`metrics.jsonl` by step: the orchestrator's row (its time, about the ship) and the
    trainer's rows (the last one's time, after it published the step's version)."""

    ships: dict[int, float]  # step -> the orchestrator row's time
    dropped: dict[int, int]  # step -> off_policy/dropped: queued traces swept since the last
    off_policy: dict[int, float]  # step -> off_policy/mean of the trained cohort
    trained_by_trainer: dict[int, float]  # step -> the trainer's last row's time
    received: dict[int, float]  # step -> when the trainer got the batch: its timing row's
    # time less (time/step - time/wait_for_batch)
    other_rows: int  # rows of neither (counted, not used)


@attrs.frozen
class GroupDrop:
    """One DEBUG `drop train` line: a group prime-rl cancelled, by its id's first 8 digits."""

    prefix: str
    env: str
    reason: str
    inflight: int
    unscheduled: int
    version: int | None  # the version whose pending cancelled it (the next update line)


@attrs.frozen
class LogCounts:
    """What the orchestrator's log counted; `path` None: no log in the folder."""

    path: Path | None
    stale_cancelled: int  # WARNING lines' sum
    swept: int  # WARNING lines' sum, before the drain (after it, the run is over)
    swept_in_drain: int  # the same lines after the drain's
    drained: int | None  # the drain's in-flight cancellations; None: no drain line
    empty_batches: dict[int, int]  # step -> batches cut, all pruned, not shipped
    group_drops: list[GroupDrop]  # the DEBUG lines, in order
    debug: bool  # the log has DEBUG lines: every dropped group is named


def read_metrics(path: Path) -> Metrics:
    ships: dict[int, float] = {}
    dropped: dict[int, int] = {}
    off_policy: dict[int, float] = {}
    trainer: dict[int, float] = {}
    received: dict[int, float] = {}
    other = 0
    rows = read_jsonl(path) if path.is_file() else iter(())
    for line, row in rows:
        where = f"{path}: line {line}"
        step, t = field(row, "step", int, where), field(row, "time", float, where)
        if any(key in row for key in ORCHESTRATOR_KEYS):
            ships[step] = t
            dropped[step] = int(_number(row, "off_policy/dropped", where))
            if "off_policy/mean" in row:
                off_policy[step] = _number(row, "off_policy/mean", where)
        elif any(key in row for key in TRAINER_KEYS):
            trainer[step] = max(t, trainer.get(step, t))
            if "time/step" in row and "time/wait_for_batch" in row:
                busy = _number(row, "time/step", where) - _number(row, "time/wait_for_batch", where)
                received[step] = t - busy
        else:
            other += 1
    return Metrics(ships, dropped, off_policy, trainer, received, other)


def _number(row: dict[str, Any], key: str, where: str) -> float:
    return field(row, key, float, where) if key in row else 0.0


def published(root: Path) -> dict[int, float]:
    """Version -> the mtime of `broadcasts/step_N/STABLE` (those still there)."""
    found = {}
    for marker in (root / "broadcasts").glob("step_*/STABLE"):
        match = re.fullmatch(r"step_(\d+)", marker.parent.name)
        if match:
            found[int(match.group(1))] = marker.stat().st_mtime
    return found


def orchestrator_log(root: Path) -> Path | None:
    logs = root / "logs"
    latest = logs / "latest" / "orchestrator.log"
    if latest.is_file():
        return latest
    attempts = sorted(
        (int(p.parent.name.removeprefix("attempt_")), p)
        for p in logs.glob("attempt_*/orchestrator.log")
        if p.parent.name.removeprefix("attempt_").isdigit()
    )
    return attempts[-1][1] if attempts else None


def read_log_counts(root: Path) -> LogCounts:
    path = orchestrator_log(root)
    if path is None:
        return LogCounts(None, 0, 0, 0, None, {}, [], debug=False)
    try:
        text = _ANSI.sub("", path.read_text(encoding="utf-8", errors="replace"))
    except OSError as error:
        raise ForeignRunError(f"{path}: not readable ({error})") from error
    drained = [int(n) for n in _DRAIN.findall(text)]
    drain = _DRAIN.search(text)
    before, after = (text, "") if drain is None else (text[: drain.start()], text[drain.start() :])
    empty: dict[int, int] = {}
    for step in _EMPTY.findall(text):
        empty[int(step)] = empty.get(int(step), 0) + 1
    return LogCounts(
        path,
        stale_cancelled=sum(int(n) for n in _STALE.findall(text)),
        swept=sum(int(n) for n in _SWEPT.findall(before)),
        swept_in_drain=sum(int(n) for n in _SWEPT.findall(after)),
        drained=drained[-1] if drained else None,
        empty_batches=empty,
        group_drops=_group_drops(text),
        debug=" DEBUG " in text,
    )


def _group_drops(text: str) -> list[GroupDrop]:
    """The DEBUG drop lines, each with the version whose `on_version_pending` dropped it:
    the watcher logs `Updating policy in-flight to vN` right after its observers ran."""
    drops: list[GroupDrop] = []
    waiting: list[tuple[str, ...]] = []
    for line in text.splitlines():
        found = _DROP.search(line)
        if found:
            waiting.append(found.groups())
            continue
        update = _UPDATE.search(line)
        if update is None:
            continue
        for prefix, env, reason, inflight, unscheduled in waiting:
            version = int(update.group(1))
            drops.append(GroupDrop(prefix, env, reason, int(inflight), int(unscheduled), version))
        waiting = []
    drops += [GroupDrop(p, e, r, int(i), int(u), None) for p, e, r, i, u in waiting]
    return drops
