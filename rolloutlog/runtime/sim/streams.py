"""One seed, split into independent named random streams, one per subsystem.

Each subsystem (tasks, durations, failures, rewards, races, trainer, controller) draws from
its own numpy Generator, seeded by `SeedSequence(seed, spawn_key=(key,))` where the key is
a fixed number derived from the stream's name. Adding a stream, or drawing more from one,
leaves every other stream's numbers unchanged, and nothing reads global random state.
"""

from __future__ import annotations

import zlib

import numpy as np

STREAM_NAMES = ("tasks", "durations", "failures", "rewards", "races", "trainer", "controller")


def stream_key(name: str) -> int:
    """The fixed spawn key of a named stream (CRC-32 of its name: stable across versions)."""
    return zlib.crc32(name.encode("utf-8"))


def named_stream(seed: int, name: str) -> np.random.Generator:
    """The generator of stream `name` under `seed`."""
    if seed < 0:
        raise ValueError(f"seed must be >= 0 (got {seed})")
    return np.random.Generator(
        np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(stream_key(name),)))
    )


class RandomStreams:
    """The named streams of one simulation; ask for a name, get its generator."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._streams = {name: named_stream(seed, name) for name in STREAM_NAMES}

    def __getitem__(self, name: str) -> np.random.Generator:
        stream = self._streams.get(name)
        if stream is None:
            raise KeyError(f"no random stream {name!r}; known: {', '.join(STREAM_NAMES)}")
        return stream
