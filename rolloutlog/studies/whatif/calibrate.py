"""The fitted servers held to the recorded throughput: what a re-run of the log must show.

The decode fit (`decode_fit`) regresses each episode's seconds on its tokens, the prompts
dispatched during its life and the sequences beside it; least squares matches the mean
seconds, not the rate at which the servers finished episodes, and on the CPU twin's quiet
probes the fitted servers, re-running the recorded policy, trained up to 15% more episodes
per second than the log (benchmarks/RESULTS.md § benchmarks/predict.py). That excess sets
the balance between inference and the trainer, hence the trainer's idle time and how many
rollouts wait long enough to go stale, so every what-if inherits it.

`calibrate` scales the servers' costs (the decode step's parts and the prefill, not the
environment seconds off the server) by one factor so that the recorded policy, re-run on
the fitted world, completes episodes at the log's rate: a first re-run gives the rate at
the fitted costs, a second at costs scaled by the ratio, and the factor is then
interpolated between the two (the rate falls as the costs grow, less than in proportion
where the servers were not always busy). The factor stays within `SCALE_BOUNDS`: a run
whose rate its servers do not set (a trainer-bound one) is not bent out of shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs

from rolloutlog.studies.whatif.decode_fit import STEP_FLOOR_S, DecodeFit

SCALE_BOUNDS = (0.5, 2.0)  # the least and most the servers' costs are scaled
RESPONSE_BOUNDS = (0.1, 2.0)  # how the rate may follow the costs (1: in proportion)


def scaled(decode: DecodeFit, factor: float) -> DecodeFit:
    """The fit with every server cost `factor` times as large (the step's fixed part no
    less than the world's least, `STEP_FLOOR_S`, where the fit holds it there)."""
    return attrs.evolve(
        decode,
        decode_step_s=max(decode.decode_step_s * factor, STEP_FLOOR_S),
        decode_s_per_seq=decode.decode_s_per_seq * factor,
        decode_compute_s_per_seq=decode.decode_compute_s_per_seq * factor,
        prefill_s_per_token=decode.prefill_s_per_token * factor,
        calibration=decode.calibration * factor,
    )


def calibrate(
    decode: DecodeFit, rerun: Callable[[DecodeFit], float], recorded_rate: float
) -> DecodeFit:
    """`decode` scaled so that `rerun` (episodes completed per second when the recorded
    policy runs on a world of that fit) gives `recorded_rate`."""
    if recorded_rate <= 0.0:
        return decode
    low, high = SCALE_BOUNDS
    first = rerun(decode)
    if first <= 0.0:
        return decode
    factor = min(max(first / recorded_rate, low), high)
    if math.isclose(factor, 1.0, rel_tol=1e-3):
        return decode
    second = rerun(scaled(decode, factor))
    if second <= 0.0 or math.isclose(second, first, rel_tol=1e-6):
        return scaled(decode, factor)
    # rate ∝ factor^-response between the two re-runs: solve for the recorded rate
    response = math.log(first / second) / math.log(factor)
    response = min(max(response, RESPONSE_BOUNDS[0]), RESPONSE_BOUNDS[1])
    target = factor * (second / recorded_rate) ** (1.0 / response)
    return scaled(decode, min(max(target, low), high))
