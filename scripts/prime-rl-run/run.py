"""Make a prime-rl output folder with prime-rl's own code, on CPU, in about a minute.

    PRIME_RL=CHECKOUT VENV/bin/python scripts/prime-rl-run/run.py OUT [--record LOG]

CHECKOUT is a prime-rl checkout (read at 559b447); VENV has its orchestrator's imports
(docs/foreign-runs.md says which). What runs is prime-rl's: its launcher's `--dry-run`
writes the configs from `rl.toml`, and its `orchestrator.main()` runs unmodified (its
dispatcher, sinks, watcher, concurrency controller, file monitor and filesystem rollout
transport), except for what cannot run here:

- `prime_rl.trainer.model` (imported for `setup_tokenizer` only, it pulls in the GPU
  trainer's kernels) is a stub whose `setup_tokenizer` builds a char-level tokenizer
  locally, and the GPU weight broadcasters' package `__init__`s are empty;
- inference is a fake server on loopback (`/health`, `/v1/models`, `/pause`, `/resume`,
  `/update_weights`, `/metrics`, `/inference/v1/generate`) that answers each generation
  after a seeded delay;
- the environment server is not run: verifiers' `EnvClient` in prime-rl's `envs` module
  is a stand-in that asks the fake inference for a reply and returns a verifiers episode
  for the `reverse_chars` taskset here (a reward per matching character; one run in 20
  fails, answered as an env server answers a failed run: `ok` false, no trace);
- the trainer is a thread that waits for `rollouts/step_N/rank_0.bin`, sleeps
  `TRAIN_S`, writes `broadcasts/step_N/STABLE` and its timing row (prime-rl's file monitor).

The orchestrator runs in its own process, its output in `logs/attempt_1/orchestrator.log`,
as prime-rl's launcher runs it.

With `--record LOG`, `rolloutlog.integrations.prime_rl.enable()` records the run live
into LOG (rolloutlog must be importable: its checkout on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TRAIN_S = 2.5  # the fake trainer's step
GENERATE_S = (0.3, 3.0)  # the fake inference's delay per generation, uniform
FAIL_EVERY = 20  # the stand-in environment fails one run in this many (seeded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the folder to write (must not exist)")
    parser.add_argument("--record", type=Path, help="record the run live into this log")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--orchestrator", metavar="URL", help=argparse.SUPPRESS)  # the child
    args = parser.parse_args()
    checkout = Path(os.environ.get("PRIME_RL") or sys.exit("PRIME_RL names no prime-rl checkout"))
    sys.path[:0] = [str(HERE), f"{checkout}/src", f"{checkout}/packages/prime-rl-configs/src"]
    os.environ.setdefault("PRIME_LOG_LEVEL", "debug")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model name is made up: no look-up
    if args.orchestrator is not None:
        orchestrate(args.out, args.orchestrator, args.record, args.seed)
        return
    run_dir = write_configs(args.out)
    port = serve_inference(random.Random(args.seed))
    threading.Thread(target=train, args=(run_dir,), daemon=True).start()
    sys.exit(launch(run_dir, f"http://127.0.0.1:{port}", args))


def launch(run_dir: Path, inference: str, args: argparse.Namespace) -> int:
    """The orchestrator in its own process, its output in `logs/attempt_1/orchestrator.log`
    as prime-rl's launcher writes it (colored, `LOGURU_FORCE_COLORS=1`)."""
    from prime_rl.utils.pathing import create_attempt_log_dir

    log_dir = create_attempt_log_dir(run_dir)
    command = [sys.executable, __file__, str(run_dir), "--orchestrator", inference]
    command += ["--seed", str(args.seed)]
    if args.record is not None:
        command += ["--record", str(args.record)]
    with open(log_dir / "orchestrator.log", "w") as log:
        env = {**os.environ, "LOGURU_FORCE_COLORS": "1"}
        code = subprocess.run(command, stdout=log, stderr=log, env=env, check=False).returncode
    print(run_dir)
    return code


def orchestrate(run_dir: Path, inference: str, record: Path | None, seed: int) -> None:
    """prime-rl's `orchestrator.main()`, after the stubs and the environment stand-in."""
    stub_gpu_modules()
    stand_in_environment(random.Random(seed + 1), inference)
    if record is not None:
        os.environ["ROLLOUTLOG_PRIME_RL_LOG"] = str(record)
        from rolloutlog.integrations import prime_rl

        if prime_rl.enable() is None:
            sys.exit("rolloutlog could not wrap prime-rl's orchestrator")
    from prime_rl.orchestrator import orchestrator

    config = run_dir / "configs" / "orchestrator.json"
    sys.argv = ["orchestrator", "@", str(config), "--model.client.base-url", f"{inference}/v1"]
    orchestrator.main()


def write_configs(out: Path) -> Path:
    """prime-rl's launcher, `rl @ rl.toml --dry-run`: the run folder with its configs."""
    from prime_rl.entrypoints import rl

    saved = sys.argv
    sys.argv = ["rl", "@", str(HERE / "rl.toml"), "--dry-run", "--output-dir", str(out)]
    try:
        rl.main()
    finally:
        sys.argv = saved
    (run_dir,) = out.iterdir()
    return run_dir


def stub_gpu_modules() -> None:
    """What the orchestrator imports but cannot load without GPU packages."""
    import prime_rl

    model = types.ModuleType("prime_rl.trainer.model")
    model.setup_tokenizer = lambda config: char_tokenizer()  # type: ignore[attr-defined]
    sys.modules[model.__name__] = model
    root = Path(prime_rl.__path__[0])
    for name in ("prime_rl.transports.weights", "prime_rl.transports.weights.nixl"):
        package = types.ModuleType(name)
        package.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
        sys.modules[name] = package


def char_tokenizer() -> Any:
    """A tokenizer of single characters, built here (nothing is downloaded)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = ["<pad>", "<eos>", *"abcdefghijklmnopqrstuvwxyz<>/_: \n"]
    core = Tokenizer(models.WordLevel({c: i for i, c in enumerate(chars)}, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>")
    tokenizer.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    return tokenizer


def serve_inference(rng: random.Random) -> int:
    """The fake inference server on loopback, in its own thread; returns its port."""
    from aiohttp import web

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({})

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "char-reverse", "max_model_len": 256}]})

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text="vllm:num_requests_running 0.0\nvllm:num_requests_waiting 0.0\n")

    async def generate(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(rng.uniform(*GENERATE_S))
        n = int(body.get("max_tokens") or 4)
        token_ids = [rng.randrange(2, 28) for _ in range(n)]
        logprobs = [{"token": f"token_id:{t}", "logprob": -1.0} for t in token_ids]
        return web.json_response({"token_ids": token_ids, "logprobs": logprobs})

    app = web.Application()
    app.router.add_get("/health", ok)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    for path in ("/pause", "/resume", "/update_weights"):
        app.router.add_post(path, ok)
    app.router.add_post("/inference/v1/generate", generate)
    ready: list[int] = []

    def serve() -> None:
        loop = asyncio.new_event_loop()
        runner = web.AppRunner(app)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        ready.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        loop.run_forever()

    threading.Thread(target=serve, daemon=True).start()
    while not ready:
        time.sleep(0.01)
    return ready[0]


def train(run_dir: Path) -> None:
    """The fake trainer: publishes v0, then v_N `TRAIN_S` after batch N arrived, and writes
    its timing row for step N through prime-rl's file monitor into the shared
    `metrics.jsonl`, as its trainer does in a default launch."""
    from prime_rl.configs.monitors import FileMonitorConfig
    from prime_rl.monitors.file import FileMonitor

    monitor = FileMonitor(FileMonitorConfig())
    asyncio.run(monitor.init(run_dir))
    broadcasts, rollouts = run_dir / "broadcasts", run_dir / "rollouts"
    step, published = 0, time.perf_counter()
    while True:
        if step > 0:
            while not (rollouts / f"step_{step}" / "rank_0.bin").exists():
                time.sleep(0.05)
            waited = time.perf_counter() - published
            time.sleep(TRAIN_S)
        (broadcasts / f"step_{step}").mkdir(parents=True, exist_ok=True)
        (broadcasts / f"step_{step}" / "STABLE").touch()
        if step > 0:
            timing = {"time/step": time.perf_counter() - published, "time/wait_for_batch": waited}
            timing |= {"time/forward_backward": TRAIN_S, "time/broadcast_weights": 0.0}
            asyncio.run(monitor.log_metrics(timing, step=step))
        published = time.perf_counter()
        step += 1


def stand_in_environment(rng: random.Random, inference: str) -> None:
    """verifiers' `EnvClient`, as prime-rl's `envs` module sees it, replaced by one that
    runs each episode here against the fake inference."""
    import httpx
    import verifiers.v1 as vf
    from prime_rl.orchestrator import envs

    class StandInEnvClient:
        def __init__(self, address: str) -> None:
            self.address = address

        async def wait_for_server_startup(self, timeout: float | None = None) -> None:
            return None

        async def close(self) -> None:
            return None

        async def run(self, *, task_data: dict, client: Any, model: str, sampling: Any) -> Any:
            start = time.time()
            if rng.randrange(FAIL_EVERY) == 0:  # as an env server answers a failed run
                return failed_episode(vf, task_data)
            prompt = [ord(c) - ord("a") + 2 for c in task_data["prompt"]]
            async with httpx.AsyncClient(base_url=inference, timeout=60) as http:
                reply = await http.post(
                    "/inference/v1/generate",
                    json={"prompt_token_ids": prompt, "max_tokens": len(prompt)},
                )
            token_ids = reply.json()["token_ids"]
            return episode(vf, task_data, prompt, token_ids, start)

    envs.EnvClient = StandInEnvClient  # type: ignore[attr-defined,misc]


def trace_task(vf: Any, task_data: dict) -> Any:
    """The task as the env server echoes it (prime-rl checks its key and hash)."""
    from reverse_chars import ReverseData, ReverseTask

    task = ReverseTask(ReverseData(**task_data), vf.TasksetConfig().task)
    data = vf.WireTaskData(**task_data)
    return vf.TraceTask(type="ReverseTask", data=data, key=task.key, hash=task.hash)


def failed_episode(vf: Any, task_data: dict) -> Any:
    error = vf.Error(type="SandboxError", message="stand-in environment: the sandbox did not start")
    return vf.WireEpisode(
        env=vf.EnvInfo(id="reverse"), task=trace_task(vf, task_data), ok=False, errors=[error]
    )


def episode(vf: Any, task_data: dict, prompt: list[int], reply: list[int], start: float) -> Any:
    """One verifiers episode of one trace: the prompt node, the sampled reply node, its
    model call's usage and times, and its reward (the share of characters reversed)."""
    task = trace_task(vf, task_data)
    answer = "".join(chr(t - 2 + ord("a")) for t in reply)
    nodes = [
        vf.MessageNode(
            message=vf.UserMessage(content=task_data["prompt"]),
            token_ids=prompt,
            mask=[False] * len(prompt),
        ),
        vf.MessageNode(
            parent=0,
            message=vf.AssistantMessage(content=answer),
            sampled=True,
            token_ids=reply,
            mask=[True] * len(reply),
            logprobs=[-1.0] * len(reply),
        ),
    ]
    end = time.time()
    usage = vf.Usage(prompt_tokens=len(prompt), completion_tokens=len(reply))
    call = vf.ModelCall(
        node=1, usage=usage, time=vf.TimeSpan(start=start, end=end), finish_reason="stop"
    )
    agent = vf.AgentInfo(config=vf.configs.agent.WireAgentConfig())
    trace = vf.WireTrace(
        task=task, agent=agent, nodes=nodes, calls=[call], ok=True, is_completed=True
    )
    trace.timing.start = start
    trace.timing.agent.start, trace.timing.agent.end = start, end
    matched = sum(a == b for a, b in zip(answer, task_data["answer"], strict=False))
    trace.record_reward("reversed", matched / len(task_data["answer"]))
    return vf.WireEpisode(env=vf.EnvInfo(id="reverse"), task=task, ok=True, traces=[trace])


if __name__ == "__main__":
    main()
