"""rolloutlog: the orchestrator of asynchronous RL as pure deciders over an event log."""

__version__ = "0.1.0"
