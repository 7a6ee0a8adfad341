"""The equivalence harness on deciders: the staleness policies agree where docs/contract.md says
they must, and a broken candidate is reported at the first seq where it goes wrong."""

from __future__ import annotations

import attrs
from hypothesis import given

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import SINK
from rolloutlog.core.rules.table import Rules
from rolloutlog.events.types import Event
from rolloutlog.testing.equivalence import (
    OBSERVATIONS,
    TODAYS_DECIDERS,
    assert_equivalent,
    decided_by,
    first_difference,
)
from rolloutlog.testing.strategies import run_configs, world_logs


def _per_group(config: RunConfig) -> RunConfig:
    return attrs.evolve(config, staleness="per-group")


# Property 5 assumes the lag within the bound and stale arrivals judged at finalize
# (docs/contract.md): prime-rl's `gate_lag = "one"` at bound 0 dispatches groups stale
# already, and with `stale_check = "after-curriculum"` per-episode scores the stale
# siblings of a stale cancellation that per-group voids.
ONE_VERSION_CONFIGS = run_configs(
    staleness="per-episode", gate_lag="target-lag", stale_check="at-finalize"
)


@given(world_logs(ONE_VERSION_CONFIGS, single_version_groups=True))
def test_per_group_equals_per_episode_when_groups_start_at_one_version(log: list[Event]) -> None:
    """Property 5: identical batches, curriculum calls and drops."""
    assert_equivalent(log, TODAYS_DECIDERS, decided_by(configure=_per_group), OBSERVATIONS)


def _never_admit(rules: Rules, state: object, event: Event) -> list[Event]:
    """A sink that forgets to admit anything: the curriculum answer is lost."""
    return [
        attrs.evolve(e, admitted=False) if e.kind == "group_scored" else e
        for e in SINK.decide(rules, state, event)
    ]


STINGY = decided_by(sink=attrs.evolve(SINK, name="stingy", decide=_never_admit))


@given(world_logs())
def test_a_broken_sink_is_reported_at_its_first_wrong_decision(log: list[Event]) -> None:
    admitted = [e for e in log if e.kind == "group_scored" and e.admitted]  # type: ignore[attr-defined]
    difference = first_difference(log, TODAYS_DECIDERS, STINGY)
    if not admitted:
        assert difference is None
        return
    assert difference is not None
    assert (difference.aspect, difference.seq) == ("events", admitted[0].seq)
    observed = first_difference(log, TODAYS_DECIDERS, STINGY, OBSERVATIONS)
    assert observed is not None and observed.aspect == "curriculum"
    assert observed.seq == admitted[0].seq and f"seq {admitted[0].seq}" in str(observed)
