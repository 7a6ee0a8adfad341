"""How far to trust a what-if count that rests on the fitted late-arrival rate.

Under a policy that cuts stragglers, nearly every finished rollout discarded is a completion
that arrived after its cut: an abort that lost its race. The what-if draws those races at
the fitted `late_arrival_rate`, and that rate comes from the few races the recorded log
could show (`fit.observed_races`: k late arrivals in n races seen). The count is then good
only to what k in n allow, so `whatif` gives it with a 95% interval:

- **The rate.** Jeffreys' interval: the rate's posterior from k late in n races is
  Beta(k + 1/2, n - k + 1/2) (n may be fractional: a partly watched race counts by the
  chance its loss would have shown).
- **The count.** The what-if run counts the races it drew at the fitted rate whose loss
  would discard a finished rollout (`SimResult.drawn_races`, A: in-flight cancellations of
  completions, not at shutdown) and how many of them lost (`drawn_late`). The true run
  loses Binomial(A, p) of such races for the world's rate p, so with p from the posterior
  its lost races are beta-binomial; the interval is that distribution's 2.5% and 97.5%
  points, plus the rest of the what-if's count (stale drops, and races decided by the
  log's own facts), taken as it is. It carries the rate's uncertainty and the true run's
  own draw, not the what-if's draw (it uses A, not the what-if's lost count), nor the
  fitted world's other errors (the cuts, what the cut episodes had left to run: within a
  few percent, docs/whatif.md).
"""

from __future__ import annotations

import math

import attrs

LEVEL = 0.95
_BISECTIONS = 60
_FRACTION_STEPS = 300
_TINY = 1e-300


@attrs.frozen
class RaceSample:
    """The races a recorded log showed: `late` arrivals in `seen` races (fractional)."""

    late: int
    seen: float

    def __attrs_post_init__(self) -> None:
        if self.late < 0 or self.seen < self.late:
            raise ValueError(f"race sample: {self.late} late in {self.seen} races seen")

    @property
    def posterior(self) -> tuple[float, float]:
        """Jeffreys' posterior of the late-arrival rate, Beta(a, b): (a, b)."""
        return self.late + 0.5, self.seen - self.late + 0.5


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta (modified Lentz)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, _FRACTION_STEPS):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            result *= c * d
        if abs(c * d - 1.0) < 1e-14:
            break
    return result


def beta_cdf(x: float, a: float, b: float) -> float:
    """P(X <= x) for X ~ Beta(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(a * math.log(x) + b * math.log1p(-x) - _log_beta(a, b))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _fraction(a, b, x) / a
    return 1.0 - front * _fraction(b, a, 1.0 - x) / b


def _beta_quantile(q: float, a: float, b: float) -> float:
    low, high = 0.0, 1.0
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2.0
        low, high = (middle, high) if beta_cdf(middle, a, b) < q else (low, middle)
    return (low + high) / 2.0


def rate_interval(sample: RaceSample, level: float = LEVEL) -> tuple[float, float]:
    """Jeffreys' `level` interval on the late-arrival rate (0 below when nothing was late)."""
    a, b = sample.posterior
    tail = (1.0 - level) / 2.0
    low = 0.0 if sample.late == 0 else _beta_quantile(tail, a, b)
    return low, _beta_quantile(1.0 - tail, a, b)


def lost_races_interval(sample: RaceSample, races: int, level: float = LEVEL) -> tuple[int, int]:
    """The `level` interval of how many of `races` lose, the rate from `sample`'s posterior.

    The beta-binomial's 2.5% and 97.5% points (for 95%): the smallest counts whose
    cumulative probability reaches them."""
    if races < 0:
        raise ValueError(f"races must be >= 0, got {races}")
    a, b = sample.posterior
    tail = (1.0 - level) / 2.0
    base = math.lgamma(races + 1) - _log_beta(a, b)
    cumulative, low = 0.0, None
    for lost in range(races + 1):
        log_p = (
            base
            - math.lgamma(lost + 1)
            - math.lgamma(races - lost + 1)
            + _log_beta(lost + a, races - lost + b)
        )
        cumulative += math.exp(log_p)
        if low is None and cumulative >= tail:
            low = lost
        if cumulative >= 1.0 - tail:
            return (lost if low is None else low), lost
    return (races if low is None else low), races


def discarded_interval(
    discarded: int, drawn_late: int, drawn_races: int, sample: RaceSample, level: float = LEVEL
) -> tuple[int, int]:
    """The `level` interval of a what-if's finished rollouts discarded.

    `discarded`: the what-if's count, `drawn_late` of them completions that lost a race
    drawn at the fitted rate, out of `drawn_races` such races. The rest of the count is
    kept; the lost races are replaced by their interval (`lost_races_interval`).
    """
    if not 0 <= drawn_late <= min(discarded, drawn_races):
        raise ValueError(
            f"{drawn_late} lost races of {drawn_races} cannot be part of {discarded} discarded"
        )
    low, high = lost_races_interval(sample, drawn_races, level)
    rest = discarded - drawn_late
    return rest + low, rest + high
