"""One live training session: model, trainer, inference endpoints, driver; then teardown.

`train_live` is what `rolloutlog train`, the learning benchmark and the end-to-end tests
call. With no `urls` it starts `settings.servers` local CPU servers (processes by default:
each has its own interpreter, so decoding, the driver and the trainer do not share a GIL);
with `urls` it uses running servers (`vllm serve` or CPU ones) through the same client.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from rolloutlog.core.config import RunConfig
from rolloutlog.runtime.live.broadcast import WeightBroadcast
from rolloutlog.runtime.live.client import ClientLimits, VLLMClient
from rolloutlog.runtime.live.driver import DriverOptions, LiveDriver, RunOutputs
from rolloutlog.runtime.live.endpoints import EndpointPool
from rolloutlog.runtime.live.model import (
    LlamaForCausalLM,
    ModelConfig,
    build_model,
    save_checkpoint,
)
from rolloutlog.runtime.live.reports import LiveResult
from rolloutlog.runtime.live.resume import ResumePoint
from rolloutlog.runtime.live.settings import LiveSettings
from rolloutlog.runtime.live.trainer import GRPOTrainer, TrainerConfig
from rolloutlog.runtime.live.twin.launch import server_processes, server_threads
from rolloutlog.runtime.live.vllm_launch import VLLMProcess, vllm_servers

HEAD_DIM = 32
BROADCAST_KEEP = 3


def initial_model(settings: LiveSettings, seed: int) -> LlamaForCausalLM:
    """The v0 policy of a run: the architecture of `settings`, initialised from `seed`."""
    config = ModelConfig(
        hidden_size=settings.hidden_size,
        intermediate_size=2 * settings.hidden_size,
        num_hidden_layers=settings.layers,
        num_attention_heads=settings.hidden_size // HEAD_DIM,
        num_key_value_heads=settings.hidden_size // HEAD_DIM,
    )
    return build_model(config, seed=seed)


def save_initial(settings: LiveSettings, seed: int, directory: Path) -> Path:
    """Write the v0 checkpoint that an external server (`vllm serve DIR`) starts from."""
    save_checkpoint(initial_model(settings, seed), directory)
    return directory


@contextlib.contextmanager
def vllm_from_v0(
    command: Sequence[str], settings: LiveSettings, directory: Path, start_timeout_s: float = 300.0
) -> Iterator[list[VLLMProcess]]:
    """`settings.servers` `vllm serve` processes for runs of `settings`' architecture, started
    once for many runs: from a v0 checkpoint written in `directory` (the driver makes its own
    run's v0 live at start, so any seed will do), their output there too; stopped on exit."""
    initial = save_initial(settings, 0, directory / "initial")
    with vllm_servers(
        command, initial, settings.servers, log_dir=directory, start_timeout_s=start_timeout_s
    ) as servers:
        yield servers


def train_config(settings: LiveSettings) -> TrainerConfig:
    """The trainer's knobs among the live settings."""
    return TrainerConfig(
        learning_rate=settings.learning_rate,
        clip_epsilon=settings.clip_epsilon,
        entropy_coefficient=settings.entropy_coefficient,
        is_correction=settings.is_correction,
        is_cap=settings.is_cap,
        is_band=(settings.is_band_low, settings.is_band_high),
        is_decoupled_cap=settings.is_decoupled_cap,
        minibatches=settings.minibatches,
    )


@contextlib.contextmanager
def local_servers(settings: LiveSettings, weights_dir: Path, seed: int) -> Iterator[list[str]]:
    """Start `settings.servers` CPU servers on loopback; their urls, stopped on exit."""
    count, min_step_s = settings.servers, settings.server_min_step_s
    if settings.server_mode == "thread":
        with server_threads(weights_dir, count, seed=seed, min_step_s=min_step_s) as threads:
            yield [server.url for server in threads]
    else:
        with server_processes(
            weights_dir, count, seed=seed, threads=settings.server_threads, min_step_s=min_step_s
        ) as processes:
            yield [server.url for server in processes]


@contextlib.contextmanager
def _weights_root(weights_dir: Path | None) -> Iterator[Path]:
    if weights_dir is not None:
        weights_dir.mkdir(parents=True, exist_ok=True)
        yield weights_dir
        return
    with tempfile.TemporaryDirectory(prefix="rolloutlog-weights-") as scratch:
        yield Path(scratch)


@contextlib.contextmanager
def _torch_threads(count: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


async def train_live(
    config: RunConfig,
    settings: LiveSettings,
    *,
    steps: int,
    seed: int,
    urls: Sequence[str] = (),
    weights_dir: Path | None = None,
    outputs: RunOutputs | None = None,
    client_limits: ClientLimits | None = None,
    resume: ResumePoint | None = None,
    run_id: str | None = None,
) -> LiveResult:
    """Train for `steps` shipped batches (or until a fault); see the module docstring.

    `weights_dir` holds the broadcast (`v<k>/`): external servers must be able to read it.
    Without one, a temporary directory is used and removed afterwards. `outputs` says where
    the run's facts go (`outputs.store` keeps the rollouts a resume needs); `resume` is a
    crashed run's log folded against `weights_dir` (`resume.prepare`, done before anything
    is opened for writing), and the trainer restarts from the checkpoint it names. Every
    checkpoint's READY names `run_id`, which a resume checks.
    """
    limits = client_limits or ClientLimits(generate_timeout_s=settings.generate_timeout_s)
    options = DriverOptions(
        steps=steps,
        seed=seed,
        temperature=settings.temperature,
        hard_task_share=settings.hard_task_share,
        publish_attempts=settings.publish_attempts,
        check_invariants=settings.check_invariants,
        endpoint_wait_s=settings.endpoint_wait_s,
        eval_every=settings.eval_every,
        eval_tasks=settings.eval_tasks,
    )
    trainer_config = train_config(settings)
    with _weights_root(weights_dir) as root, _torch_threads(settings.trainer_threads):
        model = initial_model(settings, seed)
        broadcast = WeightBroadcast(root, keep=BROADCAST_KEEP, run_id=run_id)
        trainer = GRPOTrainer(model, broadcast, trainer_config)
        if resume is not None:
            trainer.restore(resume.checkpoint)
        with contextlib.ExitStack() as stack:
            if not urls:
                save_checkpoint(model, root / "initial")
                urls = stack.enter_context(local_servers(settings, root / "initial", seed))
            pool = EndpointPool([VLLMClient(url, limits=limits) for url in urls])
            driver = LiveDriver(
                config,
                pool=pool,
                trainer=trainer,
                options=options,
                outputs=outputs,
                resume=resume,
            )
            try:
                return await driver.run()
            finally:
                await pool.aclose()
