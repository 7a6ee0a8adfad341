"""Import a prime-rl output folder: the world facts its records give, as a rolloutlog log.

prime-rl writes one verifiers Episode record per arrived episode
(`rollouts/step_N/WORK/all/traces.jsonl`, WORK train or eval), the trained cohort of each batch
(`.../train/effective/traces.jsonl`), a row per shipped step (`metrics.jsonl`) and its
resolved config (`configs/orchestrator.json`). From them the import rebuilds what a
what-if needs, through `rolloutlog.record.Recorder` (so the log closes clean), and says
which facts it reconstructed and which it had to assume (`IMPORT_NOTE`,
docs/foreign-runs.md).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Final

from rolloutlog.importers.errors import ForeignRunError, field, read_json
from rolloutlog.importers.prime_rl_play import Play, drained, never_arrived, peak_inflight
from rolloutlog.importers.prime_rl_records import Arrival, read_arrivals, read_trained
from rolloutlog.importers.prime_rl_reports import (
    LogCounts,
    Metrics,
    published,
    read_log_counts,
    read_metrics,
)
from rolloutlog.importers.prime_rl_times import Group, Times, reconcile
from rolloutlog.record import Recorder

IMPORT_NOTE: Final = "import"
CODE_VERSION: Final = "prime-rl (imported by rolloutlog)"
# prime-rl 559b447's dispatch gate and ship hold (`orchestrator.py` TARGET_LAG): a constant
TARGET_LAG: Final = 1
# prime-rl's orchestrator config: (path of keys, our key, kind, required, least value)
CONFIG_FIELDS: Final = (
    (("group_size",), "group_size", int, True, 1),
    (("max_off_policy_steps",), "max_off_policy_steps", int, True, 0),
    (("batch_size",), "batch_size", int, False, 1),
    (("token_batch_size",), "token_batch_size", int, False, 1),
    (("train", "filter_zero_advantages"), "filter_zero_advantages", bool, False, None),
    (("concurrency", "max_inflight"), "max_inflight", int, False, 1),
)
OPTIONAL_FILES: Final = (
    ("metrics.jsonl", "ship times are the trained groups' ends; no trainer rows"),
    ("logs/*/orchestrator.log", "no stale or drain cancellation, no all-pruned batch is known"),
    ("broadcasts/step_N/STABLE", "publish times from the trainer's rows, else the ships"),
    ("rollouts/step_N/train/effective", "no batch membership"),
)
RECONSTRUCTED: Final = (
    "rewards (sum of score * weight over each episode's traces)",
    "prompt and completion tokens (each model call's usage)",
    "versions: each group's run.work.policy.start",
    "groups (group.id), tasks (task.key, else task.hash), frozen groups (no run.work.policy)",
    "batch membership (train/effective: the episodes trained in batch N)",
    "ship times: the orchestrator's metrics.jsonl row of step N (the trainer's rows apart)",
    "publish times: broadcasts/step_N/STABLE, else the trainer's row of step N",
    "stale cancellations: the log's DEBUG drop lines (group, in flight, unscheduled, version)",
    "the drain's in-flight cancellations: the log's draining line",
    "batches whose every sample was pruned: the log's empty-batch lines (no step moves)",
)
ASSUMED: Final = (
    "dispatch times: the environment's timing.start (prime-rl does not write dispatch times)",
    "which queued episodes the sink's sweep voided: by prime-rl's rule over the "
    "reconstructed order (the files give counts, off_policy/dropped and the WARNING lines)",
    "which untrained queued episodes were cut and pruned: those with a zero advantage",
    "overload cancellations the DEBUG lines name: at their group's last arrival (the "
    "line's time has seconds only)",
    "members that never arrived: dispatched when their group's last arrival was; groups "
    "that never arrived at all: only the log names them (by 8 digits) or counts them",
    "without the log's DEBUG lines: a group short of members that ended before the final "
    "ship had them cancelled as unscheduled at its last arrival (stale where prime-rl's "
    "rule finds it stale, else overload); the rest were in flight at the drain",
    "late arrivals: none can show (prime-rl drops them unwritten): late_arrival_rate is 0",
    "the order of decisions within a moment: verify checks only what the files fix",
    "weight updates: live as soon as pending (no update time is written)",
)


def import_prime_rl(
    folder: str | os.PathLike[str], output: str | os.PathLike[str]
) -> dict[str, Any]:
    """Write the log of the prime-rl run in `folder` to `output`; returns the import note."""
    root = Path(folder)
    config_path = root / "configs" / "orchestrator.json"
    if not config_path.is_file():
        raise ForeignRunError(f"{root}: not a prime-rl run: no configs/orchestrator.json")
    config = read_config(config_path)
    arrivals = read_arrivals(root)
    if not arrivals:
        raise ForeignRunError(f"{root / 'rollouts'}: no step_N/train/all/traces.jsonl records")
    trained = {step: ids for step, (_, ids) in _checked_trained(root, arrivals).items()}
    metrics, log = read_metrics(root / "metrics.jsonl"), read_log_counts(root)
    play, finish = _plan(root, arrivals, trained, metrics, log, config)
    config["max_inflight"] = max(config.get("max_inflight", 1), peak_inflight(play.timeline))
    note = _note(root, config, play.times, metrics, log)
    with tempfile.TemporaryDirectory() as scratch:  # a first pass counts, for the note
        counting = Recorder(Path(scratch) / "count.arrow", config=config, code_version=CODE_VERSION)
        with counting:
            play.run(counting, finish)
    note["reconciled"] = _reconciled(play, metrics, log)
    play, _ = _plan(root, arrivals, trained, metrics, log, config)
    with Recorder(
        output,
        config=config,
        code_version=CODE_VERSION,
        overwrite=True,
        notes={IMPORT_NOTE: json.dumps(note)},
    ) as rec:
        play.run(rec, finish)
    return note


def read_config(path: Path) -> dict[str, Any]:
    """Our run config from prime-rl's `configs/orchestrator.json`: each field it needs,
    typed and in range, or one line naming the file and the field."""
    theirs = read_json(path)
    config: dict[str, Any] = {}
    for keys, ours, kind, required, least in CONFIG_FIELDS:
        holder: Any = theirs
        for key in keys[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        name = ".".join(keys)
        value = holder.get(keys[-1]) if isinstance(holder, dict) else None
        if value is None:
            if required:
                raise ForeignRunError(f"{path}: {name}: missing")
            continue
        value = field({name: value}, name, kind, str(path))
        if least is not None and value < least:
            raise ForeignRunError(f"{path}: {name}: must be at least {least}, got {value}")
        config[ours] = value
    if ("batch_size" in config) == ("token_batch_size" in config):
        raise ForeignRunError(f"{path}: batch_size: exactly one of it and token_batch_size")
    config["staleness"] = "per-group"  # a group shares one dispatch version
    config["target_lag"] = TARGET_LAG
    return config


def _checked_trained(root: Path, arrivals: list[Arrival]) -> dict[int, tuple[Path, list[str]]]:
    trained = read_trained(root)
    known = {a.episode_id for a in arrivals}
    for path, ids in trained.values():
        for episode_id in ids:
            if episode_id not in known:
                problem = "trained, but no train/all record has it"
                raise ForeignRunError(f"{path}: id: {episode_id} {problem}")
    steps = sorted(trained)
    if steps and steps[0] != 1:
        raise ForeignRunError(
            f"{root / 'rollouts'}: step_{steps[0]}: the steps start after 1 "
            "(a resumed run): its earlier steps are not in this folder"
        )
    return trained


def _plan(
    root: Path,
    arrivals: list[Arrival],
    trained: dict[int, list[str]],
    metrics: Metrics,
    log: LogCounts,
    config: dict[str, Any],
) -> tuple[Play, float]:
    size = int(config["group_size"])
    members: dict[str, list[Arrival]] = {}
    for arrival in arrivals:
        members.setdefault(arrival.group_id, []).append(arrival)
    groups = [Group.of(m, size) for m in members.values()]
    origin = arrivals[0].t0
    bound = int(config["max_off_policy_steps"])
    versions = {g.id[:8]: g.version for g in groups if g.version is not None}
    stale = [
        (versions[d.prefix] + bound + 1, d.version)
        for d in log.group_drops
        if d.reason == "stale" and d.prefix in versions and d.version is not None
    ]
    times = reconcile(groups, trained, metrics, published(root), origin, stale)
    finish = max([*times.ships.values(), *(a.t1 for a in arrivals)])
    groups += never_arrived(log, groups, size, times, bound, origin)
    # without DEBUG lines the log names no cancelled group: those short of members that
    # ended before the final ship were cancelled then (assumed); the rest at the drain
    unnamed_end = None if log.debug else max(times.ships.values(), default=finish)
    groups += drained(log, groups, size, finish, unnamed_end)
    batch = int(config.get("batch_size") or size)
    play = Play(groups, trained, times, log, bound, batch, origin, unnamed_end=unnamed_end)
    play.plan(finish)
    return play, finish


def _note(
    root: Path, config: dict[str, Any], times: Times, metrics: Metrics, log: LogCounts
) -> dict[str, Any]:
    absent = [f"{name}: {effect}" for name, effect in OPTIONAL_FILES if not _present(root, name)]
    return {
        "source": "prime-rl",
        "folder": str(root),
        "config": {k: v for k, v in config.items()},
        "reconstructed": list(RECONSTRUCTED),
        "assumed": list(ASSUMED),
        "absent": absent,
        "publish_times": times.source,
        "moved_s": round(times.moved_s, 3),
        "metrics_rows_of_neither": metrics.other_rows,
        "log": None if log.path is None else str(log.path),
    }


def _present(root: Path, name: str) -> bool:
    if name == "metrics.jsonl":
        return (root / name).is_file()
    if name.startswith("logs"):
        return next(root.glob("logs/*/orchestrator.log"), None) is not None
    if name.startswith("broadcasts"):
        return next(root.glob("broadcasts/step_*/STABLE"), None) is not None
    return next(root.glob("rollouts/step_*/train/effective/traces.jsonl"), None) is not None


def _reconciled(play: Play, metrics: Metrics, log: LogCounts) -> dict[str, Any]:
    """The import's counts beside prime-rl's own, and their difference."""
    counts = play.counts
    reported = sum(metrics.dropped.values())
    return {
        "swept": {
            "import": counts.swept,
            "prime-rl log": log.swept,
            "off_policy/dropped": reported,
        },
        "swept_after_the_drain": {"import": 0, "prime-rl log": log.swept_in_drain},
        "stale_cancelled": {"import": counts.stale_cancelled, "prime-rl log": log.stale_cancelled},
        "drained_inflight": {"import": counts.drained_inflight, "prime-rl log": log.drained},
        "voided_with_group": counts.voided,
        "pruned": counts.pruned,
        "left_queued": counts.left_queued,
        "sweep_conflicts": counts.sweep_conflicts,
        "version_mismatches": counts.version_mismatches,
    }
