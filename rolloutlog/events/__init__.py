"""The vocabulary (event types) and its durable form (Arrow log, JSONL).

This package imports nothing from `core`, `replay` or `runtime`. Its `__init__` re-exports
only the event types, so that `core` can import them without pulling in the log I/O.
"""

from rolloutlog.events.types import (
    CANCEL_REASONS,
    DECIDED_KINDS,
    DISPATCHER_KINDS,
    EVENT_TYPES,
    SINK_KINDS,
    UNSEQUENCED,
    WORLD_KINDS,
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    LimitSet,
    OverloadCut,
    RunFinished,
    RunResumed,
    RunStarted,
    VersionLive,
    VersionPending,
)

__all__ = [
    "CANCEL_REASONS",
    "DECIDED_KINDS",
    "DISPATCHER_KINDS",
    "EVENT_TYPES",
    "SINK_KINDS",
    "UNSEQUENCED",
    "WORLD_KINDS",
    "BatchShipped",
    "EpisodeCompleted",
    "EpisodeDispatched",
    "EpisodeDropped",
    "EpisodeFailed",
    "EpisodesCancelled",
    "Event",
    "GroupOpened",
    "GroupScored",
    "LimitSet",
    "OverloadCut",
    "RunFinished",
    "RunResumed",
    "RunStarted",
    "VersionLive",
    "VersionPending",
]
