"""The decode fit (`studies.whatif.decode_fit`) recovers the shared world's curve from
simulated logs whose truth is known, and says when a log cannot identify it."""

from __future__ import annotations

import pytest

from rolloutlog.events.types import Event
from rolloutlog.runtime.sim.scenario import scenario_from_mapping
from rolloutlog.runtime.sim.simulation import simulate
from rolloutlog.studies.whatif.decode_fit import fit_decode
from rolloutlog.studies.whatif.fit import FitError

STEP_S, PER_SEQ_S = 0.02, 0.002
FIT_ERROR = 0.10  # the stated error: a and b within 10% from three probes


def _probe(max_inflight: int, servers: int, steps: int = 30) -> list[Event]:
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


def test_one_saturated_probe_reports_that_it_saw_one_concurrency() -> None:
    """At a constant number in flight, a and b cannot be told apart: the range says so."""
    fit = fit_decode([_probe(16, 1)])
    assert fit.running_max - fit.running_min < 1e-6


def test_a_log_with_too_few_episodes_is_refused_by_name() -> None:
    with pytest.raises(FitError, match="completed episodes"):
        fit_decode([_probe(4, 1, steps=1)[:20]])
