"""Studies: many simulated runs at once (sweeps), built on the simulator and replay's summary."""
