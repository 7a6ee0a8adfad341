"""Work in flight at a weight update: `freeze`, `interrupt`, `drain` and `recycle` under
`per-episode`, on several scenarios and seeds.

For each scenario, the four ways run on the same seeded worlds (the invariant checker on
every event; a violation stops the benchmark) and print as one markdown table, one row per
way, ready to paste into benchmarks/RESULTS.md: trained episodes per hour (mean and range
over seeds), then on the mean over seeds the trainer's idle share, the rollout time wasted,
the episodes dropped as stale, the mean trained age, the partial ratio (trained episodes
that span more than one version), the largest version span, and the prefill seconds of
the resumptions (their prompt and tokens so far at the world's `prefill_tokens_per_s`:
engine time, however the world queues it). Progress goes to stderr, one line per way and
scenario. Figures only: nothing here asserts.

    .venv/bin/python benchmarks/partial.py [--seeds 5] [--steps 100] [--scenarios A,B,...]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from typing import Any

from policies import COLUMNS as POLICY_COLUMNS
from policies import Progress, Runs, measure_rows, over_seeds, ranged

from rolloutlog.cli.output import duration, per_unit, rate_unit
from rolloutlog.events.types import EpisodeInterrupted, EpisodeResumed, Event
from rolloutlog.runtime.sim.scenario import Scenario

SCENARIOS = ("default", "long-gen", "long-tail", "slow-update")
WAYS = {  # the row's name -> the preset it runs
    "freeze": "per-episode",
    "interrupt": "per-episode+interrupt",
    "drain": "per-episode+drain",
    "recycle": "per-episode+recycle",
}


def prefill_seconds(world: Scenario, events: Sequence[Event]) -> dict[str, Any]:
    """The resumptions' prefill: each re-reads its prompt and the tokens it had when it
    was interrupted (the seeded world's prompts are all `prompt_tokens` long)."""
    so_far: dict[str, int] = {}
    tokens = 0
    for event in events:
        if isinstance(event, EpisodeInterrupted):
            so_far[event.episode_id] = event.completion_tokens
        elif isinstance(event, EpisodeResumed):
            tokens += world.world.prompt_tokens + so_far[event.episode_id]
    return {"prefill_seconds": tokens / world.world.prefill_tokens_per_s}


SHOWN = dict(POLICY_COLUMNS)
COLUMNS = (  # after trained/h (ranged over seeds): (header, figure of the mean report)
    ("idle", SHOWN["idle"]),
    ("wasted", SHOWN["wasted"]),
    ("dropped stale", lambda run: f"{run['episodes_dropped_stale']:,.0f}"),
    ("mean age", SHOWN["mean age"]),
    ("partial", lambda run: f"{run['partial_ratio']:.3f}"),
    ("largest span", lambda run: f"{run['largest_version_span']:.0f}"),
    ("prefill", lambda run: duration(run["prefill_seconds"])),
)


def markdown_table(runs: Runs) -> list[str]:
    """One row per way: trained/h as mean (range over seeds), the rest on the mean report."""
    unit = rate_unit(r["virtual_seconds"] for reports in runs.values() for r in reports)
    headers = ["weight update", f"trained / {unit[0]}", *(label for label, _ in COLUMNS)]
    lines = ["| " + " | ".join(headers) + " |", "|---" * len(headers) + "|"]
    for name, reports in runs.items():
        merged: Mapping[str, Any] = over_seeds(reports)
        trained = ranged(reports, "trained_episodes_per_hour", lambda v: per_unit(v, unit))
        cells = [f"`{name}`", trained, *(show(merged) for _, show in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args(argv)
    scenarios = args.scenarios.split(",")
    start = time.perf_counter()
    progress = Progress(len(WAYS) * len(scenarios))
    for scenario in scenarios:
        runs = measure_rows(
            scenario, WAYS, args.seeds, args.steps, progress, from_log=prefill_seconds
        )
        print(
            f"**{scenario}** (`per-episode`): mean of {args.seeds} seeds x {args.steps} steps "
            "(range over seeds in brackets)\n"
        )
        print("\n".join(markdown_table(runs)))
        print()
    print(
        f"{len(WAYS)} ways x {args.seeds} seeds x {args.steps} steps per scenario, "
        f"{len(scenarios)} scenarios; {time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
