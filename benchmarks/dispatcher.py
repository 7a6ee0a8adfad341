"""Dispatcher throughput and memory: max_inflight = 4096, group_size = 16.

Drives the dispatcher decider alone (the sink is replaced by a synthetic step advance
every `batch_size` completions and a version publish one step later), completing in-flight
episodes in a seeded random order with 2% failures and occasional overload cuts. Prints
decisions per second and the traced memory of the dispatcher state as the run grows: it
must stay flat, because finished groups leave the state.

    .venv/bin/python benchmarks/dispatcher.py [--completions N]
"""

from __future__ import annotations

import argparse
import gc
import random
import time
import tracemalloc

import attrs

from rolloutlog.core import dispatcher
from rolloutlog.core.config import RunConfig
from rolloutlog.core.presets import rules_for
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeFailed,
    Event,
    OverloadCut,
    RunStarted,
    VersionPending,
)


class Bench:
    def __init__(self, config: RunConfig, seed: int) -> None:
        self.config = config
        self.state = dispatcher.initial_state(config)
        self.rules = rules_for(config)
        self.rng = random.Random(seed)
        self.seq = 0
        self.decided = 0
        self.inflight: list[str] = []  # a swap-remove list: O(1) random picks
        self.position: dict[str, int] = {}
        self.apply(
            RunStarted(
                t=0.0,
                config=config.to_dict(),
                seed=seed,
                schema_version=SCHEMA_VERSION,
                code_version="bench",
            )
        )

    def apply(self, event: Event) -> None:
        """The reaction loop's order, dispatcher only: apply, decide, apply the whole answer."""
        owed = [self._evolve(event)]
        while owed:
            current = owed.pop()
            decided = dispatcher.decide(self.rules, self.state, current)
            self.decided += len(decided)
            owed.extend(self._evolve(e) for e in decided)

    def _evolve(self, event: Event) -> Event:
        event = attrs.evolve(event, seq=self.seq)
        self.seq += 1
        self.state = dispatcher.evolve(self.rules, self.state, event)
        self._track(event)
        return event

    def _track(self, event: Event) -> None:
        if event.kind == "episode_dispatched":
            self.position[event.episode_id] = len(self.inflight)
            self.inflight.append(event.episode_id)
        elif event.kind == "episodes_cancelled":
            for episode_id in event.episode_ids:
                self._forget(episode_id)

    def _forget(self, episode_id: str) -> None:
        index = self.position.pop(episode_id)
        last = self.inflight.pop()
        if last != episode_id:
            self.inflight[index] = last
            self.position[last] = index

    def run(self, completions: int, report_every: int) -> None:
        batch = self.config.batch_size or 1
        t = 0.0
        for n in range(1, completions + 1):
            t += 0.001
            episode_id = self.inflight[self.rng.randrange(len(self.inflight))]
            self._forget(episode_id)
            if self.rng.random() < 0.02:
                self.apply(EpisodeFailed(t=t, episode_id=episode_id, error="bench"))
            else:
                self.apply(
                    EpisodeCompleted(
                        t=t, episode_id=episode_id, reward=1.0, prompt_tokens=1, completion_tokens=1
                    )
                )
            if n % batch == 0:
                step = self.state.step
                self.apply(BatchShipped(t=t, step=step, episode_ids=(), trained_ids=(), tokens=0))
                if step >= 2:
                    self.apply(VersionPending(t=t, version=step - 1))
            if n % (50 * batch) == 0:
                self.apply(OverloadCut(t=t, n=self.config.group_size * 4))
            if n % report_every == 0:
                self.report(n, self.decided)

    def report(self, completions: int, decided: int) -> None:
        gc.collect()
        current, _ = tracemalloc.get_traced_memory()
        groups = len(self.state.groups)
        print(
            f"  after {completions:>9,} completions: {decided:>10,} decisions, "
            f"{groups:>4} open groups, {len(self.state.inflight):>5} in flight, "
            f"traced memory {current / 2**20:7.2f} MiB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=400_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = RunConfig(max_inflight=4096, group_size=16, batch_size=1024, max_off_policy_steps=1)

    print(
        f"dispatcher benchmark: max_inflight={config.max_inflight}, group_size={config.group_size}"
    )
    timed = Bench(config, args.seed)
    start = time.perf_counter()
    timed.run(args.completions, report_every=10**12)
    elapsed = time.perf_counter() - start
    events = timed.seq
    print(
        f"throughput: {timed.decided:,} decisions and {events:,} events in {elapsed:.2f} s = "
        f"{timed.decided / elapsed:,.0f} decisions/s, {events / elapsed:,.0f} events/s"
    )

    print("memory (tracemalloc, a separate run; tracing slows it down):")
    tracemalloc.start()
    traced = Bench(config, args.seed)
    traced.run(args.completions, report_every=args.completions // 4)
    tracemalloc.stop()


if __name__ == "__main__":
    main()
