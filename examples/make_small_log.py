"""Write examples/small.arrow and examples/small.jsonl: a tiny, valid run, recorded by hand.

Two train groups of four episodes at version 0, all completed and scored, one batch of
eight shipped (group g2 has only zero advantages, so its members are pruned from training),
then version 1 published and the run finished. It is recorded through
`rolloutlog.record.Recorder`, as another orchestrator would record its own run, with its
own ids (`task-17/0`, ...); the log keeps `g<n>/<m>` and notes the mapping.

    .venv/bin/python examples/make_small_log.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rolloutlog import __version__
from rolloutlog.core.config import RunConfig
from rolloutlog.events.jsonl import write_jsonl
from rolloutlog.events.log_reader import read_log
from rolloutlog.record import Recorder

HERE = Path(__file__).resolve().parent
CONFIG = RunConfig(group_size=4, batch_size=8, max_inflight=8)
REWARDS = {"task-17": (1.0, 0.0, 1.0, 1.0), "task-4": (0.5, 0.5, 0.5, 0.5)}


def record_group(rec: Recorder, task: str, t: float) -> None:
    """Every member completes, 0.25 s apart; the group scores with reward − mean."""
    rewards = REWARDS[task]
    for m, reward in enumerate(rewards):
        rec.complete(
            t + 0.25 * m,
            f"{task}/{m}",
            reward=reward,
            prompt_tokens=32,
            completion_tokens=96 + 8 * m,
        )
    mean = sum(rewards) / len(rewards)
    advantages = {f"{task}/{m}": reward - mean for m, reward in enumerate(rewards)}
    rec.score(t + 0.75, task, advantages, admitted=True)


def record_small_run(path: Path) -> None:
    code_version = f"rolloutlog {__version__} (examples/make_small_log.py)"
    with Recorder(
        path, config=CONFIG.to_dict(), seed=CONFIG.seed, code_version=code_version, overwrite=True
    ) as rec:
        for task in REWARDS:  # opened at version 0 for step 1, every member dispatched at once
            rec.open_group(0.0, task, env="arithmetic", task=task)
            for m in range(CONFIG.group_size):
                rec.dispatch(0.0, task, f"{task}/{m}")
        record_group(rec, "task-17", 2.0)
        record_group(rec, "task-4", 3.0)
        members = [f"{task}/{m}" for task in REWARDS for m in range(CONFIG.group_size)]
        rec.ship(4.0, members, trained=members[:4])  # task-4's zero advantages are pruned
        rec.version_pending(9.0, 1)
        rec.version_live(9.5, 1)
        rec.finish(9.5, reason="steps")


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()  # --help
    log = HERE / "small.arrow"
    record_small_run(log)
    with (HERE / "small.jsonl").open("w", encoding="utf-8") as out:
        write_jsonl(read_log(log), out)
    print(f"wrote {log} and {log.with_suffix('.jsonl')}")


if __name__ == "__main__":
    main()
