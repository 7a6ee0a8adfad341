"""prime-rl's own `Dispatcher` and `TrainSink`, driven on CPU with scripted environments and
recorded by `rolloutlog.integrations.prime_rl`: the log is checked by `verify --policy`.

Runs only where PRIME_RL_SRC names a prime-rl checkout whose imports resolve (prime-rl asks
for Python 3.12, verifiers, torch, aiolimiter, msgspec, wandb, ...: docs/foreign-runs.md
says which set it was last run with); elsewhere it is skipped, and the scripted stand-in
of test_prime_rl_recorder.py runs in its place. Every scripted run fails in its
environment (a failed episode needs no tokens, so no renderer or tokenizer is involved):
prime-rl dispatches, refills, finalizes each group as unscored and never ships.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rolloutlog.core.presets import FIELD
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
verifiers = importlib.import_module("verifiers.v1")

PRESET = "prime-rl" if "prime-rl" in FIELD else "per-group"
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


async def _nothing(*args: Any) -> None:
    return None


class Envs:
    def __init__(self) -> None:
        self.env = ScriptedEnv()

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


async def drive(completions: int) -> None:
    envs, progress = Envs(), SimpleNamespace(step=1)
    dispatcher = dispatcher_module.Dispatcher(
        train_envs=envs,
        eval_envs=None,
        train_source=Source(),
        eval_source=None,
        policy_pool=POOL,
        policy=SimpleNamespace(version=0, model_name="policy"),
        progress=progress,
        initial_max_inflight=MAX_INFLIGHT,
        max_inflight_ceiling=None,
        tasks_per_minute=None,
        max_off_policy_steps=1,
        run_id="scripted",
        run_name=None,
    )
    config = SimpleNamespace(
        max_off_policy_steps=1, seq_len=64, train=SimpleNamespace(filter_zero_advantages=True)
    )
    sink = sink_module.TrainSink(
        config,
        tokenizer=None,
        train_envs=envs,
        mm_token_type_ids_mapping=None,
        progress=progress,
        batch_size=64,
        token_batch_size=None,
    )
    await dispatcher.fill_inflight()
    for _ in range(completions):
        task = next(iter(dispatcher.inflight))  # the oldest run comes back first
        while not task.done():
            await asyncio.sleep(0)
        await dispatcher.handle_completed_episode(task)
        while not dispatcher.out_q.empty():
            item = dispatcher.out_q.get_nowait()
            if isinstance(item, types_module.GroupCancellation):
                await sink.cancel(item)
            else:
                await sink.add(item)
        await dispatcher.fill_inflight()


def test_prime_rls_own_classes_record_a_checkable_log(tmp_path: Path) -> None:
    path = tmp_path / "prime-rl.arrow"
    recording = prime_rl.Recording(
        lambda config: Recorder(path, config=config, code_version="prime-rl"),
        prime_rl.monotonic_clock(),
    )
    wrapped = prime_rl.instrument(dispatcher_module.Dispatcher, sink_module.TrainSink, recording)
    try:
        asyncio.run(drive(completions=3 * GROUP_SIZE))
    finally:
        wrapped.restore()
        recording.log().close()
    # prime-rl stamps t from its own clock: decisions come microseconds after their cause
    verdict = check_conformance(open_log(path), PRESET, t_tolerance=1.0)
    assert verdict.error is None, verdict.error
    assert verdict.events > 3 * GROUP_SIZE
    found = "conforms" if verdict.nonconformity is None else verdict.nonconformity.describe()
    warnings.warn(f"prime-rl under {PRESET}: {verdict.events} events; {found}", stacklevel=1)
    assert verdict.ok, found
