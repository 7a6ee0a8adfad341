"""How fast the CPU engine decodes and the trainer steps, to plan the live learning run.

Back of the envelope first. The default model has ~0.33 M parameters, so one token costs
~0.7 MFLOP forward; the engine recomputes whole sequences (no KV cache), ~11 tokens on
average for the digit task, so one decode step of a batch of B costs ~8·B MFLOP. One CPU
core does ~20-50 GFLOP/s on such small matrices, so B = 64 should decode ~8-16 k tokens/s
before Python overhead, and B = 1 is pure overhead (~1 ms per step). A train step on E
episodes of ~13 tokens costs ~3 x 0.7 MFLOP x 13 x E: ~7 GFLOP, ~0.2 s, for E = 256.

Run: `python benchmarks/live_engine.py [--threads 1]`. It prints engine decode throughput
in process and over HTTP (this process's client -> a server process, with the client's
CPU cost per request), then trainer step times.
Wall time is what a run sees; CPU time is less disturbed by other load on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import torch

from rolloutlog.runtime.live.broadcast import WeightBroadcast
from rolloutlog.runtime.live.client import VLLMClient
from rolloutlog.runtime.live.digits import task_from_id
from rolloutlog.runtime.live.model import build_model, parameter_count, save_checkpoint
from rolloutlog.runtime.live.protocol import GenerateRequest, SamplingParams
from rolloutlog.runtime.live.trainer import GRPOTrainer, TrainSample
from rolloutlog.runtime.live.twin.engine import Engine, SamplingSpec
from rolloutlog.runtime.live.twin.launch import ServerProcess

TOKENS_PER_EPISODE = 7  # the longest digit answer (6 digits + EOS)


def engine_tokens_per_s(batch: int, rounds: int) -> tuple[float, float]:
    """Decode `rounds` x `batch` episodes of 7 tokens in process; (wall, cpu) tokens/s."""
    engine = Engine(build_model(seed=0), max_batch=max(batch, 1)).start()
    spec = SamplingSpec(max_tokens=TOKENS_PER_EPISODE, ignore_eos=True, logprobs=0)
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        for round_index in range(rounds):
            requests = [
                engine.submit(f"{round_index}-{i}", task_from_id(f"b{i}").prompt_ids, spec)
                for i in range(batch)
            ]
            for request in requests:
                request.done.wait()
        tokens = rounds * batch * TOKENS_PER_EPISODE
        return tokens / (time.perf_counter() - wall), tokens / (time.process_time() - cpu)
    finally:
        engine.stop()


async def _http_rounds(url: str, batch: int, rounds: int) -> tuple[float, float]:
    client = VLLMClient(url)
    sampling = SamplingParams(max_tokens=TOKENS_PER_EPISODE, ignore_eos=True)
    try:
        started, cpu = time.perf_counter(), time.process_time()
        for round_index in range(rounds):
            await asyncio.gather(
                *(
                    client.generate(
                        GenerateRequest(
                            request_id=f"{round_index}-{i}",
                            token_ids=tuple(task_from_id(f"b{i}").prompt_ids),
                            sampling=sampling,
                        )
                    )
                    for i in range(batch)
                )
            )
        return time.perf_counter() - started, time.process_time() - cpu
    finally:
        await client.aclose()


def http_tokens_per_s(url: str, batch: int, rounds: int) -> tuple[float, float]:
    """The same through the HTTP client and a server process, as a real run has them:
    (wall tokens/s, client CPU ms per request)."""
    elapsed, cpu = asyncio.run(_http_rounds(url, batch, rounds))
    return rounds * batch * TOKENS_PER_EPISODE / elapsed, 1000 * cpu / (rounds * batch)


def trainer_step_s(episodes: int, steps: int, root: Path) -> tuple[float, float]:
    """Mean (wall, cpu) seconds of one train step, publishing included."""
    trainer = GRPOTrainer(build_model(seed=0), WeightBroadcast(root / f"e{episodes}"))
    samples = [
        TrainSample(
            prompt_ids=tuple(task.prompt_ids),
            completion_ids=tuple(task.target_ids),
            inference_logprobs=tuple(-2.7 for _ in task.target_ids),
            advantage=(i % 3) - 1.0,
        )
        for i, task in enumerate(task_from_id(f"t{i}") for i in range(episodes))
    ]
    trainer.train_step(samples)  # warm-up
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        trainer.train_step(samples)
    return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"model: {parameter_count(build_model()):,} parameters; torch threads {args.threads}")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        save_checkpoint(build_model(seed=0), root / "weights")
        server = ServerProcess(root / "weights")
        print("batch | engine tok/s wall | engine tok/s cpu | HTTP tok/s wall | client ms/req")
        try:
            for batch, rounds in ((1, 40), (16, 20), (64, 10), (256, 4)):
                wall, cpu = engine_tokens_per_s(batch, rounds)
                http, client_ms = http_tokens_per_s(server.url, batch, rounds)
                print(
                    f"{batch:5d} | {wall:17,.0f} | {cpu:16,.0f} | {http:15,.0f} | {client_ms:13.2f}"
                )
        finally:
            server.stop()
        print("episodes | train step s (wall) | train step s (cpu)")
        for episodes in (64, 256):
            wall, cpu = trainer_step_s(episodes, 5, root)
            print(f"{episodes:8d} | {wall:19.3f} | {cpu:18.3f}")


if __name__ == "__main__":
    main()
