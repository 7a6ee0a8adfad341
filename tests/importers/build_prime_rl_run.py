"""Write a small prime-rl output folder with verifiers' own record classes (run in the
side environment, `.venv-verifiers`: `scripts/verifiers-env`).

    .venv-verifiers/bin/python tests/importers/build_prime_rl_run.py OUT [--seed N] [--steps N]

A seeded run of `steps` batches, each of two groups of four collected after the previous
batch's weights went live (prime-rl's layout: `configs/orchestrator.json`,
`rollouts/step_N/train/{all,effective}/traces.jsonl`, `metrics.jsonl`). Some members fail,
some are cancelled (no record: prime-rl writes only arrivals), zero-advantage members are
not trained. Where verifiers 0.4.0's record differs from what prime-rl 559b447 writes
(it pins verifiers main at a60a606), docs/foreign-runs.md says which shape is followed.
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from pathlib import Path

from verifiers.v1.configs.agent import WireAgentConfig
from verifiers.v1.episode import (
    EnvInfo,
    Episode,
    EvalWorkInfo,
    GroupInfo,
    PolicySpan,
    TrainRunInfo,
    TrainWorkInfo,
)
from verifiers.v1.trace import (
    AgentInfo,
    AgentSpan,
    Error,
    ModelCall,
    Reward,
    TimeSpan,
    Timing,
    Trace,
    TraceTask,
)
from verifiers.v1.types import Usage

GROUP_SIZE, GROUPS_PER_BATCH, START = 4, 2, 1_750_000_000.0
CONFIG = {  # the keys of prime-rl 559b447's resolved orchestrator config that the import reads
    "group_size": GROUP_SIZE,
    "batch_size": 8,
    "max_off_policy_steps": 1,
    "concurrency": {"max_inflight": 16},
    "train": {"filter_zero_advantages": True},
}


def episode(
    rng: random.Random, group: str, task: str, t: float, step: int, version: int | None, work: str
):
    """One arrived episode: its record and its arrival time; `version` None: a frozen policy."""
    key = TraceTask(type="math", data={}, key=task)
    duration = rng.uniform(1.0, 5.0)
    ok = rng.random() > 0.2
    info = TrainWorkInfo if work == "train" else EvalWorkInfo
    policy = None if version is None else PolicySpan(start=version, end=version)
    run = TrainRunInfo(id="run", work=info(step=step, policy=policy))
    if not ok and rng.random() < 0.5:  # failed before any trace: prime-rl keeps the episode
        errors = [Error(type="EnvServerError", message="the env server went away")]
        record = Episode(task=key, group=GroupInfo(id=group), run=run, errors=errors)
        return record.to_record(), None
    prompt, completion = rng.randint(50, 150), rng.randint(20, 400)
    trace = Trace(
        task=key,
        agent=AgentInfo(config=WireAgentConfig()),
        rewards={"correct": Reward(score=float(rng.random() < 0.5), weight=1.0)} if ok else {},
        timing=Timing(
            start=t,
            agent=AgentSpan(start=t + 0.1, end=t + duration),
            scoring=TimeSpan(start=t + duration, end=t + duration + 0.05),
        ),
        calls=[
            ModelCall(
                usage=Usage(prompt_tokens=prompt, completion_tokens=completion),
                time=TimeSpan(start=t + 0.1, end=t + duration),
                finish_reason="stop",
            )
        ],
        ok=ok,
        is_completed=ok,
        errors=[] if ok else [Error(type="SandboxError", message="the sandbox died")],
    )
    record = Episode(
        env=EnvInfo(id="math", name="math"),
        task=key,
        group=GroupInfo(id=group),
        run=run,
        ok=ok,
        errors=trace.errors,
        traces=[trace],
    )
    return record.to_record(), t + duration + 0.05


def reward(record: dict) -> float | None:
    if not record["ok"]:
        return None
    return sum(r["score"] * r["weight"] for t in record["traces"] for r in t["rewards"].values())


def build(out: Path, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    (out / "configs").mkdir(parents=True)
    (out / "configs" / "orchestrator.json").write_text(json.dumps(CONFIG))
    t, metrics = START, []
    frozen = {(3, 1): None}  # the second group of step 3 samples a frozen policy
    for step in range(1, steps + 1):
        arrived, trained = [], []
        for n in range(GROUPS_PER_BATCH):
            group, task = str(uuid.UUID(int=rng.getrandbits(128))), f"task-{rng.randint(0, 99)}"
            kept = GROUP_SIZE - (rng.random() < 0.3)  # sometimes one member is cancelled
            members = [
                episode(
                    rng, group, task, t + 0.01 * n, step, frozen.get((step, n), step - 1), "train"
                )
                for _ in range(kept)
            ]
            arrived += members
            rewards = [reward(r) for r, _ in members]
            scored = [r for r in rewards if r is not None]
            if len(set(scored)) > 1:  # zero-advantage groups are not trained
                trained += [r for r, _ in members if reward(r) is not None]
        write(out / f"rollouts/step_{step}/train/all/traces.jsonl", arrival_order(arrived))
        if step == 2:  # one eval group, measured at this step's version
            group = str(uuid.UUID(int=rng.getrandbits(128)))
            evals = [episode(rng, group, "eval-1", t, step, step - 1, "eval") for _ in range(2)]
            write(out / f"rollouts/step_{step}/eval/all/traces.jsonl", arrival_order(evals))
        write(out / f"rollouts/step_{step}/train/effective/traces.jsonl", trained)
        shipped = max(t1 for _, t1 in arrived if t1 is not None) + 0.1
        metrics.append({"step": step, "time": shipped, "time/step": shipped - t})
        t = shipped + 2.0  # the weights of this batch go live; the next batch starts
    (out / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in metrics))


def arrival_order(arrived: list) -> list[dict]:
    """The records in arrival order; one failed without a trace arrives with the one before."""
    timed = [(t1 if t1 is not None else 0.0, n, r) for n, (r, t1) in enumerate(arrived)]
    return [record for _, _, record in sorted(timed, key=lambda item: item[:2])]


def write(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    build(args.out, args.seed, args.steps)
