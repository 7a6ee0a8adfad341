"""The equivalence harness on deciders: the staleness policies agree where docs/contract.md says
they must, and a broken candidate is reported at the first seq where it goes wrong."""

from __future__ import annotations

import attrs
from hypothesis import given

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import SINK
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


@given(world_logs(run_configs(staleness="per-episode"), single_version_groups=True))
def test_per_group_equals_per_episode_when_groups_start_at_one_version(log: list[Event]) -> None:
    """Property 5: identical batches, curriculum calls and drops."""
    assert_equivalent(log, TODAYS_DECIDERS, decided_by(configure=_per_group), OBSERVATIONS)


def _never_admit(state: object, event: Event) -> list[Event]:
    """A sink that forgets to admit anything: the curriculum answer is lost."""
    return [
        attrs.evolve(e, admitted=False) if e.kind == "group_scored" else e
        for e in SINK.decide(state, event)
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
