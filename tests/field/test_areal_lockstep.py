"""AReaL's own `StalenessManager` in lockstep with the `areal` preset, over whole simulated runs.

Each run is `simulate --policy areal` on a built-in scenario. Its events drive AReaL's
manager (areal 1.0.4, loaded by path from its wheel: `tests.core.areal_wheel`) through the
callbacks AReaL's `WorkflowExecutor` makes for the same facts: a train group opened is a
rollout enqueued and submitted (infra/workflow_executor.py:360-374), a train group scored is
one accepted or rejected (workflow_executor.py:1114-1129), and `version_pending(v)` is the
version the manager reads. A request that fails fails AReaL's whole workflow, rejected
(workflow_executor.py:1143-1144); rolloutlog trains the members that arrived, and the
preset counts admitted episodes in whole groups of G, so a scored group is fed as accepted
when its admitted members complete another whole group, else as rejected. The same events
evolve the preset's own ledger, and after every event AReaL's `get_capacity()` is compared
with `admission_field.areal_groups` on it.

The capacity is AReaL's; when AReaL would submit is not only its capacity. AReaL submits
exactly while the executor is not paused and its capacity is positive
(workflow_executor.py:437-447), and the trainer pauses the executor for every weight update
(trainer/rl_trainer.py:754, resumed at 859, once the update is done and `agenerate` has
resubmitted the requests it aborted). Four tests check the preset's openings against that:
never past a zero capacity, nothing while the executor is paused, only where AReaL would
submit, and wherever it would.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import attrs
import pytest

from rolloutlog.core.config import RunConfig
from rolloutlog.core.rules.admission import TrainLedger
from rolloutlog.core.rules.admission_field import areal_groups, evolve_group_ledger
from rolloutlog.events import types as ev
from rolloutlog.events.types import Event
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.runtime.sim.simulation import simulate
from tests.core.areal_wheel import areal_wheel, load_staleness_manager

# (scenario, seed, steps): the default world (eta 2), a loose bound (eta 4; 200 steps, where the
# gate binds with a permit free) and a tight one (eta 1). All three: target_lag 1.
RUNS = [("default", 3, 40), ("loose", 1, 200), ("tight", 7, 40)]


@pytest.fixture(scope="module")
def areal_module() -> types.ModuleType:
    return load_staleness_manager(areal_wheel())


@attrs.define
class Moment:
    """What both sides say at one point of the run: AReaL's capacity, the preset's, whether
    AReaL's executor is paused (an update under way), and whether the preset could open a
    group then (a permit free, no member owed)."""

    seq: int
    kind: str
    opens_train: bool  # the event after this moment opens a train group
    areal: int
    preset: int | None
    paused: bool
    room: bool


@attrs.define
class Lockstep:
    """Feeds a run's events to AReaL's manager, as its executor's callbacks, and to the
    preset's ledger; `moments` holds both capacities before each event and after the last."""

    config: RunConfig
    manager: Any = None
    ledger: TrainLedger = attrs.Factory(TrainLedger)
    version: int = 0  # the version AReaL's VersionProvider returns
    updating: bool = False  # from version_pending to its version_live
    interrupted: set[str] = attrs.Factory(set)  # aborted by the update, not yet resubmitted
    limit: int = 0
    inflight: set[str] = attrs.Factory(set)
    owed: dict[str, int] = attrs.Factory(dict)  # open group -> members not yet dispatched
    train: set[str] = attrs.Factory(set)
    admitted: int = 0  # train episodes admitted so far: accepted rollouts in groups of G
    moments: list[Moment] = attrs.Factory(list)

    def get_version(self) -> int:
        """AReaL's VersionProvider."""
        return self.version

    def moment(self, event: Event) -> Moment:
        """Both sides' counts right before `event`."""
        room = len(self.inflight) < self.limit and not any(self.owed.values())
        opens_train = isinstance(event, ev.GroupOpened) and event.work == "train"
        preset = areal_groups(self.config, self.ledger, self.version)
        capacity = self.manager.get_capacity()
        paused = self.updating or bool(self.interrupted)
        return Moment(event.seq, event.kind, opens_train, capacity, preset, paused, room)

    def feed(self, event: Event) -> None:
        self.moments.append(self.moment(event))
        self._areal(event)
        self._world(event)
        evolve_group_ledger(self.ledger, event)

    def _areal(self, event: Event) -> None:
        """AReaL's callbacks for the same fact (workflow_executor.py:360-374, 1114-1129)."""
        match event:
            case ev.GroupOpened(work="train"):
                self.manager.on_rollout_enqueued()
                self.manager.on_rollout_submitted()
            case ev.GroupScored() if event.group_id in self.train:
                size, before = self.config.group_size, self.admitted
                self.admitted += len(event.episode_ids) if event.admitted else 0
                accepted = self.admitted // size > before // size
                (
                    self.manager.on_rollout_accepted
                    if accepted
                    else self.manager.on_rollout_rejected
                )()
            case ev.VersionPending():
                self.version, self.updating = event.version, True
            case ev.VersionLive():
                self.updating = False
            case ev.EpisodeInterrupted():
                self.interrupted.add(event.episode_id)
            case ev.EpisodeResumed():
                self.interrupted.discard(event.episode_id)
            case _:
                pass

    def _world(self, event: Event) -> None:
        """Permits and owed members, to tell when the preset could open a group."""
        match event:
            case ev.GroupOpened():
                self.owed[event.group_id] = event.group_size
                if event.work == "train":
                    self.train.add(event.group_id)
            case ev.EpisodeDispatched():
                self.owed[event.group_id] -= 1
                self.inflight.add(event.episode_id)
            case ev.EpisodeCompleted() | ev.EpisodeFailed():
                self.inflight.discard(event.episode_id)
            case ev.EpisodesCancelled():
                self.inflight.difference_update(event.episode_ids)
                self.interrupted.difference_update(event.episode_ids)
                self.owed[event.group_id] -= event.unscheduled
            case ev.GroupScored():
                self.owed.pop(event.group_id, None)
            case ev.LimitSet():
                self.limit = event.max_inflight
            case _:
                pass


@functools.cache
def lockstep(module: types.ModuleType, scenario: str, seed: int, steps: int) -> Lockstep:
    """The preset's run of `scenario` at `seed`, fed event by event to both sides (each run
    once: the three tests read the same moments)."""
    setup = load_scenario(scenario).with_seed(seed).with_steps(steps).with_policy("areal")
    log: list[Event] = []
    simulate(setup, on_events=log.extend)
    first = log[0]
    assert isinstance(first, ev.RunStarted)
    config = RunConfig.from_mapping(first.config, startable=False)
    step = Lockstep(config, limit=config.max_inflight)
    step.manager = module.StalenessManager(
        version_provider=step,
        max_concurrent_rollouts=config.max_inflight,
        consumer_batch_size=max(1, (config.batch_size or 0) // config.group_size),
        max_staleness=config.max_off_policy_steps,
    )
    for event in log:
        if isinstance(event, ev.RunFinished):
            break  # the shutdown protocol: nothing opens
        step.feed(event)
    return step


def settled(moments: list[Moment]) -> list[Moment]:
    """The moments right before a world event after the first: the previous reaction has
    settled."""
    return [moment for moment in moments[1:] if moment.kind in ev.WORLD_KINDS]


@pytest.mark.parametrize(("scenario", "seed", "steps"), RUNS)
def test_areal_capacity_is_the_presets_at_every_event(
    areal_module: types.ModuleType, scenario: str, seed: int, steps: int
) -> None:
    run = lockstep(areal_module, scenario, seed, steps)
    opened = sum(moment.kind == "group_opened" for moment in run.moments)
    assert opened > 20, f"{scenario}: too short a run to say much ({opened} groups)"
    differ = [m for m in run.moments if m.preset is not None and m.preset != m.areal]
    assert not differ, differ[:3]


@pytest.mark.parametrize(("scenario", "seed", "steps"), RUNS)
def test_the_preset_never_opens_past_areals_capacity(
    areal_module: types.ModuleType, scenario: str, seed: int, steps: int
) -> None:
    """No liveness exception: with nothing running and capacity 0 the preset waits, as
    AReaL's commit loop does."""
    run = lockstep(areal_module, scenario, seed, steps)
    beyond = [m for m in run.moments if m.opens_train and m.areal <= 0]
    assert not beyond, beyond[:3]


@pytest.mark.parametrize(("scenario", "seed", "steps"), RUNS)
def test_the_preset_opens_only_where_areal_would_submit(
    areal_module: types.ModuleType, scenario: str, seed: int, steps: int
) -> None:
    run = lockstep(areal_module, scenario, seed, steps)
    beyond = [m for m in run.moments if m.opens_train and (m.areal <= 0 or m.paused)]
    assert not beyond, beyond[:3]


# The preset has no gate but AReaL's capacity. With rolloutlog's gate (target_lag 1), loose
# (eta 4 > target_lag 1 + 1) closed it with a permit free 34 times in 200 steps at seed 1.
@pytest.mark.parametrize(("scenario", "seed", "steps"), RUNS)
def test_the_preset_opens_wherever_areal_would_submit(
    areal_module: types.ModuleType, scenario: str, seed: int, steps: int
) -> None:
    run = lockstep(areal_module, scenario, seed, steps)
    idle = [m for m in settled(run.moments) if m.room and m.areal > 0 and not m.paused]
    assert not idle, idle[:3]


@pytest.mark.parametrize(("scenario", "seed", "steps"), RUNS)
def test_the_preset_opens_nothing_while_areals_executor_is_paused(
    areal_module: types.ModuleType, scenario: str, seed: int, steps: int
) -> None:
    """`update_pause = "until-live"`: from `version_pending` until the update is live and
    the work it aborted resubmitted (rl_trainer.py:754-859), nothing opens."""
    run = lockstep(areal_module, scenario, seed, steps)
    paused = [m for m in run.moments if m.opens_train and m.paused]
    assert not paused, paused[:3]
