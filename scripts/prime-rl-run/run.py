"""Make a prime-rl output folder with prime-rl's own code, on CPU, in a few minutes.

    PRIME_RL=CHECKOUT VENV/bin/python scripts/prime-rl-run/run.py OUT [--record LOG]

CHECKOUT is a prime-rl checkout (read at 559b447); VENV has its orchestrator's and env
server's imports and `uv` (docs/foreign-runs.md says which). What runs is prime-rl's: its
launcher's `--dry-run` writes the configs from `rl.toml`; its env server (`env-server @
configs/envs/train/reverse.json`) runs unmodified, verifiers' `null` harness running each
episode's program through `uv` in a local subprocess runtime (its packages as of
`PROGRAM_PACKAGES_BEFORE`, by `UV_EXCLUDE_NEWER`: `openai` 2.38.0, prime-rl's locked
version); and its `orchestrator.main()` runs unmodified (its dispatcher, sinks, watcher,
concurrency controller, file monitor and filesystem rollout transport). Replaced is only
what cannot run here:

- `prime_rl.trainer.model` (imported for `setup_tokenizer` only, it pulls in the GPU
  trainer's kernels) is a stub whose `setup_tokenizer` builds a char-level tokenizer
  locally, and the GPU weight broadcasters' package `__init__`s are empty; the env server's
  renderer loads the same tokenizer from a folder `char-reverse/` in its working directory
  (the model's name), so nothing is downloaded;
- inference is a fake server on loopback (`/health`, `/v1/models`, `/pause`, `/resume`,
  `/update_weights`, `/metrics`, `/inference/v1/generate`) that answers each generation
  after a seeded delay (one in `STRAGGLE_EVERY` a straggler, so that groups go stale) with
  the prompt's word reversed, each character wrong with a seeded chance; one generation in
  `FAIL_EVERY` is refused (HTTP 400: the episode fails as verifiers fails it);
- the trainer is a thread that waits for `rollouts/step_N/rank_0.bin`, sleeps
  `TRAIN_S`, writes `broadcasts/step_N/STABLE` and its timing row (prime-rl's file monitor).

The env server and the orchestrator run in their own processes, their output in
`logs/attempt_1/envs/train/reverse.log` and `logs/attempt_1/orchestrator.log`, as prime-rl's
launcher runs them.

With `--record LOG`, `rolloutlog.integrations.prime_rl.enable()` records the run live
into LOG (rolloutlog must be importable: its checkout on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TRAIN_S = 2.5  # the fake trainer's step
GENERATE_S = (0.3, 3.0)  # the fake inference's delay per generation, uniform
STRAGGLE_EVERY, STRAGGLE_S = 8, (40.0, 80.0)  # one in 8 takes this long: its group goes stale
WRONG_CHAR = 0.4  # the fake inference's chance to get a character of the reversal wrong
FAIL_EVERY = 20  # the fake inference fails one generation in this many (seeded)
LETTERS = "abcdefghijklmnopqrstuvwxyz"
CHARS = ["<pad>", "<eos>", *LETTERS, *"<>/_: \n"]  # the char-level tokenizer's vocabulary
# The null harness program's packages as of this date: openai 2.38.0, prime-rl's locked
# version (the latest, on httpx2, rejects the httpx timeout verifiers' program gives it).
PROGRAM_PACKAGES_BEFORE = "2026-06-01T00:00:00Z"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the folder to write (must not exist)")
    parser.add_argument("--record", type=Path, help="record the run live into this log")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--orchestrator", metavar="URL", help=argparse.SUPPRESS)  # the child
    parser.add_argument("--env-server", action="store_true", help=argparse.SUPPRESS)  # the child
    args = parser.parse_args()
    checkout = Path(os.environ.get("PRIME_RL") or sys.exit("PRIME_RL names no prime-rl checkout"))
    sys.path[:0] = [str(HERE), f"{checkout}/src", f"{checkout}/packages/prime-rl-configs/src"]
    os.environ.setdefault("PRIME_LOG_LEVEL", "debug")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model name is made up: no look-up
    if args.env_server:
        serve_environment(args.out)
        return
    if args.orchestrator is not None:
        orchestrate(args.out, args.orchestrator, args.record)
        return
    run_dir = write_configs(args.out, free_port())
    port = serve_inference(random.Random(args.seed))
    threading.Thread(target=train, args=(run_dir,), daemon=True).start()
    sys.exit(launch(run_dir, f"http://127.0.0.1:{port}", args))


def free_port() -> int:
    """A loopback port free now, for the env server (prime-rl's default, 5000, may be taken)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def launch(run_dir: Path, inference: str, args: argparse.Namespace) -> int:
    """The env server and the orchestrator in their own processes, their output in
    `logs/attempt_1/` as prime-rl's launcher writes it (the orchestrator's colored,
    `LOGURU_FORCE_COLORS=1`)."""
    from prime_rl.utils.pathing import create_attempt_log_dir

    log_dir = create_attempt_log_dir(run_dir)
    env_log = log_dir / "envs" / "train" / "reverse.log"
    env_log.parent.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as home, open(env_log, "w") as log:
        char_tokenizer().save_pretrained(Path(home) / "char-reverse")
        # uv's own cache here: a script environment cached elsewhere may hold newer packages
        env = {**os.environ, "UV_EXCLUDE_NEWER": PROGRAM_PACKAGES_BEFORE}
        env["UV_CACHE_DIR"] = f"{home}/uv-cache"
        env["PYTHONPATH"] = os.pathsep.join([*sys.path[:3], env.get("PYTHONPATH", "")])
        config = run_dir / "configs" / "envs" / "train" / "reverse.json"
        command = [sys.executable, __file__, str(config), "--env-server"]
        server = subprocess.Popen(command, stdout=log, stderr=log, env=env, cwd=home)
        try:
            code = orchestrate_process(run_dir, inference, args, log_dir)
        finally:
            stop(server)
    print(run_dir)
    return code


def stop(server: subprocess.Popen[bytes]) -> None:
    """The env server stopped: SIGTERM, then SIGKILL if it hangs past a minute."""
    server.terminate()
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def orchestrate_process(
    run_dir: Path, inference: str, args: argparse.Namespace, log_dir: Path
) -> int:
    command = [sys.executable, __file__, str(run_dir), "--orchestrator", inference]
    if args.record is not None:
        command += ["--record", str(args.record)]
    with open(log_dir / "orchestrator.log", "w") as log:
        env = {**os.environ, "LOGURU_FORCE_COLORS": "1"}
        return subprocess.run(command, stdout=log, stderr=log, env=env, check=False).returncode


def serve_environment(config: Path) -> None:
    """prime-rl's env server, `env-server @ CONFIG`, unmodified."""
    from prime_rl.entrypoints import env_server

    sys.argv = ["env-server", "@", str(config)]
    env_server.main()


def orchestrate(run_dir: Path, inference: str, record: Path | None) -> None:
    """prime-rl's `orchestrator.main()`, after the stubs."""
    stub_gpu_modules()
    if record is not None:
        os.environ["ROLLOUTLOG_PRIME_RL_LOG"] = str(record)
        from rolloutlog.integrations import prime_rl

        if prime_rl.enable() is None:
            sys.exit("rolloutlog could not wrap prime-rl's orchestrator")
    from prime_rl.orchestrator import orchestrator

    config = run_dir / "configs" / "orchestrator.json"
    sys.argv = ["orchestrator", "@", str(config), "--model.client.base-url", f"{inference}/v1"]
    orchestrator.main()


def write_configs(out: Path, env_port: int) -> Path:
    """prime-rl's launcher, `rl @ rl.toml --dry-run`: the run folder with its configs."""
    from prime_rl.entrypoints import rl

    saved = sys.argv
    sys.argv = ["rl", "@", str(HERE / "rl.toml"), "--dry-run", "--output-dir", str(out)]
    sys.argv += ["--orchestrator.env-server-base-port", str(env_port)]
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
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({c: i for i, c in enumerate(CHARS)}, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    core.decoder = decoders.Fuse()  # characters joined as they are, no spaces between
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
        """vLLM's token-in/token-out generate, as verifiers' renderer client reads it."""
        body = await request.json()
        slow = rng.randrange(STRAGGLE_EVERY) == 0
        await asyncio.sleep(rng.uniform(*(STRAGGLE_S if slow else GENERATE_S)))
        if rng.randrange(FAIL_EVERY) == 0:  # a 4xx: the client does not retry it
            return web.json_response({"error": "fake inference: refused"}, status=400)
        prompt = body["token_ids"]
        token_ids = [*reply(prompt, rng), CHARS.index("<eos>")]
        logprobs = [{"token": f"token_id:{t}", "logprob": -1.0} for t in token_ids]
        choice = {"token_ids": token_ids, "logprobs": {"content": logprobs}}
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(token_ids)}
        choice["finish_reason"] = "stop"
        return web.json_response({"choices": [choice], "prompt_token_ids": prompt, "usage": usage})

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


def reply(prompt: list[int], rng: random.Random) -> list[int]:
    """The prompt's last user word reversed, each character wrong with `WRONG_CHAR`."""
    text = "".join(CHARS[t] for t in prompt if 0 <= t < len(CHARS))
    word = text.rpartition("<user>")[2].partition("<")[0]
    letters = [c if rng.random() >= WRONG_CHAR else rng.choice(LETTERS) for c in word[::-1]]
    return [CHARS.index(c) for c in letters or rng.choice(LETTERS)]


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


if __name__ == "__main__":
    main()
