"""The orchestrator's own ids beside the log's: `g<n>` and `g<n>/<m>` in events, the foreign
ones in the log's notes, so that every event can be traced back to the run that wrote it.

Each committed batch notes the ids it introduces (`rolloutlog.note.foreign_ids`: a JSON
object from our id to the orchestrator's), so that a log cut short still maps what it kept.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from typing import Final, TypeAlias

from rolloutlog.events.errors import LogError
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.types import EpisodeDispatched, Event, GroupOpened

FOREIGN_IDS_NOTE: Final = "foreign_ids"
ForeignId: TypeAlias = str | uuid.UUID


class RecordError(LogError):
    """A call no run can make; the message is one line naming the call."""


class ForeignIds:
    """Both directions of the mapping, and the notes each committed batch carries."""

    def __init__(self) -> None:
        self.ours: dict[tuple[str, str], str] = {}  # (group or episode, foreign) -> ours
        self.theirs: dict[str, str] = {}  # ours -> foreign

    def add(self, what: str, foreign: str, ours: str) -> None:
        self.ours[what, foreign] = ours
        self.theirs[ours] = foreign

    def notes(self, events: Sequence[Event]) -> dict[str, str]:
        """`LogWriter`'s `notes`: the foreign ids of the groups and episodes this batch opens."""
        introduced = {
            e.group_id if isinstance(e, GroupOpened) else e.episode_id: ""
            for e in events
            if isinstance(e, GroupOpened | EpisodeDispatched)
        }
        if not introduced:
            return {}
        mapping = {ours: self.theirs[ours] for ours in introduced}
        return {FOREIGN_IDS_NOTE: json.dumps(mapping, separators=(",", ":"))}


def foreign_text(value: ForeignId, call: str, what: str) -> str:
    """An orchestrator's id as text; a uuid as its canonical string."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if not isinstance(value, str) or not value:
        raise RecordError(f"{call}: {what} must be a non-empty string or a uuid, got {value!r}")
    return value


def read_foreign_ids(path: str | os.PathLike[str]) -> dict[str, str]:
    """Our id -> the orchestrator's, for every group and episode a recorded log names."""
    mapping: dict[str, str] = {}
    for text in LogReader(path, warn=False).notes(FOREIGN_IDS_NOTE):
        try:
            found = json.loads(text)
        except json.JSONDecodeError as error:
            raise LogError(f"{path}: note {FOREIGN_IDS_NOTE}: not JSON ({error})") from error
        if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
            raise LogError(f"{path}: note {FOREIGN_IDS_NOTE}: expected an object of strings")
        mapping.update(found)
    return mapping
