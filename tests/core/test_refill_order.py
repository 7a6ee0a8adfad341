"""A completion's refill is decided before the batch that completion ships (docs/contract.md
§ Decisions and departures): what that costs, and the bound the ship hold puts on it.

An episode dispatched in a reaction that later ships k batches is k steps older once the
reaction settles. The ship hold lets each of those batches ship only while the trainer is
within `target_lag`, so a per-episode stamp is at most `target_lag + 1` old then: past the
bound only when `target_lag` equals it, and such an episode is never trained.
"""

from __future__ import annotations

from hypothesis import given

from rolloutlog.core.account.properties import HARD_BOUND, kept_properties
from rolloutlog.core.config import RunConfig
from rolloutlog.core.presets import rules_for
from rolloutlog.core.staleness import rollout_age
from rolloutlog.events.types import (
    WORLD_KINDS,
    BatchShipped,
    EpisodeDispatched,
    Event,
    GroupOpened,
    RunStarted,
)
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.runtime.sim.simulation import simulate
from rolloutlog.testing.strategies import world_logs

Aged = tuple[str, int, int]  # episode id, age at its dispatch, age once its reaction settled


def _ages_once_settled(log: list[Event]) -> tuple[list[Aged], set[str], int]:
    """(each train dispatch's ages, the shipped ids, the number of dispatches)."""
    aging: dict[str, bool] = {}  # group id -> whether its episodes age (train, not frozen)
    step, dispatches = 1, 0
    settled: list[Aged] = []
    pending: list[tuple[EpisodeDispatched, int]] = []
    shipped: set[str] = set()
    for event in [*log, None]:
        if event is None or event.kind in WORLD_KINDS:
            settled.extend(
                (d.episode_id, age, rollout_age(d.policy_version, step)) for d, age in pending
            )
            pending = []
        if isinstance(event, GroupOpened):
            aging[event.group_id] = event.work == "train" and not event.frozen
        elif isinstance(event, EpisodeDispatched):
            dispatches += 1
            if aging[event.group_id]:
                pending.append((event, rollout_age(event.policy_version, step)))
        elif isinstance(event, BatchShipped):
            step = event.step + 1
            shipped.update(event.episode_ids)
    return settled, shipped, dispatches


def _config(log: list[Event]) -> RunConfig:
    first = log[0]
    assert isinstance(first, RunStarted)
    return RunConfig.from_mapping(first.config, startable=False)


@given(world_logs(max_steps=80))
def test_a_dispatch_is_at_most_one_past_the_lag_once_its_reaction_settles(
    log: list[Event],
) -> None:
    config = _config(log)
    settled, shipped, _ = _ages_once_settled(log)
    bound = config.max_off_policy_steps
    if config.staleness == "per-episode":
        lag = rules_for(config).lag(config)  # target_lag or the gate's own, and K - 1
        assert all(age <= lag + 1 for _, _, age in settled), settled
    if HARD_BOUND in kept_properties(config):  # soft staleness trains them (and counts them)
        assert not {e for e, _, age in settled if age > bound} & shipped  # never trained


def _tight(policy: str) -> tuple[int, int, int]:
    """(dispatches fresh when they left and past the bound once settled, of them shipped,
    all dispatches) on the `tight` scenario, bound 1 and target_lag 1, seed 7, 30 steps."""
    scenario = load_scenario("tight").with_seed(7).with_steps(30).with_policy(policy)
    log: list[Event] = []
    simulate(scenario, on_events=log.extend)
    settled, shipped, dispatches = _ages_once_settled(log)
    bound = scenario.run.max_off_policy_steps
    stale = {e for e, at_dispatch, age in settled if at_dispatch <= bound < age}
    return len(stale), len(stale & shipped), dispatches


def test_on_the_tight_scenario_a_few_dispatches_leave_fresh_and_settle_stale() -> None:
    """The figures of benchmarks/RESULTS.md § The refill order on the `tight` scenario."""
    assert _tight("per-episode") == (1, 0, 3820)
    assert _tight("per-group") == (4, 0, 4485)
