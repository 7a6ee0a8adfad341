"""The simulator's state is bounded by what is in flight and queued, not by history."""

from __future__ import annotations

from rolloutlog.events.types import Event
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.runtime.sim.simulation import Simulation


def _peak_sizes(steps: int) -> dict[str, int]:
    peaks: dict[str, int] = {}

    def sample(events: list[Event]) -> None:
        sizes = {
            "world groups": simulation.world.open_groups(),
            "flights": len(simulation.inference.flights),
            "open fates": len(simulation.metrics.open),
            "clock entries": simulation.queue.entries(),
            "trainer backlog": len(simulation.trainer.backlog),
            "series points": len(simulation.metrics.wasted_series.points),
            "dispatcher groups": len(simulation.loop.dispatcher_state.groups),
            "sink queue": len(simulation.loop.sink_state.queue),
        }
        for name, size in sizes.items():
            peaks[name] = max(peaks.get(name, 0), size)

    simulation = Simulation(load_scenario("default").with_steps(steps), on_events=sample)
    simulation.run()
    return peaks


def test_peak_state_does_not_grow_with_the_number_of_steps() -> None:
    short, long = _peak_sizes(20), _peak_sizes(80)
    run = load_scenario("default").run
    for name, peak in long.items():
        assert peak <= 2 * short[name] + run.group_size, (name, short[name], peak)
    assert long["flights"] <= run.max_inflight + run.group_size  # permits, plus aborts racing
