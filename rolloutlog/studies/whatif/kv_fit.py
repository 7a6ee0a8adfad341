"""The servers' KV-cache capacity, fitted where a log shows them reaching it.

In the shared world (`runtime.sim.server`) a request holds its prompt and its tokens so
far in its server's KV cache; one that does not fit waits, and growth past the capacity
preempts the newest request, which recomputes its tokens later. Below the capacity an
episode's seconds follow the decode curve (`decode_fit`); above it they grow with the
excess (the wait, the recomputed prefill). A log does not record the cache, but it records
each episode's dispatch, arrival and tokens, so what the servers held can be read back
(`held_tokens`). That reading follows the cache while nothing waits and overstates it
above the capacity (a waiting episode is counted as growing), so the capacity is where
the episodes' seconds start to exceed the curve, not the most the log held.

The fit: for each candidate level (quantiles of the tokens held per server at the
episodes' dispatch, `LEVELS`, then `REFINE` either side of the best), the decode curve is
fitted on the episodes dispatched at or below it (the unconstrained part: the waits above
would bend the curve), and the log of each episode's seconds over the curve's is fitted by
a step, one mean below the level and another above it; the level with the least squared
residual is the estimate. A change point needs no model of the wait, which the log cannot
separate from the curve; a step rather than a hinge (rising with the excess), since an
episode dispatched just below the capacity may still wait when the others grow: on the
simulated logs of `benchmarks/kv_fit.py` a hinge's level came up to 39% low, the step's
within 17%. It is declared seen only on a clear signature: at least `ABOVE_MIN` episodes
above it, whose mean log residual exceeds that below by `STEP_MIN` and by `NOISE_RATIO`
times the spread below. Otherwise it is not seen and the curve is fitted on every
episode: a log that ran below the capacity shows no step, and one above it nearly
throughout (or at one load throughout) has no clean part to fit the curve on, which shows
as a spread below as large as the step. Nor is it looked for where the reading fails: where
the fitted overhead exceeds the seconds of many episodes (`UNREAD_MAX`), those hold nothing
by the reading, the tokens read back are about 0 at many dispatches, and episodes that ran
fast for other reasons (dispatched into a server that had emptied) pass for a step at a
capacity of a few tokens.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import attrs
import numpy as np

from rolloutlog.events.types import EpisodeCompleted
from rolloutlog.studies.whatif.decode_fit import (
    EPISODES_MIN,
    DecodeFit,
    DecodeRows,
    Occupancy,
    check_servers,
    fit_rows,
)
from rolloutlog.studies.whatif.fit import FitError, LogCollector

LEVELS = tuple(0.2 + 0.05 * i for i in range(16))  # candidate quantiles of the held tokens
REFINE = 0.025  # then the quantiles this far either side of the best (a decode fit each)
ABOVE_MIN = 30  # episodes dispatched above the capacity that a signature needs
STEP_MIN = 0.1  # their mean log residual over that below: ~10% slower (noise: a few %)
NOISE_RATIO = 2.0  # and this many times the spread below: a log above the capacity nearly
# throughout fits its curve on waits too, and its spread below came out 1-2x its step
SECONDS_FLOOR = 1e-9  # the least seconds a log residual divides by
DECODING_MIN_S = 1e-6  # an episode that decoded for less held nothing (its rate would be
# the float noise of its arrival less its environment seconds)
# the most episodes whose seconds the fitted overhead may exceed (the reading counts them as
# holding nothing). Measured: 0-22% on the 18 simulated logs of benchmarks/kv_fit.py (22%
# where waits above the capacity raised the overhead of the fit on every episode, the
# capacity still recovered within 10%), 0-3% on the twin's and vLLM's probes; but 54% on a
# vLLM probe whose seconds its decode curve did not explain (R-squared 0.00), where a
# capacity of 7 tokens came out "seen", and 35% on a 3-batch vLLM probe of tests/vllm
# (R-squared 0.06), "seen" at 15 tokens under a bound of a half, its re-run then 2x fast
UNREAD_MAX = 0.3


@attrs.frozen(kw_only=True)
class KvFit:
    """The capacity per server (None: not seen), the decode curve fitted on the part of the
    log below it, and the signature that identifies it."""

    capacity: float | None
    decode: DecodeFit
    above: int  # episodes dispatched above the capacity
    step: float  # their mean log residual over that of the episodes below
    noise: float  # the spread of the log residuals below
    held_low: float  # tokens held per server at the episodes' dispatch: the least and most
    held_high: float
    unread: float = 0.0  # the share of episodes the fitted overhead leaves no decoding time

    def basis(self, kv_peak: float) -> str:
        """What of the log identifies the capacity, or that nothing does."""
        if self.capacity is None and self.unread > UNREAD_MAX:
            return (
                f"not seen: the fitted overhead ({self.decode.overhead_s:.3g} s) exceeds the "
                f"seconds of {self.unread:.0%} of the episodes, so the tokens the servers held "
                "cannot be read back; the world's default is kept"
            )
        if self.capacity is None:
            return (
                f"not seen: the log held at most {kv_peak:,.0f} tokens per server, and no "
                "level shows episodes' seconds rising clearly above the decode curve; the "
                "world's default is kept"
            )
        below = self.decode.episodes
        return (
            f"seen: the {self.above:,} episodes dispatched while a server held more (of "
            f"{self.held_low:,.0f}-{self.held_high:,.0f} tokens per server at dispatch) ran "
            f"x{math.exp(self.step):.2f} as long as the {below:,} below it, against the "
            f"decode curve fitted on those (log spread {self.noise:.2f})"
        )


def fit_kv(collector: LogCollector, rows: DecodeRows, servers: int) -> KvFit:
    """The capacity of a collected log's servers, where its episodes' seconds show it, and
    the decode curve of its `rows` (`decode_rows`) on the part below it."""
    check_servers(servers)
    every = fit_rows(rows, servers)  # too few rows: the decode fit's error says so
    held = held_tokens(collector, every.overhead_s, rows.dispatched) / servers
    unread = float(np.mean(rows.seconds <= every.overhead_s))
    spread = {"held_low": float(held.min()), "held_high": float(held.max()), "unread": unread}
    # many episodes hold nothing by the reading where `unread` is high: no level to find
    best = None if unread > UNREAD_MAX else _best_level(rows, held, servers)
    if best is None or not _clear(best):
        return KvFit(capacity=None, decode=every, above=0, step=0.0, noise=0.0, **spread)
    return KvFit(
        capacity=best.capacity,
        decode=best.decode,
        above=best.above,
        step=best.step,
        noise=best.noise,
        **spread,
    )


def held_tokens(collector: LogCollector, overhead_s: float, times: np.ndarray) -> np.ndarray:
    """KV tokens the log's completed episodes held at `times`, on all servers together:
    each its prompt from dispatch and its completion growing evenly until its decoding
    ended (`overhead_s`, its environment seconds, before its arrival), both freed then;
    one whose decoding took under `DECODING_MIN_S` is left out."""
    if not math.isfinite(overhead_s) or overhead_s < 0.0:
        raise FitError(f"overhead_s: must be finite and >= 0 (got {overhead_s})")
    prompts: list[tuple[float, float]] = []
    rates: list[tuple[float, float]] = []
    decoded: list[tuple[float, float]] = []
    for flight in collector.flights.values():
        arrival = flight.arrival
        if not isinstance(arrival, EpisodeCompleted):
            continue
        end = arrival.t - overhead_s
        if end - flight.t < DECODING_MIN_S:
            continue
        per_s = arrival.completion_tokens / (end - flight.t)
        prompts += [(flight.t, arrival.prompt_tokens), (end, -arrival.prompt_tokens)]
        rates += [(flight.t, per_s), (end, -per_s)]
        decoded.append((end, arrival.completion_tokens))
    prompt, rate, done = Occupancy(prompts), Occupancy(rates), Occupancy(decoded)
    return np.array([prompt.at(t) + rate.integral(t) - done.at(t) for t in times])


class _Level(NamedTuple):
    capacity: float
    decode: DecodeFit  # fitted on the episodes dispatched at or below the capacity
    residual: float  # squared, of the step
    step: float
    noise: float
    above: int


def _best_level(rows: DecodeRows, held: np.ndarray, servers: int) -> _Level | None:
    """The level of least squared residual among the quantiles `LEVELS` of the held tokens,
    then those `REFINE` either side of the best; None where no quantile leaves enough
    episodes on each side (a decode fit below, a signature above)."""
    tried: dict[float, _Level] = {}

    def fit(quantile: float) -> None:
        level = float(np.quantile(held, quantile))
        enough = np.sum(held <= level) >= EPISODES_MIN and np.sum(held > level) >= ABOVE_MIN
        if level > 0.0 and enough and level not in tried:
            tried[level] = _level(rows, held, servers, level)

    for quantile in LEVELS:
        fit(quantile)
    if not tried:
        return None
    best = min(tried.values(), key=lambda level: level.residual)
    middle = float(np.mean(held <= best.capacity))  # the best level's quantile
    for quantile in (middle - REFINE, middle + REFINE):
        fit(min(max(quantile, 0.0), 1.0))
    return min(tried.values(), key=lambda level: level.residual)


def _level(rows: DecodeRows, held: np.ndarray, servers: int, capacity: float) -> _Level:
    """The curve fitted below `capacity`, and the step of the log residuals at it."""
    below = held <= capacity
    decode = fit_rows(rows.where(below), servers)
    predicted = np.maximum(decode.predicted(rows), SECONDS_FLOOR)
    residual = np.log(np.maximum(rows.seconds, SECONDS_FLOOR) / predicted)
    design = np.column_stack([np.ones_like(held), ~below])
    coefficients, *_ = np.linalg.lstsq(design, residual, rcond=None)
    left = residual - design @ coefficients
    return _Level(
        capacity=capacity,
        decode=decode,
        residual=float(left @ left),
        step=float(residual[~below].mean() - residual[below].mean()),
        noise=float(residual[below].std()),
        above=int(np.sum(~below)),
    )


def _clear(level: _Level) -> bool:
    """Whether the episodes above a level show it: enough of them, well over the noise."""
    return level.above >= ABOVE_MIN and level.step >= max(STEP_MIN, NOISE_RATIO * level.noise)
