"""Simulated logs whose KV capacity is known: the truth the KV fit (`studies.whatif.kv_fit`)
is held to, by its tests and by `benchmarks/kv_fit.py` alike."""

from __future__ import annotations

from typing import Any, Final

from rolloutlog.events.types import Event
from rolloutlog.runtime.sim.scenario import Scenario, scenario_from_mapping
from rolloutlog.runtime.sim.simulation import simulate

# The shared world of known costs that the fit's tests recover (step 0.02 + 0.002·n,
# 128-token prompts, completions of median 256, a trainer of 10 s + 2e-4 s a token).
KNOWN_WORLD: Final[dict[str, Any]] = {
    "inference": "shared",
    "decode_step_s": 0.02,
    "decode_s_per_seq": 0.002,
    "prompt_tokens": 128,
    "prefill_tokens_per_s": 4000.0,
    "prefix_caching": False,
    "episode_overhead_s": 1.0,
    "task_length_tokens": 256,
    "max_completion_tokens": 2048,
    "train_step_s": 10.0,
    "train_s_per_token": 2e-4,
    "trainer_jitter": 0.0,
    "weight_update_s": 2.0,
}
KNOWN_RUN: Final[dict[str, Any]] = {"group_size": 8, "batch_size": 32}


def truth(capacity: int, max_inflight: int, seed: int, servers: int = 1) -> Scenario:
    """`KNOWN_WORLD` at `capacity` KV tokens per server, the controller moving the limit
    between 20% and 100% of `max_inflight` every 60 s on average (`benchmarks/kv_fit.py`
    runs a wider grid)."""
    world = {
        **KNOWN_WORLD,
        "inference_servers": servers,
        "kv_capacity_tokens": capacity,
        "limit_interval_s": 60.0,
        "limit_min_fraction": 0.2,
    }
    run = {**KNOWN_RUN, "max_inflight": max_inflight}
    return scenario_from_mapping({"steps": 30, "seed": seed, "run": run, "world": world})


def events_of(scenario: Scenario) -> list[Event]:
    """Every event of a simulated run of `scenario`."""
    events: list[Event] = []
    simulate(scenario, on_events=events.extend)
    return events
