"""The recorded run re-decided with one cause of waiting taken away (`explain --without`).

`explain` says what held while the trainer waited; a counterfactual says what taking one
cause away would have bought. The world is `whatif`'s (`studies.whatif.fit`: the log's own
rollout outcomes per task and member, its batch train and update times, its controller
events; work it never finished is drawn). The run is re-decided twice on it by the same
deciders: once as recorded (the baseline) and once with the cause removed, so that what
differs is the cause alone, not the fit. Each removal is one row of `REMOVALS`:

- `stragglers`: every rollout longer than the run's 99th percentile (of the finished ones)
  takes the 99th percentile;
- `gate`: the gate and the ship hold at the widest lag the bound allows (`target_lag =
  max_off_policy_steps`, `gate_lag = "target-lag"`: wider, work would go out stale);
- `pause`: every weight update takes no time, so inference never pauses for one;
- `drops`: the bound one step wider (`max_off_policy_steps + 1`), the gate left as it was;
- `failures`: every failed rollout completes in the same time, with the run's median
  reward and tokens.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import attrs
import numpy as np

from rolloutlog.events.types import BatchShipped, Event
from rolloutlog.runtime.sim.scenario import Scenario
from rolloutlog.runtime.sim.simulation import simulate
from rolloutlog.runtime.sim.trace import RecordedEpisode, Trace
from rolloutlog.studies.whatif.fit import FitError, fit_log

# Which world a counterfactual runs on; say it with every answer.
WORLD: Final = (
    "whatif's fitted world (the log's own rollout outcomes, batch train and update times "
    "and controller events; unfinished work drawn): inference load is not modelled, so a "
    "rollout takes its recorded time whatever else runs beside it"
)
STRAGGLER_QUANTILE: Final = 0.99


def _trace(scenario: Scenario) -> Trace:
    if scenario.trace is None:
        raise FitError("a counterfactual needs a fitted world (a trace)")
    return scenario.trace


def _episodes(scenario: Scenario, episodes: Iterable[RecordedEpisode]) -> Scenario:
    trace = attrs.evolve(_trace(scenario), episodes=tuple(episodes))
    return attrs.evolve(scenario, trace=trace)


def without_stragglers(scenario: Scenario) -> Scenario:
    """Every rollout longer than the finished ones' 99th percentile takes that long."""
    episodes = _trace(scenario).episodes
    finished = [e.seconds for e in episodes if e.outcome != "censored"]
    cap = float(np.quantile(finished, STRAGGLER_QUANTILE)) if finished else 0.0
    return _episodes(scenario, (attrs.evolve(e, seconds=min(e.seconds, cap)) for e in episodes))


def without_gate(scenario: Scenario) -> Scenario:
    """The gate and the hold at the widest lag the bound allows."""
    return scenario.with_run(target_lag=scenario.run.max_off_policy_steps, gate_lag="target-lag")


def without_pause(scenario: Scenario) -> Scenario:
    """Every weight update takes no time."""
    trace = _trace(scenario)
    batches = tuple(attrs.evolve(b, update_s=0.0) for b in trace.batches)
    world = attrs.evolve(scenario.world, weight_update_s=0.0)
    return attrs.evolve(scenario, trace=attrs.evolve(trace, batches=batches), world=world)


def without_drops(scenario: Scenario) -> Scenario:
    """The bound one step wider; the gate as it was."""
    run = scenario.run
    return scenario.with_run(
        max_off_policy_steps=run.max_off_policy_steps + 1, target_lag=run.target_lag
    )


def without_failures(scenario: Scenario) -> Scenario:
    """Every failed rollout completes in its time, with the run's median reward and size."""
    episodes = _trace(scenario).episodes
    completed = [e for e in episodes if e.outcome == "completed"]
    if not completed or not any(e.outcome == "failed" for e in episodes):
        return scenario
    reward = statistics.median(e.reward for e in completed)
    prompt = round(statistics.median(e.prompt_tokens for e in completed))
    completion = round(statistics.median(e.completion_tokens for e in completed))

    def completed_instead(e: RecordedEpisode) -> RecordedEpisode:
        if e.outcome != "failed":
            return e
        return attrs.evolve(
            e,
            outcome="completed",
            reward=reward,
            prompt_tokens=prompt,
            completion_tokens=completion,
        )

    return _episodes(scenario, map(completed_instead, episodes))


REMOVALS: Final[dict[str, tuple[str, Callable[[Scenario], Scenario]]]] = {
    "stragglers": ("the slowest 1% of rollouts cut to the 99th percentile", without_stragglers),
    "gate": ("the gate and the ship hold at the widest lag the bound allows", without_gate),
    "pause": ("weight updates instantaneous", without_pause),
    "drops": ("the bound one step wider (max_off_policy_steps + 1)", without_drops),
    "failures": ("failed rollouts completed in their time", without_failures),
}


@attrs.frozen
class Counterfactual:
    """When each step shipped on the fitted world as recorded and with the cause removed."""

    cause: str
    removed: str  # what was changed, in words
    world: str
    baseline: dict[int, float]  # step -> ship time, the recorded policy re-run
    without: dict[int, float]  # step -> ship time, the cause removed

    def steps(self) -> list[tuple[int, float, float | None]]:
        """(step, ship time as recorded, how much earlier without the cause; None if the
        counterfactual never shipped it)."""
        return [
            (step, t, None if step not in self.without else t - self.without[step])
            for step, t in sorted(self.baseline.items())
        ]

    def gain_s(self) -> float | None:
        """How much sooner the last step of the baseline ships without the cause."""
        if not self.baseline:
            return 0.0
        last = max(self.baseline)
        return None if last not in self.without else self.baseline[last] - self.without[last]

    def to_json(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "removed": self.removed,
            "world": self.world,
            "steps": [
                {"step": s, "shipped_at": t, "earlier_s": earlier} for s, t, earlier in self.steps()
            ],
            "gain_s": self.gain_s(),
        }


def ship_times(scenario: Scenario) -> dict[int, float]:
    """Step -> the time its batch shipped, in a simulation of `scenario`."""
    shipped: dict[int, float] = {}

    def collect(events: Sequence[Event]) -> None:
        for event in events:
            if isinstance(event, BatchShipped):
                shipped[event.step] = event.t

    simulate(scenario, on_events=collect)
    return {step: t for step, t in shipped.items() if step <= scenario.steps}


def counterfactual(
    events: Iterable[Event], cause: str, *, seed: int = 0, steps: int | None = None
) -> Counterfactual:
    """The run of `events` re-decided on its fitted world with `cause` removed."""
    removed, remove = REMOVALS[cause]
    scenario = fit_log(events, seed=seed).scenario
    if steps is not None:
        scenario = scenario.with_steps(steps)
    return Counterfactual(
        cause=cause,
        removed=removed,
        world=WORLD,
        baseline=ship_times(scenario),
        without=ship_times(remove(scenario)),
    )
