"""The fitted servers held to the recorded throughput (`studies.whatif.calibrate`)."""

from __future__ import annotations

import attrs
import pytest

from rolloutlog.runtime.sim.world_config import WorldConfig
from rolloutlog.studies.whatif.calibrate import SCALE_BOUNDS, calibrate, scaled
from rolloutlog.studies.whatif.decode_fit import STEP_FLOOR_S, DecodeFit

FIT = DecodeFit(
    decode_step_s=0.01,
    decode_s_per_seq=0.001,
    decode_compute_s_per_seq=0.0,
    request_steps=1.5,
    prefill_s_per_token=1e-4,
    overhead_s=0.5,
    coupling=0.0,
    servers=1,
    episodes=100,
    running_min=8.0,
    running_max=32.0,
    prefill_min=0.0,
    prefill_max=100.0,
    r_squared=0.9,
)


class _Servers:
    """A world whose rate falls as factor^-response with the costs' factor; the factors
    it was asked about are kept."""

    def __init__(self, rate_at_fit: float, response: float) -> None:
        self.rate_at_fit, self.response = rate_at_fit, response
        self.asked: list[float] = []

    def __call__(self, decode: DecodeFit) -> float:
        self.asked.append(decode.calibration)
        return self.rate_at_fit * decode.calibration**-self.response


@pytest.mark.parametrize("response", [0.3, 0.7, 1.0, 1.5])
@pytest.mark.parametrize("recorded", [80.0, 100.0, 130.0])
def test_the_rerun_lands_on_the_recorded_rate_in_two_reruns(
    response: float, recorded: float
) -> None:
    rerun = _Servers(100.0, response)
    fit = calibrate(FIT, rerun, recorded)
    assert len(rerun.asked) <= 2
    want = (100.0 / recorded) ** (1.0 / response)
    if SCALE_BOUNDS[0] <= want <= SCALE_BOUNDS[1]:
        assert 100.0 * fit.calibration**-response == pytest.approx(recorded, rel=1e-6)
    else:
        assert fit.calibration in SCALE_BOUNDS


def test_only_the_servers_costs_scale() -> None:
    fit = scaled(FIT, 1.5)
    assert fit.decode_step_s == pytest.approx(0.015)
    assert fit.decode_s_per_seq == pytest.approx(0.0015)
    assert fit.prefill_s_per_token == pytest.approx(1.5e-4)
    assert fit.overhead_s == FIT.overhead_s  # off the server: not scaled
    assert fit.request_steps == FIT.request_steps  # in steps: they scale with the step
    assert fit.calibration == pytest.approx(1.5)


def test_a_step_held_at_the_floor_stays_there_scaled_down() -> None:
    """A compute-bound fit holds `a` at the world's least step; scaled below 1 it stays
    there (a world refuses a smaller one: `whatif` on an areal log of the twin failed)."""
    fit = scaled(attrs.evolve(FIT, decode_step_s=STEP_FLOOR_S), 0.7)
    assert fit.decode_step_s == STEP_FLOOR_S
    WorldConfig.from_mapping({"decode_step_s": fit.decode_step_s}, where="world")


def test_a_rate_the_costs_do_not_move_is_held_within_bounds() -> None:
    """A trainer-bound run: its rate does not follow the servers; the factor stays bounded."""
    fit = calibrate(FIT, lambda decode: 50.0, 100.0)
    assert SCALE_BOUNDS[0] <= fit.calibration <= SCALE_BOUNDS[1]


def test_no_recorded_rate_leaves_the_fit_alone() -> None:
    assert calibrate(FIT, lambda decode: 50.0, 0.0) is FIT
