"""Import a prime-rl output folder: the world facts its records give, as a rolloutlog log.

prime-rl writes one verifiers Episode record per arrived episode
(`rollouts/step_N/{train,eval}/all/traces.jsonl`), the trained cohort of each batch
(`.../train/effective/traces.jsonl`), a row per shipped step (`metrics.jsonl`) and its
resolved config (`configs/orchestrator.json`). From them the import rebuilds what a
what-if needs, through `rolloutlog.record.Recorder` (so the log closes clean), and says
which facts it reconstructed and which it had to assume (`IMPORT_NOTE`, docs/foreign-runs.md).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import attrs

from rolloutlog.core.scoring import grpo_advantages
from rolloutlog.importers.errors import ForeignRunError, field, read_json, read_jsonl
from rolloutlog.record import Recorder

IMPORT_NOTE: Final = "import"
CODE_VERSION: Final = "prime-rl (imported by rolloutlog)"
_STEP_DIR: Final = re.compile(r"step_(\d+)$")
# prime-rl's orchestrator config key -> ours, where the meaning is the same
CONFIG_KEYS: Final = {
    "batch_size": "batch_size",
    "rollouts_per_example": "group_size",
    "max_off_policy_steps": "max_off_policy_steps",
}
RECONSTRUCTED: Final = (
    "rewards (sum of score * weight over each episode's traces)",
    "prompt and completion tokens (each model call's usage)",
    "environment-side durations (a trace's timing.start to its last span's end)",
    "group membership (group.id) and task (task.key or task.hash)",
    "batch membership (train/effective: the trained episodes of each step)",
    "batch times (metrics.jsonl time)",
)
ASSUMED: Final = (
    "dispatch times: the environment's timing.start (prime-rl does not write dispatch times)",
    "versions: v goes pending and live when batch v ships (only brackets are written)",
    "cancelled members: prime-rl writes no record of them; a group's missing members are "
    "recorded as unscheduled cancellations (reason stale) when its last member arrived",
    "the cut of each batch is its trained episodes (the batch before pruning is not written)",
    "late arrivals: none can show (completions that lose their race are dropped unwritten), "
    "so the what-if's late_arrival_rate is fitted as 0: set it with --set",
)


@attrs.frozen
class _Arrival:
    t0: float  # the environment's start (epoch seconds)
    t1: float  # its last span's end
    episode_id: str
    group_id: str
    env: str
    task: str
    work: str
    reward: float | None
    error: str
    prompt_tokens: int
    completion_tokens: int


def import_prime_rl(
    folder: str | os.PathLike[str], output: str | os.PathLike[str]
) -> dict[str, Any]:
    """Write the log of the prime-rl run in `folder` to `output`; returns the import note."""
    root = Path(folder)
    config_path = root / "configs" / "orchestrator.json"
    if not config_path.is_file():
        raise ForeignRunError(f"{root}: not a prime-rl run: no configs/orchestrator.json")
    prime_config = read_json(config_path)
    config = {
        ours: prime_config[theirs] for theirs, ours in CONFIG_KEYS.items() if theirs in prime_config
    }
    config["staleness"] = "per-group"  # members carry their group's version
    config["target_lag"] = config.get("max_off_policy_steps", 8)
    arrivals = sorted(_arrivals(root), key=lambda a: (a.t0, a.episode_id))
    if not arrivals:
        raise ForeignRunError(f"{root / 'rollouts'}: no step_N/train/all/traces.jsonl with records")
    trained = _trained(root)
    shipped = _ship_times(root / "metrics.jsonl")
    peak = _peak_inflight(arrivals)
    config["max_inflight"] = max(peak, int(prime_config.get("max_concurrent") or 0))
    note = {
        "source": "prime-rl",
        "folder": str(root),
        "config_read": sorted(k for k in CONFIG_KEYS if k in prime_config),
        "reconstructed": list(RECONSTRUCTED),
        "assumed": list(ASSUMED),
    }
    origin = arrivals[0].t0
    with Recorder(
        output,
        config=config,
        code_version=CODE_VERSION,
        overwrite=True,
        notes={IMPORT_NOTE: json.dumps(note)},
    ) as rec:
        _Replayer(rec, arrivals, trained, shipped, origin, config.get("group_size")).run()
    return note


def _arrivals(root: Path) -> Iterator[_Arrival]:
    for work in ("train", "eval"):
        for path in _step_files(root, work, "all"):
            for line, record in read_jsonl(path):
                yield _arrival(path, line, record, work)


def _step_files(root: Path, work: str, cohort: str) -> list[Path]:
    found = []
    for step_dir in (root / "rollouts").glob("step_*"):
        match = _STEP_DIR.search(step_dir.name)
        path = step_dir / work / cohort / "traces.jsonl"
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def _arrival(path: Path, line: int, record: dict[str, Any], work: str) -> _Arrival:
    where = f"{path}: line {line}"
    traces = field(record, "traces", list, where)
    ok = bool(field(record, "ok", bool, where))
    rewards = [
        field(reward, "score", float, where) * field(reward, "weight", float, where)
        for trace in traces
        for reward in (trace.get("rewards") or {}).values()
        if reward is not None
    ]
    calls = [call for trace in traces for call in trace.get("calls") or []]
    usage = [call.get("usage") or {} for call in calls]
    starts = [field(field(trace, "timing", dict, where), "start", float, where) for trace in traces]
    if not starts:
        raise ForeignRunError(f"{where}: traces: empty, so no timing.start to place the episode")
    ends = [_last_end(trace["timing"]) for trace in traces]
    task = field(record, "task", dict, where)
    errors = record.get("errors") or []
    return _Arrival(
        t0=min(starts),
        t1=max(max(ends), min(starts)),
        episode_id=field(record, "id", str, where),
        group_id=field(field(record, "group", dict, where), "id", str, where),
        env=str(
            (record.get("env") or {}).get("name") or (record.get("env") or {}).get("id") or "main"
        ),
        task=str(task.get("key") or task.get("hash") or task.get("type") or "task"),
        work=work,
        reward=sum(rewards) if ok else None,
        error=str(errors[-1].get("type", "error")) if errors else "failed",
        prompt_tokens=sum(int(u.get("prompt_tokens") or 0) for u in usage),
        completion_tokens=sum(int(u.get("completion_tokens") or 0) for u in usage),
    )


def _last_end(timing: dict[str, Any]) -> float:
    ends = [span.get("end") or 0.0 for span in timing.values() if isinstance(span, dict)]
    return float(max(ends, default=0.0))


def _trained(root: Path) -> dict[int, list[str]]:
    trained = {}
    for path in _step_files(root, "train", "effective"):
        step = int(_STEP_DIR.search(path.parents[2].name).group(1))  # type: ignore[union-attr]
        trained[step] = [field(r, "id", str, f"{path}: line {n}") for n, r in read_jsonl(path)]
    return trained


def _ship_times(path: Path) -> dict[int, float]:
    if not path.is_file():
        return {}
    times = {}
    for line, row in read_jsonl(path):
        where = f"{path}: line {line}"
        times[int(field(row, "step", int, where))] = float(field(row, "time", float, where))
    return times


def _peak_inflight(arrivals: list[_Arrival]) -> int:
    edges = sorted([(a.t0, 1) for a in arrivals] + [(a.t1, -1) for a in arrivals])
    peak = held = 0
    for _, change in edges:
        held += change
        peak = max(peak, held)
    return max(peak, 1)


class _Replayer:
    """Feeds the recorder the reconstructed world in time order."""

    def __init__(
        self,
        rec: Recorder,
        arrivals: list[_Arrival],
        trained: dict[int, list[str]],
        shipped: dict[int, float],
        origin: float,
        group_size: int | None,
    ) -> None:
        self.rec, self.origin = rec, origin
        self.members: dict[str, list[_Arrival]] = {}
        for arrival in arrivals:
            self.members.setdefault(arrival.group_id, []).append(arrival)
        self.size = {g: max(group_size or 0, len(m)) for g, m in self.members.items()}
        self.trained, self.shipped = trained, shipped
        self.batch_of = {e: s for s, ids in trained.items() for e in ids}
        self.arrivals = arrivals
        known = {a.episode_id for a in arrivals}
        for step, ids in trained.items():
            for episode_id in ids:
                if episode_id not in known:
                    path = f"rollouts/step_{step}/train/effective/traces.jsonl"
                    raise ForeignRunError(
                        f"{path}: id: {episode_id} trained, but no train/all record has it"
                    )

    def run(self) -> None:
        timeline: list[tuple[float, int, str, Any]] = []
        for arrival in self.arrivals:
            timeline += [(arrival.t0, 0, "dispatch", arrival), (arrival.t1, 1, "arrive", arrival)]
        last_arrival = {g: max(a.t1 for a in m) for g, m in self.members.items()}
        group_of = {a.episode_id: a.group_id for a in self.arrivals}
        for step in sorted(self.trained):
            done = [last_arrival[group_of[e]] for e in self.trained[step]]
            t = max([self.shipped.get(step, 0.0), *done, self.arrivals[0].t0])
            timeline.append((t, 2, "ship", step))
        rec, opened = self.rec, set()
        arrived: dict[str, list[_Arrival]] = {}
        for t, _, kind, what in sorted(timeline, key=lambda item: item[:2]):
            now = t - self.origin
            if kind == "dispatch":
                if what.group_id not in opened:
                    opened.add(what.group_id)
                    size = self.size[what.group_id]
                    rec.open_group(
                        now, what.group_id, env=what.env, task=what.task, work=what.work, size=size
                    )
                rec.dispatch(now, what.group_id, what.episode_id)
            elif kind == "arrive":
                if what.reward is None:
                    rec.fail(now, what.episode_id, error=what.error)
                else:
                    rec.complete(
                        now,
                        what.episode_id,
                        reward=what.reward,
                        prompt_tokens=what.prompt_tokens,
                        completion_tokens=what.completion_tokens,
                    )
                group = arrived.setdefault(what.group_id, [])
                group.append(what)
                if len(group) == len(self.members[what.group_id]):
                    self._finalize(now, what.group_id, group)
            else:
                ids = self.trained[what]
                rec.ship(now, ids, trained=ids)
                rec.version_pending(now, what)
                rec.version_live(now, what)
        rec.finish(max(t for t, *_ in timeline) - self.origin, reason="steps")

    def _finalize(self, now: float, group_id: str, members: list[_Arrival]) -> None:
        missing = self.size[group_id] - len(members)
        if missing:
            self.rec.cancel(now, group_id, unscheduled=missing, reason="stale")
        scored = [m for m in members if m.reward is not None]
        rewards = grpo_advantages([m.reward for m in scored if m.reward is not None])
        advantages = {m.episode_id: a for m, a in zip(scored, rewards, strict=True)}
        admitted = members[0].work == "train" and any(m.episode_id in self.batch_of for m in scored)
        self.rec.score(now, group_id, advantages, admitted=admitted)
