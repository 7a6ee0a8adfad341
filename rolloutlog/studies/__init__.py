"""Studies over recorded runs: questions answered by re-running the deciders on a log's world.

A layer above replay and the runtime: a study reads a log with replay, fits or builds a
world for the simulator, and runs the deciders on it.
"""
