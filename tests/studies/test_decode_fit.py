"""The decode fit (`studies.whatif.decode_fit`) recovers the shared world's curve from
simulated logs whose truth is known, and says when a log cannot identify it."""

from __future__ import annotations

import pytest

from rolloutlog.events.types import Event
from rolloutlog.runtime.sim.scenario import scenario_from_mapping
from rolloutlog.runtime.sim.simulation import simulate
from rolloutlog.studies.whatif.decode_fit import fit_decode
from rolloutlog.studies.whatif.fit import FitError

STEP_S, PER_SEQ_S, REQUEST_STEPS = 0.02, 0.002, 2.0
FIT_ERROR = 0.10  # the stated error: a and b within 10% from three probes
# the request's own steps, within one decode step on one server (measured: 0.6-0.8 high,
# an episode's mean concurrency over its life stands for the batch it leaves); on two
# servers the log does not say which server an episode ran on and `s` is not pinned
STEPS_ERROR = 1.0


def _probe(
    max_inflight: int, servers: int, steps: int = 30, request_steps: float = REQUEST_STEPS
) -> list[Event]:
    """A simulated run on the shared world, as a live probe's log would be."""
    scenario = scenario_from_mapping(
        {
            "steps": steps,
            "seed": 1,
            "run": {"group_size": 8, "max_inflight": max_inflight, "batch_size": 32},
            "world": {
                "inference": "shared",
                "inference_servers": servers,
                "decode_step_s": STEP_S,
                "decode_s_per_seq": PER_SEQ_S,
                "request_steps": request_steps,
                "prompt_tokens": 128,
                "episode_overhead_s": 1.0,
                "task_length_tokens": 256,
                "max_completion_tokens": 2048,
                "train_step_s": 10.0,
                "weight_update_s": 2.0,
            },
        }
    )
    events: list[Event] = []
    simulate(scenario, on_events=events.extend)
    return events


@pytest.mark.parametrize("servers", [1, 2])
def test_three_probes_recover_the_decode_curve(servers: int) -> None:
    fit = fit_decode([_probe(m, servers) for m in (8, 32, 96)], servers=servers)
    assert fit.decode_step_s == pytest.approx(STEP_S, rel=FIT_ERROR)
    assert fit.decode_s_per_seq == pytest.approx(PER_SEQ_S, rel=FIT_ERROR)
    assert fit.running_min < 8 / servers + 1 and fit.running_max > 90 / servers
    assert fit.r_squared > 0.99


@pytest.mark.parametrize("request_steps", [0.0, 1.0, 2.0])
def test_the_request_steps_are_told_from_the_overhead_and_the_fixed_step(
    request_steps: float,
) -> None:
    """A request's own steps off the batch cost `s · step(n)`: more with the load, unlike
    the environment seconds (the overhead) and unlike the step's fixed part (per token)."""
    probes = [_probe(m, 1, request_steps=request_steps) for m in (8, 32, 96)]
    fit = fit_decode(probes)
    assert fit.request_steps == pytest.approx(request_steps, abs=STEPS_ERROR)
    assert fit.decode_step_s == pytest.approx(STEP_S, rel=FIT_ERROR)
    assert fit.decode_s_per_seq == pytest.approx(PER_SEQ_S, rel=FIT_ERROR)
    assert fit.overhead_s == pytest.approx(1.0, rel=FIT_ERROR)


def test_one_saturated_probe_reports_that_it_saw_one_concurrency() -> None:
    """At a constant number in flight, a and b cannot be told apart: the range says so,
    and `s` (told from the overhead only as the step grows) is held at 0."""
    fit = fit_decode([_probe(16, 1)])
    assert fit.running_max - fit.running_min < 1e-6
    assert not fit.separated and fit.request_steps == 0.0


def test_a_log_with_too_few_episodes_is_refused_by_name() -> None:
    with pytest.raises(FitError, match="completed episodes"):
        fit_decode([_probe(4, 1, steps=1)[:20]])
