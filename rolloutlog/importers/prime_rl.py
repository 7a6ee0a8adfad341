"""Import a prime-rl output folder: the world facts its records give, as a rolloutlog log.

prime-rl writes one verifiers Episode record per arrived episode
(`rollouts/step_N/{train,eval}/all/traces.jsonl`), the trained cohort of each batch
(`.../train/effective/traces.jsonl`), a row per shipped step (`metrics.jsonl`) and its
resolved config (`configs/orchestrator.json`). From them the import rebuilds what a
what-if needs, through `rolloutlog.record.Recorder` (so the log closes clean), and says
which facts it reconstructed and which it had to assume (`IMPORT_NOTE`,
docs/foreign-runs.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

from rolloutlog.core.scoring import grpo_advantages
from rolloutlog.importers.errors import ForeignRunError, read_json
from rolloutlog.importers.prime_rl_records import (
    Arrival,
    read_arrivals,
    read_step_times,
    read_trained,
)
from rolloutlog.record import Recorder

IMPORT_NOTE: Final = "import"
CODE_VERSION: Final = "prime-rl (imported by rolloutlog)"
# prime-rl 559b447's orchestrator config (a path of keys) -> ours, where the meaning is the same
CONFIG_KEYS: Final = {
    ("group_size",): "group_size",
    ("batch_size",): "batch_size",
    ("token_batch_size",): "token_batch_size",
    ("max_off_policy_steps",): "max_off_policy_steps",
    ("train", "filter_zero_advantages"): "filter_zero_advantages",
}
RECONSTRUCTED: Final = (
    "rewards (sum of score * weight over each episode's traces)",
    "prompt and completion tokens (each model call's usage)",
    "environment-side durations (a trace's timing.start to its last span's end)",
    "groups (group.id), tasks (task.key, else task.hash), frozen groups (no run.work.policy)",
    "batch membership (train/effective: the episodes trained in batch N)",
    "batch times (metrics.jsonl time, no earlier than the batch's groups finalized)",
)
ASSUMED: Final = (
    "dispatch times: the environment's timing.start (prime-rl does not write dispatch times)",
    "versions: v goes pending and live when batch v ships (only brackets are written)",
    "cancelled members: prime-rl writes no record of them; a group's missing members are "
    "recorded as unscheduled cancellations (reason stale) when its last member arrived",
    "the cut of each batch is its trained episodes (the batch before pruning is not written)",
    "late arrivals: none can show (completions that lose their race are dropped unwritten), "
    "so the what-if's late_arrival_rate is fitted as 0: set it with --set",
    "max_inflight: the peak of episodes in flight, if above concurrency.max_inflight",
)


def import_prime_rl(
    folder: str | os.PathLike[str], output: str | os.PathLike[str]
) -> dict[str, Any]:
    """Write the log of the prime-rl run in `folder` to `output`; returns the import note."""
    root = Path(folder)
    config_path = root / "configs" / "orchestrator.json"
    if not config_path.is_file():
        raise ForeignRunError(f"{root}: not a prime-rl run: no configs/orchestrator.json")
    theirs = read_json(config_path)
    arrivals = read_arrivals(root)
    if not arrivals:
        raise ForeignRunError(f"{root / 'rollouts'}: no step_N/train/all/traces.jsonl records")
    config, read = _config(theirs, arrivals)
    note = {
        "source": "prime-rl",
        "folder": str(root),
        "config_read": read,
        "reconstructed": list(RECONSTRUCTED),
        "assumed": list(ASSUMED),
    }
    replayer = _Replayer(arrivals, read_trained(root), read_step_times(root / "metrics.jsonl"))
    replayer.check_steps(root)
    with Recorder(
        output,
        config=config,
        code_version=CODE_VERSION,
        overwrite=True,
        notes={IMPORT_NOTE: json.dumps(note)},
    ) as rec:
        replayer.run(rec, config.get("group_size"))
    return note


def _config(theirs: dict[str, Any], arrivals: list[Arrival]) -> tuple[dict[str, Any], list[str]]:
    """Our run config from prime-rl's, and the prime-rl keys it was read from."""
    config: dict[str, Any] = {}
    read = []
    for path, ours in CONFIG_KEYS.items():
        value: Any = theirs
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            config[ours] = value
            read.append(".".join(path))
    config["staleness"] = "per-group"  # a group shares one dispatch version
    config["target_lag"] = config.get("max_off_policy_steps", 8)  # no separate gate knob
    limit = (theirs.get("concurrency") or {}).get("max_inflight") or 0
    config["max_inflight"] = max(int(limit), _peak_inflight(arrivals))
    return config, read


def _peak_inflight(arrivals: list[Arrival]) -> int:
    edges = sorted([(a.t0, 1) for a in arrivals] + [(a.t1, -1) for a in arrivals])
    peak = held = 0
    for _, change in edges:
        held += change
        peak = max(peak, held)
    return max(peak, 1)


class _Replayer:
    """Feeds the recorder the reconstructed world, in time order."""

    def __init__(
        self,
        arrivals: list[Arrival],
        trained: dict[int, tuple[Path, list[str]]],
        step_times: dict[int, float],
    ) -> None:
        self.arrivals, self.trained, self.step_times = arrivals, trained, step_times
        self.members: dict[str, list[Arrival]] = {}
        for arrival in arrivals:
            self.members.setdefault(arrival.group_id, []).append(arrival)
        self.trained_ids = {e for _, ids in trained.values() for e in ids}

    def check_steps(self, root: Path) -> None:
        """Every trained id is an arrival; the steps run from 1 (a resumed run does not)."""
        known = {a.episode_id for a in self.arrivals}
        for path, ids in self.trained.values():
            for episode_id in ids:
                if episode_id not in known:
                    problem = "trained, but no train/all record has it"
                    raise ForeignRunError(f"{path}: id: {episode_id} {problem}")
        steps = sorted(self.trained.keys() | self.step_times.keys())
        if steps and steps[0] != 1:
            raise ForeignRunError(
                f"{root / 'rollouts'}: step_{steps[0]}: the steps start after 1 "
                "(a resumed run): its earlier steps are not in this folder"
            )

    def run(self, rec: Recorder, group_size: int | None) -> None:
        timeline: list[tuple[float, int, str, Any]] = []
        for arrival in self.arrivals:
            timeline += [(arrival.t0, 0, "dispatch", arrival), (arrival.t1, 1, "arrive", arrival)]
        finalized = {g: max(a.t1 for a in m) for g, m in self.members.items()}
        group_of = {a.episode_id: a.group_id for a in self.arrivals}
        origin = t = self.arrivals[0].t0
        for step in range(1, max(self.trained.keys() | self.step_times.keys(), default=0) + 1):
            ids = self.trained.get(step, (None, []))[1]
            finalized_t = (finalized[group_of[e]] for e in ids)  # batches ship in step order:
            t = max([t, self.step_times.get(step, origin), *finalized_t])
            timeline.append((t, 2, "ship", step))
        size = {g: max(group_size or 0, len(m)) for g, m in self.members.items()}
        arrived: dict[str, int] = {}
        for t, _, kind, what in sorted(timeline, key=lambda item: item[:2]):
            now = t - origin
            if kind == "dispatch":
                if what.group_id not in arrived:
                    arrived[what.group_id] = 0
                    rec.open_group(
                        now,
                        what.group_id,
                        env=what.env,
                        task=what.task,
                        work=what.work,
                        size=size[what.group_id],
                        frozen=what.frozen,
                    )
                rec.dispatch(now, what.group_id, what.episode_id)
            elif kind == "arrive":
                self._arrive(rec, now, what)
                arrived[what.group_id] += 1
                if arrived[what.group_id] == len(self.members[what.group_id]):
                    self._finalize(rec, now, what.group_id, size[what.group_id])
            else:
                ids = self.trained.get(what, (None, []))[1]
                rec.ship(now, ids, trained=ids)
                rec.version_pending(now, what)
                rec.version_live(now, what)
        rec.finish(max(t for t, *_ in timeline) - origin, reason="steps")

    @staticmethod
    def _arrive(rec: Recorder, now: float, arrival: Arrival) -> None:
        if arrival.reward is None:
            rec.fail(now, arrival.episode_id, error=arrival.error)
        else:
            rec.complete(
                now,
                arrival.episode_id,
                reward=arrival.reward,
                prompt_tokens=arrival.prompt_tokens,
                completion_tokens=arrival.completion_tokens,
            )

    def _finalize(self, rec: Recorder, now: float, group_id: str, size: int) -> None:
        members = self.members[group_id]
        if size > len(members):
            rec.cancel(now, group_id, unscheduled=size - len(members), reason="stale")
        scored = [m for m in members if m.reward is not None]
        rewards = grpo_advantages([m.reward for m in scored if m.reward is not None])
        advantages = {m.episode_id: a for m, a in zip(scored, rewards, strict=True)}
        admitted = any(m.episode_id in self.trained_ids for m in scored)
        rec.score(now, group_id, advantages, admitted=admitted)
