"""rolloutlog.integrations.prime_rl: what prime-rl's dispatcher and sink do, recorded through
their own methods, is a log that `verify --policy` checks decision by decision.

In CI the methods are a scripted stand-in's (`scripted_prime_rl`); with a prime-rl
checkout named by PRIME_RL_SRC, `test_real_prime_rl.py` drives prime-rl's own classes.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.presets import FIELD, preset_overrides
from rolloutlog.events.log_reader import read_log
from rolloutlog.events.types import EpisodeDropped, EpisodesCancelled, Event, GroupScored
from rolloutlog.integrations import prime_rl
from rolloutlog.record import Recorder
from rolloutlog.replay.conformance import check_conformance
from rolloutlog.replay.source import open_log
from rolloutlog.testing.scripted_world import ScriptedWorld
from tests.integrations import scripted_prime_rl
from tests.integrations.scripted_prime_rl import play

# prime-rl's own preset (per-group before core.presets.FIELD had it): the stand-in replays
# runs our deciders made under it.
PRESET = "prime-rl" if "prime-rl" in FIELD else "per-group"
# What prime-rl's calls can show: no failures, overload cuts, late or repeated arrivals.
WEIGHTS = {"complete": 8, "publish": 2, "go_live": 1, "limit": 1}


def decided_log(seed: int, bound: int) -> list[Event]:
    """A run our deciders made that prime-rl could have made: the first from `seed` on in
    which no arrival is dropped before its group ends (rolloutlog's per-group rule drops a
    stale arrival at once; prime-rl's sink voids a group's arrivals only after a stale
    cancellation)."""
    config = RunConfig.from_mapping(
        {
            "group_size": 3,
            "max_inflight": 5,
            "batch_size": 4,
            "max_off_policy_steps": bound,
            "target_lag": bound,
            **preset_overrides(PRESET),
        }
    )
    for attempt in range(seed * 100, seed * 100 + 100):
        choose = random.Random(attempt).randrange
        world = ScriptedWorld(ReactionLoop(config), choose, weights=WEIGHTS)
        for _ in range(120):
            world.step()
        log = world.finish()
        if prime_rl_could(log):
            return log
    raise AssertionError(f"no run from seed {seed} that prime-rl could make")


def prime_rl_could(log: list[Event]) -> bool:
    """No episode is dropped but a queued one or one of a group cancelled as stale."""
    queued: set[str] = set()
    voided: set[str] = set()
    for event in log:
        if isinstance(event, GroupScored) and event.admitted:
            queued.update(event.episode_ids)
        elif isinstance(event, EpisodesCancelled) and event.reason == "stale":
            voided.add(event.group_id)
        elif isinstance(event, EpisodeDropped) and not (
            event.episode_id in queued or event.episode_id.split("/")[0] in voided
        ):
            return False
    return True


def recorded(tmp_path: Path, log: list) -> Path:
    path = tmp_path / "prime-rl.arrow"
    now = [0.0]

    def open_recorder(config: object) -> Recorder:
        return Recorder(path, config=config, code_version="scripted prime-rl")  # type: ignore[arg-type]

    recording = prime_rl.Recording(open_recorder, lambda: now[0])
    wrapped = prime_rl.instrument(
        scripted_prime_rl.Dispatcher, scripted_prime_rl.TrainSink, recording
    )
    try:
        asyncio.run(play(log, recording, now))
    finally:
        wrapped.restore()
        recording.log().close()  # unfinished, as a run that stops before its end
    return path


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("bound", [1, 2, 4, 50])
def test_the_recorded_run_conforms_decision_by_decision(
    tmp_path: Path, seed: int, bound: int
) -> None:
    log = decided_log(seed, bound)
    path = recorded(tmp_path, log)
    verdict = check_conformance(open_log(path), PRESET)
    assert verdict.ok, verdict.nonconformity and verdict.nonconformity.describe()
    assert verdict.events == len(read_log(path)) > 200


def test_restore_puts_the_methods_back() -> None:
    before = dict(vars(scripted_prime_rl.Dispatcher))
    recording = prime_rl.Recording(lambda config: None, lambda: 0.0)  # type: ignore[arg-type,return-value]
    prime_rl.instrument(
        scripted_prime_rl.Dispatcher, scripted_prime_rl.TrainSink, recording
    ).restore()
    assert dict(vars(scripted_prime_rl.Dispatcher)) == before


def test_without_the_variable_nothing_is_wrapped() -> None:
    assert prime_rl.enable({}) is None


def test_a_traces_advantage_is_read_per_node_as_prime_rl_reads_it_back() -> None:
    """prime-rl keeps credit per sampled token of each node; its scalar is their nonzero mean
    (`scalar_advantage`), not a sum over tokens or nodes."""
    Node, Trace = scripted_prime_rl.Node, scripted_prime_rl.Trace
    trace = Trace("t", 1.0, [Node([False] * 3), Node([True] * 3), Node([False, True])])
    assert prime_rl.trace_advantage(trace) == 0.0  # not assigned yet
    scripted_prime_rl.assign_advantages(trace, -0.25)
    assert [node.advantages for node in trace.nodes] == [None, [-0.25] * 3, [-0.25]]
    assert prime_rl.trace_advantage(trace) == -0.25
    trace.nodes[1].advantages, trace.nodes[2].advantages = [0.0, 0.5, 1.0], [1.5]  # per token
    assert prime_rl.trace_advantage(trace) == 1.0
