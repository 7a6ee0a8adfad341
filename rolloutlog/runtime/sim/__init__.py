"""The simulate driver: a seeded world model in virtual time over the core's deciders.

`load_scenario` builds a `Scenario` (run configuration and world), `simulate` runs it and
returns a `SimResult` with the simulator's metrics. What combines them with the replay
summary (for `simulate`, `whatif` and `sweep`) lives in `rolloutlog.runs.simulate`; this
package never imports `rolloutlog.replay`.
"""

from rolloutlog.runtime.sim.metrics import SimMetrics
from rolloutlog.runtime.sim.scenario import (
    Scenario,
    load_scenario,
    parse_set_options,
    scenario_from_mapping,
    scenario_names,
)
from rolloutlog.runtime.sim.simulation import SimResult, Simulation, SimulationBoundError, simulate
from rolloutlog.runtime.sim.world_config import WorldConfig

__all__ = [
    "Scenario",
    "SimMetrics",
    "SimResult",
    "Simulation",
    "SimulationBoundError",
    "WorldConfig",
    "load_scenario",
    "parse_set_options",
    "scenario_from_mapping",
    "scenario_names",
    "simulate",
]
