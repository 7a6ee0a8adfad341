"""Write an AReaL run folder with AReaL's own code, on CPU, against a fake inference engine.

Run by `scripts/areal-run` inside `.venv-areal` with the areal 1.0.4 wheel on `sys.path`.
AReaL's `WorkflowExecutor` (staleness manager, dispatcher, `prepare_batch`, the rollout
dump), its `GroupedRolloutWorkflow`, its session tracer and its `save_config` run
unmodified; what stands in for a cluster is:

- `FakeEngine`: the inference engine. It generates a token every `TOKEN_S` seconds (four or seven
  times slower for two tasks in three) and tags
  each with the version it serves at that moment; between `pause_generation` and
  `continue_generation` (a weight update) no token is generated, so a request in flight
  over an update goes on under the new version, as AReaL's interrupted and resubmitted
  requests do. It returns no token for the members listed in `SKIPPED`.
- `SampleWorkflow`: one sample per call, built as AReaL's `RLVRWorkflow` builds it
  (`session_context`, a traced `generate` phase and `reward` phase, prompt versions -1),
  except that it returns None when the engine returned no token (as AReaL's online agent
  workflow does for an empty session). The reward is 1 for an even completion length.
- the trainer: `prepare_batch`, a sleep, then `pause`, `pause_generation`,
  `set_version(step)`, `continue_generation`, `resume`, as `areal/trainer/rl_trainer.py`.
- `swanlab`, `trackio`, `wandb` and `tensorboardX`, imported by `areal.utils.stats_logger`
  and unused for what is written here, are empty modules when not installed.
- the evaluation: after training, a second executor under the role `eval-rollout` (its
  session trace and its `eval-rollout/` dump), as the single-controller trainer runs it.

What each step's `prepare_batch` returned (its groups' sequence lengths) and when the
trainer set each version go to `FILEROOT.steps.jsonl`, beside the folder: AReaL writes
neither, and the import tests check the import's reconstruction against them.

`--executor FILE` loads `areal/infra/workflow_executor.py` from FILE instead of the wheel's
(the file of AReaL PR #1350 at af51363, whose dump adds per-sample `version_rle`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import sys
import time
import types
import uuid
from typing import Any

import torch
from torch.utils.data import DataLoader


def _stand_in_metric_loggers() -> None:
    """`areal.utils.stats_logger` (which the dump calls for its folder) imports four
    metric-logging packages at module level and uses none of them for that."""
    for name in ("swanlab", "trackio", "wandb", "tensorboardX"):
        if importlib.util.find_spec(name) is None:
            module = types.ModuleType(name)
            module.SummaryWriter = None  # type: ignore[attr-defined]
            sys.modules[name] = module


_stand_in_metric_loggers()

from areal.api.cli_args import (  # noqa: E402
    GenerationHyperparameters,
    GRPOConfig,
    InferenceEngineConfig,
    PerfTracerConfig,
    SessionTracerConfig,
    save_config,
)
from areal.api.io_struct import ModelRequest, ModelResponse  # noqa: E402
from areal.api.workflow_api import RolloutWorkflow  # noqa: E402
from areal.utils import perf_tracer  # noqa: E402
from areal.utils.perf_tracer import atrace_session_phase, session_context, trace_session  # noqa: E402
from areal.utils.stats_logger import StatsLogger  # noqa: E402

EXPERIMENT, TRIAL = "exp", "trial"
GROUP_SIZE, BATCH, STEPS, CONCURRENT, ETA = 4, 2, 4, 6, 2
TOKEN_S, TRAIN_S, PROMPT = 0.003, 0.3, [7, 8, 9]
SKIPPED = {(3, 1)}  # (task, member) for which the engine returns no token
EVAL_TASKS = 2


class FakeEngine:
    """The part of AReaL's inference engine that the executor and the workflow call."""

    def __init__(self, seed: int) -> None:
        self.version = 0
        self.running = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.seed = seed

    def get_version(self) -> int:
        return self.version

    def set_version(self, version: int) -> None:
        self.version = version

    def pause_generation(self) -> None:
        self._call(self.running.clear)

    def continue_generation(self) -> None:
        self._call(self.running.set)

    def _call(self, what: Any) -> None:
        if self.loop is None:
            what()
        else:
            self.loop.call_soon_threadsafe(what)

    async def agenerate(self, req: ModelRequest) -> ModelResponse:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
            self.running.set()
        task, member = req.metadata["task"], req.metadata["member"]
        draw = random.Random(f"{self.seed}/{task}/{member}")
        length = 0 if (task, member) in SKIPPED else draw.randint(20, 90)
        tokens, versions = [], []
        for _ in range(length):
            await self.running.wait()
            await asyncio.sleep(TOKEN_S * (1 + 3 * (task % 3)))
            await self.running.wait()
            tokens.append(draw.randint(10, 99))
            versions.append(self.version)
        return ModelResponse(
            input_tokens=list(req.input_ids),
            output_tokens=tokens,
            output_logprobs=[0.0] * len(tokens),
            output_versions=versions,
            stop_reason="stop",
        )


class SampleWorkflow(RolloutWorkflow):
    """One sample per call, as RLVRWorkflow builds it; None when nothing was generated."""

    def __init__(self) -> None:
        self.members: dict[int, int] = {}

    @trace_session("reward")
    async def _reward(self, resp: ModelResponse) -> float:
        await asyncio.sleep(0.002)
        return float(len(resp.output_tokens) % 2 == 0)

    @session_context()
    async def _collect(self, engine: FakeEngine, req: ModelRequest) -> tuple[Any, float]:
        async with atrace_session_phase("generate"):
            resp = await engine.agenerate(req)
        if not resp.output_tokens:
            return resp, float("nan")
        return resp, await self._reward(resp)

    async def arun_episode(self, engine: Any, data: dict[str, Any]) -> dict[str, Any] | None:
        task = data["task"]
        member = self.members[task] = self.members.get(task, -1) + 1
        req = ModelRequest(
            rid=uuid.uuid4().hex,
            input_ids=PROMPT,
            gconfig=GenerationHyperparameters(n_samples=1),
            metadata={"task": task, "member": member},
        )
        resp, reward = await self._collect(engine, req)
        if not resp.output_tokens:
            return None
        seq = resp.input_tokens + resp.output_tokens
        n_in, n_out = len(resp.input_tokens), len(resp.output_tokens)
        res = {
            "input_ids": torch.tensor(seq, dtype=torch.int32),
            "loss_mask": torch.tensor([0] * n_in + [1] * n_out, dtype=torch.int32),
            "logprobs": torch.tensor([0.0] * n_in + resp.output_logprobs),
            "versions": torch.tensor([-1] * n_in + resp.output_versions, dtype=torch.int32),
            "attention_mask": torch.ones(len(seq), dtype=torch.bool),
            "rewards": torch.tensor(reward, dtype=torch.float32),
        }
        return {k: v.unsqueeze(0) for k, v in res.items()}


class DigitTokenizer:
    """What the dump decodes with: a token id as its digits."""

    def decode(self, ids: list[int], **_: Any) -> str:
        return " ".join(str(i) for i in ids)


def not_all_equal(traj: dict[str, Any]) -> bool:
    """AReaL's dynamic filtering: a group whose rewards are all equal teaches nothing."""
    rewards = traj["rewards"].flatten().tolist()
    return len(set(rewards)) > 1


def executor(module: Any, engine: FakeEngine, root: str) -> Any:
    config = InferenceEngineConfig(
        experiment_name=EXPERIMENT,
        trial_name=TRIAL,
        fileroot=root,
        max_concurrent_rollouts=CONCURRENT,
        consumer_batch_size=BATCH,
        max_head_offpolicyness=ETA,
        dump_to_file=True,
    )
    made = module.WorkflowExecutor(config=config, inference_engine=engine)
    made.initialize(train_data_parallel_size=1)
    made._tokenizer = DigitTokenizer()
    return made


def trace(root: str, role: str) -> None:
    perf_tracer.reset()
    tracer = SessionTracerConfig(enabled=True, flush_threshold=1)
    config = PerfTracerConfig(
        experiment_name=EXPERIMENT, trial_name=TRIAL, fileroot=root, session_tracer=tracer
    )
    perf_tracer.configure(config, rank=0, role=role)


def train(module: Any, grouped: Any, root: str, engine: FakeEngine, steps_log: str) -> None:
    """AReaL's training loop; what each step's `prepare_batch` returned goes to
    `steps_log` (outside AReaL's folder: AReaL writes none of it), one JSON line a step."""
    trace(root, "rollout")
    rollout = executor(module, engine, root)
    tasks = DataLoader([{"task": n} for n in range(64)], batch_size=BATCH, collate_fn=list)
    workflow = grouped(SampleWorkflow(), GROUP_SIZE, rollout.logger)
    with open(steps_log, "w") as out:
        for step in range(1, STEPS + 1):
            batch = rollout.prepare_batch(tasks, workflow, should_accept_fn=not_all_equal)
            prepared = time.time()
            print(f"step {step}: {len(batch)} groups at version {engine.version}", file=sys.stderr)
            time.sleep(TRAIN_S)
            rollout.pause()
            engine.pause_generation()
            time.sleep(0.05)
            engine.set_version(step)
            updated = time.time()
            engine.continue_generation()
            rollout.resume()
            groups = [sorted(t["attention_mask"].sum(1).tolist()) for t in batch]
            line = {"step": step, "prepared": prepared, "updated": updated, "seqlens": groups}
            out.write(json.dumps(line) + "\n")
    rollout.destroy()


def evaluate(module: Any, grouped: Any, root: str, seed: int, version: int) -> None:
    trace(root, "eval-rollout")
    engine = FakeEngine(seed + 1)
    engine.set_version(version)
    rollout = executor(module, engine, root)
    workflow = grouped(SampleWorkflow(), GROUP_SIZE, rollout.logger)
    ids = [rollout.submit({"task": n}, workflow, is_eval=True) for n in range(EVAL_TASKS)]
    for task_id in ids:
        rollout.wait_for_task(task_id)
    rollout.destroy()
    perf_tracer.reset()


def load_executor(path: str | None) -> Any:
    if path is None:
        from areal.infra import workflow_executor

        return workflow_executor
    spec = importlib.util.spec_from_file_location("areal.infra.workflow_executor", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["areal.infra.workflow_executor"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fileroot")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--executor", help="workflow_executor.py to use instead of the wheel's")
    args = parser.parse_args()
    module = load_executor(args.executor)
    from areal.infra.remote_inf_engine import GroupedRolloutWorkflow

    config = GRPOConfig(experiment_name=EXPERIMENT, trial_name=TRIAL)
    config.cluster.fileroot = args.fileroot
    config.gconfig.n_samples = GROUP_SIZE
    config.rollout.max_concurrent_rollouts = CONCURRENT
    config.rollout.consumer_batch_size = BATCH
    config.rollout.max_head_offpolicyness = ETA
    log_dir = StatsLogger.get_log_path(
        experiment_name=EXPERIMENT, trial_name=TRIAL, fileroot=args.fileroot
    )
    save_config(config, log_dir)
    engine = FakeEngine(args.seed)
    train(module, GroupedRolloutWorkflow, args.fileroot, engine, f"{args.fileroot}.steps.jsonl")
    evaluate(module, GroupedRolloutWorkflow, args.fileroot, args.seed, engine.version)


if __name__ == "__main__":
    main()
