"""The engine's pause modes, abort and bounds, without HTTP in between."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from rolloutlog.runtime.live.digits import task_from_id
from rolloutlog.runtime.live.model import build_model
from rolloutlog.runtime.live.twin.engine import (
    Engine,
    EngineOverloadedError,
    EnginePausedError,
    SamplingSpec,
)

PROMPT = task_from_id("engine").prompt_ids
LONG = SamplingSpec(max_tokens=40, ignore_eos=True, seed=1)


@pytest.fixture
def engine() -> Iterator[Engine]:
    started = Engine(build_model(seed=0), min_step_s=0.01, max_waiting=8).start()
    yield started
    started.stop()


def _wait_for_tokens(engine: Engine, count: int) -> None:
    deadline = time.monotonic() + 10
    while engine.tokens_total < count:
        if time.monotonic() > deadline:
            raise TimeoutError("the engine made no progress")
        time.sleep(0.005)


def test_keep_freezes_in_flight_requests_and_queues_new_ones(engine):
    running = engine.submit("running", PROMPT, LONG)
    _wait_for_tokens(engine, 3)
    engine.pause("keep")
    frozen = len(running.output)
    queued = engine.submit("queued", PROMPT, SamplingSpec(max_tokens=2))
    # No need to wait and watch: pause() returned with no step running, and the engine
    # thread starts a step only when `_runnable()`, which is false while paused in keep.
    with engine._cond:
        assert not engine._stepping and not engine._runnable()
        assert len(running.output) == frozen and not queued.done.is_set()
    engine.resume()
    assert running.done.wait(10) and queued.done.wait(10)
    assert running.finish_reason == "length" and len(running.output) == 40
    assert queued.finish_reason == "length"


def test_abort_mode_finishes_in_flight_requests_and_rejects_new_ones(engine):
    running = engine.submit("running", PROMPT, LONG)
    _wait_for_tokens(engine, 3)
    engine.pause("abort")
    assert running.done.is_set() and running.finish_reason == "abort"
    assert 3 <= len(running.output) < 40
    with pytest.raises(EnginePausedError, match="paused"):
        engine.submit("rejected", PROMPT, LONG)
    engine.resume()
    assert engine.submit("accepted", PROMPT, SamplingSpec(max_tokens=1)).done.wait(10)


def test_wait_mode_returns_once_in_flight_requests_have_finished(engine):
    running = engine.submit("running", PROMPT, SamplingSpec(max_tokens=10, ignore_eos=True))
    _wait_for_tokens(engine, 2)
    engine.pause("wait")
    assert running.done.is_set() and running.finish_reason == "length"
    with pytest.raises(EnginePausedError):
        engine.submit("rejected", PROMPT, LONG)
    engine.resume()


@pytest.mark.parametrize("mode", ["abort", "wait"])
def test_as_vllm_032_a_request_sent_while_paused_is_held_until_resume(mode):
    """`queue_when_paused`: held, not rejected; not stepped while paused, and not aborted by
    a later abort-mode pause (that pause aborts only what runs)."""
    engine = Engine(build_model(seed=0), min_step_s=0.01, queue_when_paused=True).start()
    try:
        engine.pause(mode)
        held = engine.submit("held", PROMPT, SamplingSpec(max_tokens=3, ignore_eos=True))
        engine.pause("abort")
        with engine._cond:
            assert not engine._stepping and not held.done.is_set() and held.output == []
        assert engine.unfinished == 1
        engine.resume()
        assert held.done.wait(10) and held.finish_reason == "length" and len(held.output) == 3
    finally:
        engine.stop()


def test_abort_while_paused_in_keep_mode_finishes_at_once(engine):
    engine.pause("keep")
    queued = engine.submit("queued", PROMPT, LONG)
    assert engine.abort(["queued", "unknown"]) == 1
    assert queued.done.is_set() and queued.finish_reason == "abort" and queued.output == []
    engine.resume()


def test_the_queue_is_bounded(engine):
    engine.pause("keep")
    for index in range(8):
        engine.submit(f"r{index}", PROMPT, LONG)
    with pytest.raises(EngineOverloadedError, match="8"):
        engine.submit("one-too-many", PROMPT, LONG)
    engine.resume()


def test_stop_aborts_what_is_in_flight():
    engine = Engine(build_model(seed=0), min_step_s=0.01).start()
    running = engine.submit("running", PROMPT, LONG)
    waiter = threading.Thread(target=running.done.wait, args=(10,))
    waiter.start()
    engine.stop()
    waiter.join(10)
    assert running.finish_reason == "abort"
