"""Derive the GPU scenarios' decode and prefill curves from Vidur's published profiling.

    git clone https://github.com/microsoft/vidur && git -C vidur checkout 7d47513
    .venv/bin/python benchmarks/vidur_curves.py vidur

Vidur (MIT, MLSys 2024) profiles every operator of a transformer layer on real GPUs against
the number of tokens in the batch: `data/profiling/compute/<gpu>/<model>/mlp.csv` holds,
per `num_tokens`, the median milliseconds of the QKV and output projections, RoPE, the
norms, the MLP's up, activation and down projections and the residual adds. One layer's
time is their sum (Vidur's `ExecutionTime._get_block_execution_time`, less attention and
communication at one GPU), a step's is `layers` times it. From it:

- `decode_step_s` (a) and the linear part of `decode_s_per_seq` (b): least squares of
  `a + b·n` over the memory-bound batches, n <= 128;
- `decode_compute_s_per_seq` (c) and the prefill: the compute-bound seconds per token,
  the mean of time/n over n >= 1024 (`prefill_tokens_per_s = 1/c`).

Vidur's attention tables (`attention.csv`) were not in the snapshot read, so the attention
part of `b` is a roofline estimate printed beside: a decoding sequence reads its KV cache
once per step, `context · kv_bytes_per_token / HBM bandwidth`. The scenarios use it at
the context stated in their comments. Nothing here runs at simulate time: the numbers are
copied into `rolloutlog/runtime/sim/scenarios/gpu-*.toml`.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

OPS = (
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "input_layernorm",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
    "add",  # two residual adds per layer
)
# (gpu, model folder, layers, KV bytes per token, HBM bytes per second)
MODELS = (
    ("h100", "meta-llama/Llama-2-7b-hf", 32, 2 * 32 * 4096 * 2, 3.35e12),
    ("a100", "meta-llama/Llama-2-7b-hf", 32, 2 * 32 * 4096 * 2, 2.04e12),
    ("a100", "meta-llama/Meta-Llama-3-8B", 32, 2 * 32 * 8 * 128 * 2, 2.04e12),
)
MEMORY_BOUND_MAX = 128
COMPUTE_BOUND_MIN = 1024


def step_ms(path: Path, layers: int) -> dict[int, float]:
    """Milliseconds of one step's linear operators per `num_tokens`, at one GPU."""
    steps: dict[int, float] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if int(row["num_tensor_parallel_workers"]) == 1:
                layer = sum(float(row[f"time_stats.{op}.median"]) for op in OPS)
                steps[int(row["num_tokens"])] = layers * layer
    return steps


def fit(steps: dict[int, float]) -> tuple[float, float, float]:
    """(a, b, c) in seconds: `a + b·n` over the memory-bound batches, c per compute-bound token."""
    small = [(n, ms) for n, ms in sorted(steps.items()) if n <= MEMORY_BOUND_MAX]
    slope, intercept = statistics.linear_regression([n for n, _ in small], [ms for _, ms in small])
    large = [ms / n for n, ms in steps.items() if n >= COMPUTE_BOUND_MIN]
    return intercept / 1e3, slope / 1e3, statistics.fmean(large) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vidur", type=Path, help="a checkout of microsoft/vidur")
    args = parser.parse_args()
    for gpu, model, layers, kv_bytes, bandwidth in MODELS:
        path = args.vidur / "data/profiling/compute" / gpu / model / "mlp.csv"
        a, b, c = fit(step_ms(path, layers))
        attention_s = kv_bytes / bandwidth  # per token of context, per step
        print(
            f"{gpu} {model}: decode_step_s={a:.6f} linear b={b:.3e} s/seq "
            f"decode_compute_s_per_seq={c:.3e} prefill_tokens_per_s={1 / c:,.0f} "
            f"attention {attention_s:.3e} s per context token per step"
        )


if __name__ == "__main__":
    main()
