"""What a prime-rl run's files say, record by record: arrivals, trained cohorts, step times.

The records are verifiers Episodes as `Episode.to_record()` writes them (prime-rl 559b447
pins verifiers main at a60a606; 0.4.0 writes the same fields the import reads, and more).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs

from rolloutlog.importers.errors import ForeignRunError, field, read_jsonl

T = TypeVar("T", dict[str, Any], list[Any])
_STEP_DIR: Final = re.compile(r"step_(\d+)$")


@attrs.frozen
class Arrival:
    """One arrived episode: when its environment started and finished, and its outcome."""

    t0: float  # the environment's start (epoch seconds)
    t1: float  # its last span's end
    episode_id: str
    group_id: str
    env: str
    task: str
    work: str
    frozen: bool  # sampled from a frozen policy: `run.work.policy` is None
    version: int | None  # `run.work.policy.start`: the group's dispatch version (None: frozen)
    reward: float | None  # None: failed
    error: str
    prompt_tokens: int
    completion_tokens: int


@attrs.frozen
class _Record:
    where: str
    record: dict[str, Any]
    work: str


def read_arrivals(root: Path) -> list[Arrival]:
    """Every arrival, train and eval, ordered by the environment's start.

    An episode that failed before any trace was produced has no times: it is placed at the
    arrival before it in its file (the files are in arrival order), and dispatched when
    its group's first member started."""
    placed: list[tuple[_Record, float | None, float | None]] = []
    for work in ("train", "eval"):
        for path in step_files(root, work, "all"):
            previous: float | None = None
            for line, record in read_jsonl(path):
                entry = _Record(f"{path}: line {line}", record, work)
                t0, t1 = _times(entry)
                placed.append((entry, t0, t1 if t1 is not None else previous))
                previous = t1 if t1 is not None else previous
    _refuse_repeats(placed)
    first: dict[str, float] = {}
    for entry, t0, _ in placed:
        if t0 is not None:
            group = _group_id(entry)
            first[group] = min(first.get(group, t0), t0)
    arrivals = [_arrival(entry, t0, t1, first) for entry, t0, t1 in placed]
    return sorted(arrivals, key=lambda a: (a.t0, a.episode_id))


def _refuse_repeats(placed: list[tuple[_Record, float | None, float | None]]) -> None:
    """Each episode id once: a second record of it could be mapped to neither."""
    seen: dict[str, str] = {}
    for entry, _, _ in placed:
        episode_id = field(entry.record, "id", str, entry.where)
        if episode_id in seen:
            raise ForeignRunError(f"{entry.where}: id: {episode_id} is also at {seen[episode_id]}")
        seen[episode_id] = entry.where


def step_files(root: Path, work: str, cohort: str) -> list[Path]:
    """`rollouts/step_N/WORK/COHORT/traces.jsonl`, by N."""
    found = []
    for step_dir in (root / "rollouts").glob("step_*"):
        match = _STEP_DIR.search(step_dir.name)
        path = step_dir / work / cohort / "traces.jsonl"
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def read_trained(root: Path) -> dict[int, tuple[Path, list[str]]]:
    """Step N -> (its `train/effective/traces.jsonl`, the ids trained in batch N)."""
    trained = {}
    for path in step_files(root, "train", "effective"):
        match = _STEP_DIR.search(path.parents[2].name)
        if match is None:
            continue
        ids = [field(r, "id", str, f"{path}: line {n}") for n, r in read_jsonl(path)]
        trained[int(match.group(1))] = (path, ids)
    return trained


def read_step_times(path: Path) -> dict[int, float]:
    """Step -> the epoch time its `metrics.jsonl` row was written (about when it shipped)."""
    if not path.is_file():
        return {}
    times = {}
    for line, row in read_jsonl(path):
        where = f"{path}: line {line}"
        times[field(row, "step", int, where)] = field(row, "time", float, where)
    return times


def _group_id(entry: _Record) -> str:
    return field(field(entry.record, "group", dict, entry.where), "id", str, entry.where)


def _times(entry: _Record) -> tuple[float | None, float | None]:
    """The environment's start and last span end over the episode's traces (None: no trace)."""
    traces = field(entry.record, "traces", list, entry.where)
    if not traces:
        return None, None
    timings = [field(trace, "timing", dict, entry.where) for trace in traces]
    start = min(field(timing, "start", float, entry.where) for timing in timings)
    ends = [
        float(span.get("end") or 0.0)
        for timing in timings
        for span in timing.values()
        if isinstance(span, dict)
    ]
    return start, max([start, *ends])


def _optional(record: Any, name: str, kind: type[T], where: str) -> T:
    """`record[name]` of `kind`, or empty when missing or null; another type is refused."""
    if not isinstance(record, dict) or record.get(name) is None:
        return kind()
    return field(record, name, kind, where)


def _arrival(
    entry: _Record, t0: float | None, t1: float | None, first: dict[str, float]
) -> Arrival:
    record, where = entry.record, entry.where
    group = _group_id(entry)
    ok = field(record, "ok", bool, where)
    if t1 is None:
        t1 = first.get(group)
        if t1 is None:
            problem = "empty, and nothing before it in its file or its group gives a time"
            raise ForeignRunError(f"{where}: traces: {problem}")
    start = first.get(group, t1) if t0 is None else t0
    traces = record["traces"]
    rewards = [
        field(reward, "score", float, f"{where}: traces.rewards")
        * field(reward, "weight", float, f"{where}: traces.rewards")
        for trace in traces
        for reward in _optional(trace, "rewards", dict, f"{where}: traces").values()
        if reward is not None
    ]
    calls = [c for trace in traces for c in _optional(trace, "calls", list, f"{where}: traces")]
    usage = [_optional(call, "usage", dict, f"{where}: traces.calls") for call in calls]
    task = field(record, "task", dict, where)
    env = record.get("env") or {}
    work_info = (record.get("run") or {}).get("work") or {}
    errors = record.get("errors") or []
    policy = work_info.get("policy") if isinstance(work_info, dict) else None
    version = field(policy, "start", int, f"{where}: run.work.policy") if policy else None
    return Arrival(
        t0=min(start, t1),
        t1=t1,
        episode_id=field(record, "id", str, where),
        group_id=group,
        env=str(env.get("name") or env.get("id") or "main"),
        task=str(task.get("key") or task.get("hash") or task.get("type") or "task"),
        work=entry.work,
        frozen=entry.work == "train"
        and "work" in (record.get("run") or {})
        and work_info.get("policy") is None,
        version=version,
        reward=sum(rewards) if ok else None,
        error=str(errors[-1].get("type", "error")) if errors else "failed",
        prompt_tokens=sum(int(u.get("prompt_tokens") or 0) for u in usage),
        completion_tokens=sum(int(u.get("completion_tokens") or 0) for u in usage),
    )
