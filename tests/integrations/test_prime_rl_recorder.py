"""rolloutlog.integrations.prime_rl: what prime-rl's dispatcher and sink do, recorded through
their own methods, is a log that `verify --policy` checks decision by decision.

In CI the methods are a scripted stand-in's (`scripted_prime_rl`); with a prime-rl
checkout named by PRIME_RL_SRC, `test_real_prime_rl.py` drives prime-rl's own classes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.presets import FIELD, preset_overrides
from rolloutlog.events.log_reader import read_log
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeDropped,
    EpisodesCancelled,
    Event,
    GroupScored,
    LimitSet,
)
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
        for _ in range(150):  # prime-rl's gate, read at a ship and at version_live, opens less
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
        scripted_prime_rl.Dispatcher,
        scripted_prime_rl.TrainSink,
        recording,
        scripted_prime_rl.Orchestrator,
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


def recording_into(
    path: Path, commit_every: float = prime_rl.COMMIT_EVERY_S
) -> tuple[prime_rl.Recording, prime_rl.Instrumented]:
    """A recording into `path` of the stand-in's classes, at t = 0."""
    recording = prime_rl.Recording(
        lambda config: Recorder(path, config=config, code_version="scripted"),
        lambda: 0.0,
        commit_every=commit_every,
    )
    S = scripted_prime_rl
    return recording, prime_rl.instrument(S.Dispatcher, S.TrainSink, recording, S.Orchestrator)


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


def test_float32_advantages_are_taken_within_their_precision_only() -> None:
    """prime-rl stores advantages as float32: 0.1 - mean arrives off by about 1e-8, within
    float32's precision of GRPO's value, and is recorded as that value; an advantage off
    by more (another algorithm's) is recorded as prime-rl has it, for replay to flag."""
    rewards = [0.1, 0.7, 0.2]
    exact = [r - sum(rewards) / 3 for r in rewards]
    as_float32 = [float(np.float32(a)) for a in exact]
    assert as_float32 != exact
    assert prime_rl.as_computed(as_float32, rewards) == list(exact)
    shaped = [a * 1.01 for a in exact]
    assert prime_rl.as_computed(shaped, rewards) == shaped


class Broken(Exception):
    pass


def test_a_recording_error_never_reaches_prime_rl_and_stops_the_recording(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The recorder refuses a call (here: the log cannot open); prime-rl's method runs and
    returns as unwrapped, the error is logged once, and every later call records nothing."""
    opened: list[object] = []

    def open_log(config: object) -> Recorder:
        opened.append(config)
        raise Broken("disk full")

    recording = prime_rl.Recording(open_log, lambda: 0.0)  # type: ignore[arg-type]
    wrapped = prime_rl.instrument(
        scripted_prime_rl.Dispatcher,
        scripted_prime_rl.TrainSink,
        recording,
        scripted_prime_rl.Orchestrator,
    )

    async def run() -> int:
        dispatcher = scripted_prime_rl.Dispatcher(initial_max_inflight=8.0, max_off_policy_steps=1)  # type: ignore[arg-type]
        group_id = uuid.uuid4()
        group = scripted_prime_rl.GroupState("train", "env", scripted_prime_rl.Task("t"), 1, 2, 2)
        dispatcher.groups[group_id] = group
        assert await dispatcher.schedule_group_episode(group_id, group)
        assert await dispatcher.schedule_group_episode(group_id, group)
        dispatcher.set_limit(6.5)
        return await dispatcher.drop_group(group_id, reason="stale")

    try:
        with caplog.at_level(logging.ERROR):
            assert asyncio.run(run()) == 2  # prime-rl's own answer
    finally:
        wrapped.restore()
    assert len(opened) == 1 and recording.broken is not None and "disk full" in recording.broken
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert len(caplog.records) == 1


def test_float_limits_and_an_all_pruned_batch_are_recorded_as_prime_rl_counts_them(
    tmp_path: Path,
) -> None:
    """prime-rl's concurrency controller passes floats (8.0, 6.5): the whole permits they
    allow are recorded. A batch whose every sample was pruned moves no step in prime-rl:
    no ship is recorded for it, and its cut rides the next ship, untrained."""
    path = tmp_path / "log.arrow"
    recording, wrapped = recording_into(path)
    S = scripted_prime_rl

    async def run() -> None:
        dispatcher = S.Dispatcher(initial_max_inflight=8.0, max_off_policy_steps=1)  # type: ignore[arg-type]
        sink = S.TrainSink(batch_size=1, token_batch_size=None)
        orchestrator = S.Orchestrator()
        dispatcher.set_limit(6.5)  # type: ignore[arg-type]
        episodes = []
        for n in range(2):
            group_id = uuid.uuid4()
            group = S.GroupState("train", "env", S.Task(f"t{n}"), 1, 1, 1)
            dispatcher.groups[group_id] = group
            await dispatcher.schedule_group_episode(group_id, group)
            (task,) = dispatcher.inflight
            trace = S.Trace(f"trace-{n}", 1.0, [S.Node([True])])
            episode = S.Episode(str(uuid.uuid4()), [trace], 3, 2)
            task.set_result(episode)  # type: ignore[union-attr]
            await dispatcher.handle_completed_episode(task)
            sink.pending_groups[str(group_id)].append(episode)
            sink.admit[str(group_id)] = [trace.id]
            await sink.process_group(str(group_id))
            sink.cut = ([trace.id], set() if n == 0 else {trace.id})
            batch = sink.process_batch()
            batch.samples = [] if n == 0 else batch.samples  # the first: all pruned
            await orchestrator.finalize_train_batch(batch)
            episodes.append(episode)

    try:
        asyncio.run(run())
    finally:
        wrapped.restore()
        recording.end("steps")
    log = read_log(path)
    assert log[0].config["max_inflight"] == 8  # type: ignore[union-attr]
    assert [e.max_inflight for e in log if isinstance(e, LimitSet)] == [6]
    ships = [e for e in log if isinstance(e, BatchShipped)]
    assert [(s.step, s.episode_ids, s.trained_ids) for s in ships] == [
        (1, ("g1/0", "g2/0"), ("g2/0",))
    ]


def test_a_cancellation_is_recorded_before_the_sink_can_score_its_group(tmp_path: Path) -> None:
    """prime-rl's `drop_group` claims the group's runs, then awaits; its main loop may take
    the group's cancellation and score the group during that await. The cancellation is
    recorded at the claim, so the score finds the group complete (else the recorder refuses
    the score, and the recording stops)."""
    path = tmp_path / "log.arrow"
    recording, wrapped = recording_into(path)
    S = scripted_prime_rl

    async def run() -> None:
        dispatcher = S.Dispatcher(initial_max_inflight=4, max_off_policy_steps=1)
        sink = S.TrainSink(batch_size=8, token_batch_size=None)
        gid = uuid.uuid4()
        group = dispatcher.groups[gid] = S.GroupState("train", "env", S.Task("t"), 1, 2, 2)
        await dispatcher.schedule_group_episode(gid, group)
        (first,) = dispatcher.inflight
        await dispatcher.schedule_group_episode(gid, group)
        episode = S.Episode(str(uuid.uuid4()), [S.Trace("tr", 1.0, [S.Node([True])])], 3, 2)
        first.set_result(episode)  # type: ignore[union-attr]
        await dispatcher.handle_completed_episode(first)
        sink.pending_groups[str(gid)].append(episode)
        sink.admit[str(gid)] = []

        async def main_loop() -> None:  # runs while drop_group awaits
            sink.pending_group_cancellations[str(gid)] = S.GroupCancellation("stale")
            await sink.process_group(str(gid))

        await asyncio.gather(dispatcher.drop_group(gid, reason="stale"), main_loop())

    try:
        asyncio.run(run())
    finally:
        wrapped.restore()
        recording.end("steps")
    assert recording.broken is None
    kinds = [e.kind for e in read_log(path)]
    assert kinds[kinds.index("episodes_cancelled") :][:3] == [
        "episodes_cancelled",
        "episode_dropped",
        "group_scored",
    ]


def test_the_log_is_committed_on_a_timer_while_the_run_goes_on(tmp_path: Path) -> None:
    """Nobody calls commit: what was recorded is durable within `commit_every` seconds,
    while prime-rl's event loop runs (a crash after that loses nothing recorded before)."""
    path = tmp_path / "log.arrow"
    recording, wrapped = recording_into(path, commit_every=0.05)
    S = scripted_prime_rl
    durable: list[int] = []

    async def run() -> None:
        dispatcher = S.Dispatcher(initial_max_inflight=4, max_off_policy_steps=1)
        gid = uuid.uuid4()
        group = dispatcher.groups[gid] = S.GroupState("train", "env", S.Task("t"), 1, 2, 2)
        await dispatcher.schedule_group_episode(gid, group)
        await asyncio.sleep(0.3)
        durable.append(len(read_log(path)))  # read by another reader, the run still open

    try:
        asyncio.run(run())
    finally:
        wrapped.restore()
        recording.end(None)
    assert durable == [3]  # run_started, group_opened, episode_dispatched


EXITS_MID_RUN = """
import asyncio, sys, types, uuid
from tests.integrations import scripted_prime_rl as S
classes = {"dispatcher": {"Dispatcher": S.Dispatcher}, "train_sink": {"TrainSink": S.TrainSink},
           "orchestrator": {"Orchestrator": S.Orchestrator}}
for name, attributes in classes.items():  # the stand-in, under prime-rl's module names
    module = types.ModuleType(f"prime_rl.orchestrator.{name}")
    vars(module).update(attributes)
    sys.modules[module.__name__] = module
from rolloutlog.integrations import prime_rl
assert prime_rl.enable() is not None
async def run():
    dispatcher = S.Dispatcher(initial_max_inflight=4, max_off_policy_steps=1)
    gid = uuid.uuid4()
    group = dispatcher.groups[gid] = S.GroupState("train", "env", S.Task("t"), 1, 2, 2)
    await dispatcher.schedule_group_episode(gid, group)
asyncio.run(run())
"""


def test_enable_commits_the_log_when_the_process_exits_mid_run(tmp_path: Path) -> None:
    """`enable()` as a user calls it, in a process that exits before the run ends (nobody
    calls finish, commit or close): what was recorded is committed, the log unfinished."""
    path = tmp_path / "exits.arrow"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, prime_rl.LOG_VARIABLE: str(path), "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", EXITS_MID_RUN], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert [e.kind for e in read_log(path)] == ["run_started", "group_opened", "episode_dispatched"]
