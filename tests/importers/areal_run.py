"""AReaL run folders for the import tests, in the shape AReaL 1.0.4's own code writes.

AReaL's writers cannot run here: `areal.utils.perf_tracer` (SessionTracer) imports
`torch.profiler` and `areal.api.cli_args` at module level, and the rollout dump is a
method of the workflow executor, over torch tensors. So these lines are built with the
keys and rules of `SessionRecord.to_dict()` (fields left out when None, `phases` only
when a phase ran, `total_s` = finalized_ts - submit_ts) and of
`WorkflowExecutor._dump_trajectory` (`rollout/{tail_version}/{task_id}.jsonl`, one line
per sample), read from the areal 1.0.4 wheel.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs


@attrs.frozen
class Sample:
    """One session of a task, and what the dump says of it (`reward` None: no dump)."""

    task_id: int
    status: str  # accepted, rejected, failed, pending
    submit_ts: float
    generate_s: float
    reward: float | None = None
    reason: str | None = None
    head_version: int = 0
    tail_version: int = 0
    prompt_len: int = 40
    completion_len: int = 100


def session_line(sample: Sample, session_id: int) -> dict[str, Any]:
    """What `SessionRecord.to_dict()` writes for this session."""
    start, end = sample.submit_ts + 0.01, sample.submit_ts + sample.generate_s
    running = sample.status == "pending"  # still generating when the tracer was flushed
    phases = {"generate": [{"start_ts": start, "end_ts": None if running else end}]}
    if sample.status in ("accepted", "rejected") and sample.reward is not None:
        phases["reward"] = [{"start_ts": end, "end_ts": end + 0.05}]
    finalized = None if sample.status == "pending" else end + 0.1
    line: dict[str, Any] = {"task_id": sample.task_id, "session_id": session_id, "rank": 0}
    line["status"] = sample.status
    if sample.reason is not None:
        line["reason"] = sample.reason
    line["submit_ts"] = sample.submit_ts
    if finalized is not None:
        line["finalized_ts"] = finalized
        line["total_s"] = finalized - sample.submit_ts
    if not running:
        line["generate_s"] = end - start
    if "reward" in phases:
        line["reward_s"] = 0.05
    line["phases"] = phases
    return line


def dump_line(sample: Sample, sample_idx: int) -> dict[str, Any]:
    """What `_dump_trajectory` writes for this sample."""
    return {
        "task_id": sample.task_id,
        "sample_idx": sample_idx,
        "seqlen": sample.prompt_len + sample.completion_len,
        "prompt_len": sample.prompt_len,
        "head_version": sample.head_version,
        "tail_version": sample.tail_version,
        "reward": sample.reward,
        "prompt": "<prompt>",
        "completion": "<completion>",
    }


def write_run(root: Path, samples: list[Sample]) -> Path:
    """An AReaL fileroot: the session trace of rank 0 and the rollout dumps."""
    trial = root / "logs" / "user" / "exp" / "trial"
    sessions = trial / "session_tracer" / "sessions-r0.jsonl"
    sessions.parent.mkdir(parents=True)
    order = sorted(range(len(samples)), key=lambda n: samples[n].submit_ts)
    finished = [n for n in order if samples[n].status != "pending"]
    pending = [n for n in order if samples[n].status == "pending"]
    with sessions.open("w") as out:  # flushed as sessions finish; the rest at shutdown
        for n in finished + pending:
            out.write(json.dumps(session_line(samples[n], n)) + "\n")
    index: dict[int, int] = {}
    for sample in samples:
        sample_idx = index[sample.task_id] = index.get(sample.task_id, -1) + 1
        if sample.reward is None:
            continue
        dump = root / "exp" / "trial" / "rollout" / str(sample.tail_version)
        dump.mkdir(parents=True, exist_ok=True)
        with (dump / f"{sample.task_id}.jsonl").open("a") as out:
            out.write(json.dumps(dump_line(sample, sample_idx)) + "\n")
    return root


RUN = [
    Sample(0, "accepted", 100.0, 2.0, reward=1.0),
    Sample(1, "accepted", 100.5, 3.0, reward=0.0),
    Sample(2, "rejected", 101.0, 1.5, reward=0.0, reason="rejected"),
    Sample(3, "rejected", 101.2, 1.0, reason="returned_none"),
    Sample(4, "failed", 102.0, 0.5, reason="workflow_exception"),
    Sample(5, "accepted", 104.0, 2.5, reward=1.0, head_version=1, tail_version=2),
    Sample(5, "accepted", 104.1, 2.0, reward=0.0, head_version=1, tail_version=1),
    Sample(6, "accepted", 105.0, 1.0, reward=1.0, head_version=2, tail_version=2),
    Sample(7, "pending", 106.0, 9.0),
]
