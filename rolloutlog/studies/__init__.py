"""Studies: many simulated runs at once (sweeps), and what-if runs on a recorded log's
fitted world (`whatif`), built on the simulator and replay.
"""
