"""Throughput of the event log: write, read as events, read as columns, and a pyarrow baseline.

Builds a log of realistic mixed events (groups of 8 opened, dispatched, completed or now
and then failed, scored; batches of 64 shipped with a version change after each), then
times each way of reading it. Prints figures only; nothing here asserts on timing.

Back of the envelope: Python spends ~1 µs to build one attrs object and ~1-2 µs to check
it, and about as much to move its ~6 fields in or out of column lists, so one core should
write and read on the order of 100-300k events/s; Arrow's own work (compression, CRC32C,
IPC framing) is well under 1 µs per event at 4096 events per batch.

    .venv/bin/python benchmarks/log_io.py [--events N]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.ipc as ipc

from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.log_writer import DEFAULT_BATCH_EVENTS, LogWriter
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeFailed,
    Event,
    GroupOpened,
    GroupScored,
    RunStarted,
    VersionLive,
    VersionPending,
)

GROUP_SIZE = 8
BATCH_SIZE = 64


def group_events(rng: random.Random, number: int, version: int, t: float) -> Iterator[Event]:
    """One group's life: opened, members dispatched, completed (2% fail), scored."""
    group_id = f"g{number}"
    yield GroupOpened(
        t=t, group_id=group_id, work="train", env="math", task_id=f"task-{rng.randrange(4096)}",
        group_size=GROUP_SIZE, policy_version=version, step=version + 1, frozen=False,
    )  # fmt: skip
    members = [f"{group_id}/{m}" for m in range(GROUP_SIZE)]
    for m, episode_id in enumerate(members):
        yield EpisodeDispatched(
            t=t, episode_id=episode_id, group_id=group_id, member=m, policy_version=version
        )
    rewards = {}
    for episode_id in members:
        t += rng.random()
        if rng.random() < 0.02:
            yield EpisodeFailed(t=t, episode_id=episode_id, error="inference timeout")
            continue
        rewards[episode_id] = float(rng.random() < 0.5)
        yield EpisodeCompleted(
            t=t, episode_id=episode_id, reward=rewards[episode_id],
            prompt_tokens=rng.randrange(64, 512), completion_tokens=rng.randrange(64, 2048),
        )  # fmt: skip
    mean = sum(rewards.values()) / max(len(rewards), 1)
    yield GroupScored(
        t=t, group_id=group_id, episode_ids=tuple(rewards),
        advantages=tuple(r - mean for r in rewards.values()), admitted=bool(rewards),
    )  # fmt: skip


def realistic_events(count: int) -> list[Event]:
    """About `count` events of a run; every 8 groups a batch ships and the version moves."""
    rng = random.Random(0)
    events: list[Event] = [
        RunStarted(t=0.0, config={"group_size": GROUP_SIZE, "batch_size": BATCH_SIZE}, seed=0,
                   schema_version=SCHEMA_VERSION, code_version="benchmark")
    ]  # fmt: skip
    version, number, queued = 0, 0, []
    while len(events) < count:
        number += 1
        for event in group_events(rng, number, version, t=float(number)):
            events.append(event)
            if isinstance(event, GroupScored):
                queued.extend(event.episode_ids)
        if len(queued) >= BATCH_SIZE:
            cut, queued = queued[:BATCH_SIZE], queued[BATCH_SIZE:]
            version += 1
            events += [
                BatchShipped(t=float(number), step=version, episode_ids=tuple(cut),
                             trained_ids=tuple(cut[::2]), tokens=rng.randrange(10**5, 10**6)),
                VersionPending(t=float(number), version=version),
                VersionLive(t=float(number) + 0.5, version=version),
            ]  # fmt: skip
    return events[:count]


def timed(label: str, count: int, work: Callable[[], object]) -> None:
    """Wall-clock rate, and the rate per CPU second: on a shared machine the second is the
    one that compares across runs (this process's CPU time, so fsync waits count as wall only)."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"{label:<46} {count / wall:>10,.0f} events/s ({wall:6.2f} s wall)"
        f" {count / cpu:>10,.0f} events/CPU-s"
    )


def write(path: Path, events: list[Event], fsync: bool) -> None:
    with LogWriter(path, mode="overwrite", fsync=fsync) as log:
        for event in events:
            log.append(event)


def count_events(path: Path) -> int:
    return sum(1 for _ in LogReader(path))


def count_column_rows(path: Path) -> int:
    return sum(len(columns["seq"]) for columns in LogReader(path).columns())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the log")
    count = parser.parse_args().events
    events = realistic_events(count)
    print(f"{len(events):,} events, {DEFAULT_BATCH_EVENTS} per record batch, zstd")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "bench.arrow"
        timed("write (validate, seq, fsync per batch)", count, lambda: write(path, events, True))
        timed("write (fsync only at close)", count, lambda: write(path, events, False))
        size = path.stat().st_size
        print(f"{'log size':<46} {size / 2**20:>10,.1f} MiB ({size / count:.1f} bytes/event)")
        events.clear()  # free the objects before timing the readers
        timed("read events (verified, objects built)", count, lambda: count_events(path))
        timed("read columns (verified, plain lists)", count, lambda: count_column_rows(path))
        timed("info (verified, counts by kind)", count, lambda: LogReader(path).info())
        timed(
            "pyarrow open_stream().read_all().to_pylist()",
            count,
            lambda: ipc.open_stream(path).read_all().to_pylist(),
        )


if __name__ == "__main__":
    main()
