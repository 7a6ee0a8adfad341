"""prime-rl's own `Dispatcher` and `TrainSink`, driven on CPU with scripted environments and
recorded by `rolloutlog.integrations.prime_rl`: the log is checked by `verify --policy`.

Runs only where PRIME_RL_SRC names a prime-rl checkout whose imports resolve (prime-rl asks
for Python 3.12, verifiers, torch, aiolimiter, msgspec, wandb, ...: docs/foreign-runs.md
says which set it was last run with); elsewhere it is skipped, and the scripted stand-in
of test_prime_rl_recorder.py runs in its place. Two scripted environments: one whose every
run fails (prime-rl dispatches, refills, finalizes each group as unscored and never ships),
and one whose runs succeed with a reward, their trace's nodes carrying made-up token ids
(prime-rl's sink turns nodes into samples without a tokenizer), scored by prime-rl's own
GRPO, so that batches ship, versions advance and, under a bound of one, stale groups are
cancelled. The orchestrator's part (ship, step, the watcher's version calls) is scripted
as prime-rl's `finalize_train_batch` and `WeightWatcher.apply_policy_update` order it.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
import warnings
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rolloutlog.core.presets import FIELD
from rolloutlog.events.log_reader import read_log
from rolloutlog.events.types import EpisodesCancelled, GroupOpened, GroupScored
from rolloutlog.integrations import prime_rl
from rolloutlog.record import Recorder
from rolloutlog.replay.conformance import check_conformance
from rolloutlog.replay.source import open_log

SOURCE = os.environ.get("PRIME_RL_SRC")
if not SOURCE:
    pytest.skip(
        "PRIME_RL_SRC names no prime-rl checkout (the scripted stand-in runs instead)",
        allow_module_level=True,
    )
sys.path[:0] = [f"{SOURCE}/src", f"{SOURCE}/packages/prime-rl-configs/src"]
dispatcher_module = importlib.import_module("prime_rl.orchestrator.dispatcher")
sink_module = importlib.import_module("prime_rl.orchestrator.train_sink")
types_module = importlib.import_module("prime_rl.orchestrator.types")
grpo = importlib.import_module("prime_rl.orchestrator.algo.grpo")
algorithm_configs = importlib.import_module("prime_rl.configs.algorithm")
verifiers = importlib.import_module("verifiers.v1")
agent_configs = importlib.import_module("verifiers.v1.configs.agent")

PRESET = "prime-rl" if "prime-rl" in FIELD else "per-group"
# prime-rl stamps t from its own clock: decisions come microseconds after their cause
TOLERANCE_S = 1.0
GROUP_SIZE = MAX_INFLIGHT = 4  # prime-rl admits at most max(G, limit // 10) a 5 s window
POOL = SimpleNamespace(train_client=None, eval_client=None, model_name="policy")


class ScriptedTask:
    def __init__(self, idx: int) -> None:
        self.data = verifiers.WireTaskData(idx=idx)  # what prime-rl's tasks carry on the wire
        self.key, self.hash = f"task-{idx}", None


class ScriptedEnv:
    """One environment whose every run fails at once."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(group_size=GROUP_SIZE)
        self.generation_source = SimpleNamespace(uses_live_policy=True, pool=POOL)
        self.algorithm = SimpleNamespace(finalize_episode=_nothing, finalize_group=_nothing)
        self.sampling_args = {"temperature": 1.0}

    async def run(self, **request: Any) -> Any:
        raise RuntimeError("scripted environment failure")


class RewardedEnv(ScriptedEnv):
    """One environment whose runs succeed: a prompt node and a sampled answer node, with
    token ids a renderer would have written; rewards 1, 0, 1, 0, ... in dispatch order, so
    every group has a nonzero advantage. prime-rl's GRPO scores the groups."""

    def __init__(self) -> None:
        super().__init__()
        config = algorithm_configs.GRPOAlgoConfig()
        self.algorithm = grpo.GRPOAlgorithm(config, POOL)
        self.runs = 0

    async def run(self, **request: Any) -> Any:
        self.runs += 1
        reward = float(self.runs % 2)
        await asyncio.sleep(0)
        idx = request["task_data"]["idx"]
        task = verifiers.TraceTask(
            type="ScriptedTask", data=verifiers.WireTaskData(idx=idx), key=f"task-{idx}"
        )
        prompt = verifiers.MessageNode(
            message=verifiers.UserMessage(content="q"), token_ids=[1, 2, 3], mask=[False] * 3
        )
        answer = verifiers.MessageNode(
            parent=0,
            message=verifiers.AssistantMessage(content="a"),
            sampled=True,
            token_ids=[4, 5],
            mask=[True, True],
            logprobs=[-0.5, -0.5],
        )
        agent = verifiers.AgentInfo(config=agent_configs.WireAgentConfig())
        trace = verifiers.WireTrace(
            task=task, agent=agent, nodes=[prompt, answer], ok=True, is_completed=True
        )
        trace.record_reward("scripted", reward)
        return verifiers.WireEpisode(
            env=verifiers.EnvInfo(id="scripted"), task=task, ok=True, traces=[trace]
        )


async def _nothing(*args: Any) -> None:
    return None


class Envs:
    def __init__(self, env: ScriptedEnv) -> None:
        self.env = env

    def get(self, name: str) -> ScriptedEnv:
        return self.env

    def __iter__(self) -> Any:
        return iter([self.env])


class Source:
    def __init__(self) -> None:
        self.count = 0

    def next_task(self, *, step: int) -> Any:
        self.count += 1
        return SimpleNamespace(env_name="scripted", task=ScriptedTask(self.count), step=step)


async def drive(
    env: ScriptedEnv, completions: int, bound: int, batch_size: int, trainer_lag: int = 0
) -> None:
    envs, progress = Envs(env), SimpleNamespace(step=1)
    policy = SimpleNamespace(version=0, model_name="policy")
    dispatcher = dispatcher_module.Dispatcher(
        train_envs=envs,
        eval_envs=None,
        train_source=Source(),
        eval_source=None,
        policy_pool=POOL,
        policy=policy,
        progress=progress,
        initial_max_inflight=MAX_INFLIGHT,
        max_inflight_ceiling=None,
        tasks_per_minute=None,
        max_off_policy_steps=bound,
        run_id="scripted",
        run_name=None,
    )
    config = SimpleNamespace(
        max_off_policy_steps=bound, seq_len=64, train=SimpleNamespace(filter_zero_advantages=True)
    )
    sink = sink_module.TrainSink(
        config,
        tokenizer=None,
        train_envs=envs,
        mm_token_type_ids_mapping=None,
        progress=progress,
        batch_size=batch_size,
        token_batch_size=None,
    )

    async def pump() -> None:
        """The orchestrator's loop: each output to the sink; a batch with samples ships,
        the step moves, and the trainer publishes the version `trainer_lag` behind the
        shipped batch (the watcher sets it, then calls `on_version_pending` and
        `on_new_version`; prime-rl's gate and ship hold allow a lag of one)."""
        while not dispatcher.out_q.empty():
            item = dispatcher.out_q.get_nowait()
            if isinstance(item, types_module.GroupCancellation):
                batch = await sink.cancel(item)
            else:
                batch = await sink.add(item)
            if batch is not None and batch.samples:
                progress.step += 1
                if progress.step - 1 - trainer_lag <= policy.version:
                    continue
                policy.version = progress.step - 1 - trainer_lag
                await dispatcher.on_version_pending(policy.version)
                await pump()  # the sink takes the stale cancellations while weights load
                await dispatcher.on_new_version(policy.version)

    await dispatcher.fill_inflight()
    for _ in range(completions):
        while not dispatcher.inflight:  # its loop naps while the admission window is spent
            await asyncio.sleep(0.1)
            await dispatcher.fill_inflight()
        task = next(iter(dispatcher.inflight))  # the oldest run comes back first
        while not task.done():
            await asyncio.sleep(0)
        await dispatcher.handle_completed_episode(task)
        await dispatcher.fill_inflight()  # the dispatch loop refills before the sink runs
        await pump()
        await dispatcher.fill_inflight()  # and at its next wake


def recorded(tmp_path: Path, env: ScriptedEnv, completions: int, **run: int) -> Path:
    path = tmp_path / "prime-rl.arrow"
    recording = prime_rl.Recording(
        lambda config: Recorder(path, config=config, code_version="prime-rl"),
        prime_rl.monotonic_clock(),
    )
    wrapped = prime_rl.instrument(dispatcher_module.Dispatcher, sink_module.TrainSink, recording)
    try:
        asyncio.run(drive(env, completions, **run))
    finally:
        wrapped.restore()
        recording.log().close()
    return path


def test_prime_rls_own_classes_record_a_checkable_log(tmp_path: Path) -> None:
    path = recorded(tmp_path, ScriptedEnv(), 3 * GROUP_SIZE, bound=1, batch_size=64)
    verdict = check_conformance(open_log(path), PRESET, t_tolerance=TOLERANCE_S)
    assert verdict.error is None, verdict.error
    assert verdict.events > 3 * GROUP_SIZE
    found = "conforms" if verdict.nonconformity is None else verdict.nonconformity.describe()
    warnings.warn(f"prime-rl under {PRESET}: {verdict.events} events; {found}", stacklevel=1)
    assert verdict.ok, found


def test_rewarded_runs_ship_batches_advance_versions_and_cancel_stale_groups(
    tmp_path: Path,
) -> None:
    """Under a bound of one and a trainer one version behind, prime-rl scores, ships, voids
    a stale group at `version_pending` and sweeps the stale queue: all of it conforms to
    `prime-rl`, up to the one difference the preset cannot model (docs/policies.md): once
    a stale drop leaves nothing in flight with the admission window spent, prime-rl's
    dispatch loop opens the next group on its own clock, once its 5 s window reopens, with
    no event between for rolloutlog's deciders to react to."""
    path = recorded(tmp_path, RewardedEnv(), 3 * GROUP_SIZE, bound=1, batch_size=2, trainer_lag=1)
    log = read_log(path)
    verdict = check_conformance(open_log(path), PRESET, t_tolerance=TOLERANCE_S)
    assert verdict.error is None, verdict.error
    first = verdict.nonconformity
    checked = log if first is None else log[: first.seq]
    if first is not None:
        warnings.warn(f"prime-rl rewarded under {PRESET}: {first.describe()}", stacklevel=1)
        assert first.rule == "unexpected-decision", first.describe()
        assert isinstance(first.recorded, GroupOpened), first.describe()
        # seconds after the last event, far past the tolerance: its own clock, no reaction
        waited = first.recorded.t - log[first.cause].t
        assert waited > TOLERANCE_S, first.describe()
    kinds = Counter(event.kind for event in checked)
    warnings.warn(f"conforming prefix: {len(checked)} events, {dict(kinds)}", stacklevel=1)
    stale = [e for e in checked if isinstance(e, EpisodesCancelled) and e.reason == "stale"]
    scored = [e for e in checked if isinstance(e, GroupScored) and e.admitted]
    assert kinds["batch_shipped"] >= 2 and kinds["version_pending"] >= 1, kinds
    assert stale and kinds["episode_dropped"] >= 1, kinds
    assert any(a != 0.0 for e in scored for a in e.advantages), scored
