"""The shared-inference world fitted from one log: what `rolloutlog whatif` simulates in.

The trace fit (`fit.fit_log`) keeps the recorded run's outcomes (rewards, tokens, failures
per task) and its races; this module replaces the recorded durations and batch times by
the shared world's models, fitted from the same log, so that a policy that keeps more or
fewer rollouts in flight than the recorded run sees its servers slow down or speed up:

- **decode and prefill** (`decode_fit`): `step(n)`, the decode steps a request pays off
  the batch, seconds of prefill per prompt token, the environment seconds, and the
  colocated coupling `k`;
- **the trainer**: a batch's training seconds against its tokens, `(fixed + per_token ·
  tokens) · (1 + k · busy)`, `busy` the fraction of servers with work when it starts
  (non-negative least squares; the jitter is the spread of what is left);
- **the update pause**: the recorded mean (`fit._world`), and whether inference paused;
- **the KV cache** (`kv_fit`): where the episodes dispatched while the servers held more
  than some level of tokens ran clearly slower than the decode curve, that level is the
  capacity per server and the curve is fitted below it; otherwise the fit keeps the
  world's default and reports the most tokens the log held per server.

Each parameter comes with the range of the log that identifies it (`Parameter.basis`), and
`range_warnings` names each figure a simulated policy takes outside those ranges.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from rolloutlog.events.types import EpisodeCompleted, Event
from rolloutlog.runtime.sim.scenario import Scenario
from rolloutlog.runtime.sim.simulation import simulate
from rolloutlog.runtime.sim.world_config import WorldConfig
from rolloutlog.studies.whatif.calibrate import calibrate
from rolloutlog.studies.whatif.decode_fit import (
    DecodeFit,
    DecodeRows,
    Occupancy,
    check_servers,
    decode_rows,
)
from rolloutlog.studies.whatif.fit import FittedRun, LogCollector, TrainWindow, train_windows
from rolloutlog.studies.whatif.kv_fit import KvFit, fit_kv

BATCHES_MIN = 2  # trained batches a trainer fit needs (a fixed part and a per-token part)
RANGE_SLACK = 1.1  # a figure within 10% of the log's range is inside it
PREFILL_FREE_TOKENS_PER_S = 1e9  # the world's prefill rate where the fit finds none


@attrs.frozen(kw_only=True)
class Parameter:
    """One fitted world key: its value, its unit, and what of the log identifies it."""

    key: str
    value: float | int | bool
    unit: str
    basis: str


@attrs.frozen(kw_only=True)
class LogRange:
    """The range of a figure the log shows (what the fit rests on)."""

    figure: str
    low: float
    high: float


@attrs.frozen(kw_only=True)
class SharedFit:
    """The fitted shared world, its parameters with their bases, and the log's ranges."""

    world: dict[str, Any]
    parameters: tuple[Parameter, ...]
    ranges: tuple[LogRange, ...]
    decode: DecodeFit
    rows: DecodeRows  # the log's points under the fitted curve (`whatif --plot`)
    recorded_max_inflight: int
    recorded_batch_size: int


def fit_shared(collector: LogCollector, fitted: FittedRun, servers: int) -> SharedFit:
    """Fit the shared world of a collected log (`fit.collect`) on `servers` servers."""
    check_servers(servers)
    windows = train_windows(collector)
    rows = decode_rows(collector, windows, servers)
    inflight = Occupancy.of_flights(collector)
    kv = fit_kv(collector, rows, servers)
    cache = _kv_keys(kv, fitted.scenario.world, collector)
    trainer = _fit_trainer(windows, inflight, servers, kv.decode.coupling)
    rerun = _rerun(fitted, trainer, cache)
    decode = calibrate(kv.decode, rerun, _recorded_rate(collector))
    kv_peak = _kv_peak(collector, servers)
    world = _world_keys(decode, trainer, fitted.scenario.world, cache)
    run = fitted.scenario.run
    ranges = (
        LogRange(figure="running requests per server", low=decode.running_min,
                 high=inflight.peak() / servers),
        LogRange(figure="trained tokens per batch", low=trainer.tokens_min,
                 high=trainer.tokens_max),
        LogRange(figure="KV tokens per server", low=0.0, high=kv_peak),
    )  # fmt: skip
    return SharedFit(
        world=world,
        parameters=(
            *_parameters(decode, trainer, fitted.scenario.world),
            _kv_parameter(kv, cache, fitted.scenario.world, kv_peak),
        ),
        ranges=ranges,
        decode=decode,
        rows=rows,
        recorded_max_inflight=run.max_inflight,
        recorded_batch_size=run.batch_size or 0,
    )


def shared_scenario(fitted: FittedRun, fit: SharedFit) -> Scenario:
    """The fitted run's scenario in the fitted shared world (its trace kept for outcomes)."""
    return _scenario(fitted, fit.world)


def _scenario(fitted: FittedRun, keys: dict[str, Any]) -> Scenario:
    world = WorldConfig.from_mapping(
        {**fitted.scenario.world.to_dict(), **keys}, where="fitted shared world"
    )
    description = (
        f"{fitted.scenario.description} Inference is shared ([world] inference = "
        '"shared"): durations come from the fitted servers, batch times from the fitted '
        "trainer (rolloutlog whatif's fit report names what identifies each)."
    )
    return attrs.evolve(fitted.scenario, world=world, description=description)


def _recorded_rate(collector: LogCollector) -> float:
    """Episodes the log completed per second of its run."""
    completed = sum(isinstance(f.arrival, EpisodeCompleted) for f in collector.flights.values())
    return completed / collector.end_t if collector.end_t > 0.0 else 0.0


def _rerun(
    fitted: FittedRun, trainer: _TrainerFit, cache: dict[str, int]
) -> Callable[[DecodeFit], float]:
    """Episodes completed per second when the recorded policy re-runs on the world of a
    decode fit (`calibrate`'s measure)."""

    def rate(decode: DecodeFit) -> float:
        completed = 0

        def count(events: Sequence[Event]) -> None:
            nonlocal completed
            completed += sum(isinstance(e, EpisodeCompleted) for e in events)

        keys = _world_keys(decode, trainer, fitted.scenario.world, cache)
        result = simulate(_scenario(fitted, keys), on_events=count)
        return completed / result.virtual_seconds if result.virtual_seconds > 0 else 0.0

    return rate


@attrs.frozen(kw_only=True)
class _TrainerFit:
    fixed_s: float
    per_token_s: float
    jitter: float
    batches: int
    tokens_min: float
    tokens_max: float
    mean_kept: float = 1.0  # exp(-jitter²/2): the world's medians that keep the log's means


def _fit_trainer(
    windows: Sequence[TrainWindow], inflight: Occupancy, servers: int, coupling: float
) -> _TrainerFit:
    """`train_s = (fixed + per_token · tokens) · (1 + k · busy)` over the batches trained
    one at a time; fewer than `BATCHES_MIN` of them: their mean, nothing per token. The
    world draws a batch's time as `(fixed + per_token · tokens) · exp(jitter · z)`, whose
    mean is `exp(jitter²/2)` times the parts, so the parts (least squares: the log's mean)
    are divided by that: the world trains as many seconds as the log did. Undivided, the
    vLLM probes' spread (0.4-1.1) had the world's trainer 10-80% slower than the log's."""
    single = [w for w in windows if w.batches == 1 and w.end > w.start]
    if not single:
        return _TrainerFit(fixed_s=0.0, per_token_s=0.0, jitter=0.0, batches=0,
                           tokens_min=0.0, tokens_max=0.0)  # fmt: skip
    tokens = np.array([float(w.tokens) for w in single])
    busy = np.array([min(inflight.at(w.start), servers) / servers for w in single])
    seconds = np.array([w.end - w.start for w in single]) / (1.0 + coupling * busy)
    if len(single) >= BATCHES_MIN and np.ptp(tokens) > 0:
        design = np.column_stack([np.ones_like(tokens), tokens])
        (fixed, per_token), *_ = np.linalg.lstsq(design, seconds, rcond=None)
        if per_token < 0.0 or fixed < 0.0:  # not identified: the mean, nothing per token
            fixed, per_token = float(seconds.mean()), 0.0
    else:
        fixed, per_token = float(seconds.mean()), 0.0
    predicted = np.maximum(fixed + per_token * tokens, 1e-9)
    spread = np.log(np.maximum(seconds, 1e-9) / predicted)
    jitter = float(spread.std()) if len(single) > 1 else 0.0
    kept = math.exp(-jitter * jitter / 2.0)
    return _TrainerFit(
        fixed_s=float(fixed) * kept,
        per_token_s=float(per_token) * kept,
        jitter=jitter,
        batches=len(single),
        tokens_min=float(tokens.min()),
        tokens_max=float(tokens.max()),
        mean_kept=kept,
    )


def _kv_peak(collector: LogCollector, servers: int) -> float:
    """The most prompt and completion tokens the log's episodes in flight held at once, per
    server (each counted whole from its dispatch: an upper bound on what the log held)."""
    changes: list[tuple[float, int]] = []
    for flight in collector.flights.values():
        if isinstance(flight.arrival, EpisodeCompleted):
            held = flight.arrival.prompt_tokens + flight.arrival.completion_tokens
            changes += [(flight.t, held), (flight.arrival.t, -held)]
    return Occupancy(changes).peak() / servers


def decode_keys(decode: DecodeFit) -> dict[str, Any]:
    """The world keys of a fitted decode curve (its servers, prefill, overhead, coupling)."""
    return {
        "inference": "shared",
        "inference_servers": decode.servers,
        "decode_step_s": decode.decode_step_s,
        "decode_s_per_seq": decode.decode_s_per_seq,
        "decode_compute_s_per_seq": decode.decode_compute_s_per_seq,
        "request_steps": decode.request_steps,
        "prefill_tokens_per_s": (
            1.0 / decode.prefill_s_per_token
            if decode.prefill_s_per_token > 1.0 / PREFILL_FREE_TOKENS_PER_S
            else PREFILL_FREE_TOKENS_PER_S
        ),
        "prefix_caching": False,  # the fit counts every dispatch's prompt
        "episode_overhead_s": decode.overhead_s,
        "colocated": decode.coupling > 0.0,
        "colocation_coupling": decode.coupling,
    }


def _world_keys(
    decode: DecodeFit, trainer: _TrainerFit, recorded: WorldConfig, cache: dict[str, int]
) -> dict[str, Any]:
    """The world keys the fit sets (with `cache`, the KV capacity where the log shows it)."""
    world: dict[str, Any] = {**decode_keys(decode), "train_s_per_episode": 0.0}
    if trainer.batches:
        world["train_step_s"] = trainer.fixed_s
        world["train_s_per_token"] = trainer.per_token_s
        world["trainer_jitter"] = trainer.jitter
        world["weight_update_s"] = recorded.weight_update_s * trainer.mean_kept  # drawn so too
    world["max_running"] = max(recorded.max_running, 1)
    return {**world, **cache}


def _kv_keys(kv: KvFit, recorded: WorldConfig, collector: LogCollector) -> dict[str, int]:
    """The world keys of a capacity the log shows (none where not seen): the capacity, no
    less than the world's longest episode (the longest prompt and the longest completion
    the log finished, the trace's ceiling), which the world then takes as
    `max_completion_tokens` (a server holds any one episode whole; the world refuses less,
    and a request that fits no empty server would wait for ever: held at the median prompt,
    a vLLM probe's 8-token prompts never fitted and its re-run stalled)."""
    if kv.capacity is None:
        return {}
    completed = [
        f.arrival for f in collector.flights.values() if isinstance(f.arrival, EpisodeCompleted)
    ]
    longest = max((a.completion_tokens for a in completed), default=1)
    prompt = max((a.prompt_tokens for a in completed), default=recorded.prompt_tokens)
    capacity = max(round(kv.capacity), max(prompt, recorded.prompt_tokens) + longest)
    return {"kv_capacity_tokens": capacity, "max_completion_tokens": max(longest, 1)}


def _kv_parameter(
    kv: KvFit, cache: dict[str, int], recorded: WorldConfig, kv_peak: float
) -> Parameter:
    """The KV capacity with what of the log identifies it (`kv_fit`), or that nothing does."""
    basis = kv.basis(kv_peak)
    value = cache.get("kv_capacity_tokens", recorded.kv_capacity_tokens)
    if kv.capacity is not None and value > round(kv.capacity):
        basis += f"; fitted {kv.capacity:,.0f}, held at the log's longest episode"
    return Parameter(key="kv_capacity_tokens", value=value, unit="tokens", basis=basis)


def _parameters(
    decode: DecodeFit, trainer: _TrainerFit, recorded: WorldConfig
) -> tuple[Parameter, ...]:
    """Each fitted parameter with the range of the log it rests on."""
    running = f"{decode.running_min:.1f}-{decode.running_max:.1f} running per server"
    episodes = f"{decode.episodes:,} completed episodes"
    held = f", scaled x{decode.calibration:.3f} to re-run at the log's episodes per second"
    curve = (
        (
            Parameter(key="decode_step_s", value=decode.decode_step_s, unit="s",
                      basis=f"{episodes} at {running}{held}"),
            Parameter(key="decode_s_per_seq", value=decode.decode_s_per_seq, unit="s/seq",
                      basis=f"{episodes} at {running}{held}"),
        )
        if decode.separated
        else (
            Parameter(key="decode_compute_s_per_seq", value=decode.decode_compute_s_per_seq,
                      unit="s/seq",
                      basis=f"{episodes} at {running}: too narrow to tell a from b, so the "
                      f"server is held at the throughput it measured (step = c·n){held}"),
        )
    )  # fmt: skip
    steps = Parameter(key="request_steps", value=decode.request_steps, unit="steps",
                      basis=f"{episodes} at {running}: the seconds of the shortest episodes "
                      "that grow with the step (0 where a and b are not told apart)")  # fmt: skip
    prefill = f"{decode.prefill_min:.0f}-{decode.prefill_max:.0f} prompt tokens per server"
    tokens = f"{trainer.tokens_min:,.0f}-{trainer.tokens_max:,.0f} tokens"
    return (
        *curve,
        steps,
        Parameter(key="prefill_s_per_token", value=decode.prefill_s_per_token, unit="s/token",
                  basis=f"{prefill} dispatched during an episode's life, scaled "
                  f"x{decode.calibration:.3f} as the decode step"),
        Parameter(key="episode_overhead_s", value=decode.overhead_s, unit="s",
                  basis="the decode fit's intercept (environment, HTTP)"),
        Parameter(key="colocation_coupling", value=decode.coupling, unit="x",
                  basis="episodes' seconds against the share of their life the trainer "
                  "trained (0: not colocated)"),
        Parameter(key="train_step_s", value=trainer.fixed_s, unit="s",
                  basis=f"{trainer.batches} batches trained one at a time, {tokens}, "
                  f"x{trainer.mean_kept:.3f} so that the jittered draws keep their mean"),
        Parameter(key="train_s_per_token", value=trainer.per_token_s, unit="s/token",
                  basis=f"{trainer.batches} batches, {tokens}"),
        Parameter(key="weight_update_s", value=recorded.weight_update_s * trainer.mean_kept,
                  unit="s", basis="the mean of the recorded updates (version_pending to "
                  f"version_live), x{trainer.mean_kept:.3f} as the trainer's times (drawn with "
                  "its jitter)"),
        Parameter(key="pause_inference_on_update", value=recorded.pause_inference_on_update,
                  unit="", basis="no arrival inside an update window" if
                  recorded.pause_inference_on_update else "arrivals inside update windows"),
    )  # fmt: skip


def range_warnings(
    fit: SharedFit, scenario: Scenario, policy: str, *, recorded: bool = False
) -> list[str]:
    """One line per figure the simulated `policy` (its scenario) takes outside the log's
    range (the KV cache only above it). A policy may keep up to `max_inflight` running;
    the `recorded` one keeps what the log shows, scaled by its `max_inflight` (its gate
    may hold it below)."""
    run, world = scenario.run, scenario.world
    servers = world.inference_servers
    scale = run.max_inflight / max(fit.recorded_max_inflight, 1) * fit.decode.servers / servers
    running = fit.ranges[0].high * scale if recorded else run.max_inflight / servers
    expected = {
        "running requests per server": running,
        "trained tokens per batch": fit.ranges[1].high * (run.batch_size or 0)
        / max(fit.recorded_batch_size, 1),
        "KV tokens per server": fit.ranges[2].high * scale,
    }  # fmt: skip
    lines = []
    for log_range in fit.ranges:
        value = expected[log_range.figure]
        above = value > log_range.high * RANGE_SLACK
        below = value * RANGE_SLACK < log_range.low
        if log_range.high > 0.0 and (above or below):
            lines.append(
                f"{policy}: up to {value:,.0f} {log_range.figure} (max_inflight "
                f"{run.max_inflight}, batch_size {run.batch_size}) where the log shows "
                f"{log_range.low:,.0f}-{log_range.high:,.0f}: the fit is extrapolated"
            )
    return lines


def running_warnings(fit: SharedFit, runs: dict[str, dict[str, Any]], servers: int) -> list[str]:
    """One line per simulated run whose mean running requests per server (its rollout
    seconds over its virtual seconds: Little's law) fell below the log's range, which
    `range_warnings`, reading `max_inflight` before the run, cannot see: a gate holds a
    policy far below its `max_inflight` (on the twin, prime-rl ran 20 of 128; from a
    per-episode log at 68-128 running the world ran it at 28, 39% slow: the decode curve
    extrapolated down)."""
    low, high = fit.ranges[0].low, fit.ranges[0].high
    lines = []
    for policy, report in runs.items():
        seconds = report.get("virtual_seconds") or 0.0
        running = report["rollout_seconds_total"] / seconds / servers if seconds > 0 else low
        if running * RANGE_SLACK < low:
            lines.append(
                f"{policy}: ran {running:,.1f} running requests per server on average, where "
                f"the log shows {low:,.0f}-{high:,.0f}: the fit is extrapolated"
            )
    return lines
