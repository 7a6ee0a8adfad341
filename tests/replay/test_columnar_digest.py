"""The columnar fold's digest, row by row, against its definition in `core.digest`.

The fast path writes each row's canonical text and the state fingerprint from its own
columns (`replay.columnar.Digested`) instead of building events and running the deciders.
Here the same log is fed to a `ReactionLoop` as a driver would, and after every event its
`canonical` text, `ReactionLoop.fingerprint()` and `chain` digest are what the fold wrote.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.digest import GENESIS, canonical, chain
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import events_to_batch
from rolloutlog.events.types import WORLD_KINDS, Event
from rolloutlog.replay.columnar import ColumnarFold
from rolloutlog.testing.strategies import run_configs, world_logs


class _Recorder:
    """A loop observer: each appended event's canonical text and the fingerprint after it."""

    def __init__(self) -> None:
        self.rows: list[tuple[Event, str, tuple[int, ...]]] = []

    def observe(self, event: Event, loop: ReactionLoop) -> None:
        self.rows.append((event, canonical(event).decode(), loop.fingerprint()))

    def settled(self, world_event: Event, loop: ReactionLoop) -> None:
        """Nothing to do once a world event settles."""


def _defined(log: list[Event]) -> list[tuple[Event, str, tuple[int, ...]]]:
    """The log's world events fed to the deciders, recorded by `_Recorder`."""
    recorder = _Recorder()
    loop = ReactionLoop.from_run_started(log[0], observers=(recorder,))
    for event in log:
        if event.kind in WORLD_KINDS:
            loop.feed(event)
    return recorder.rows


# a log with interruptions folds plainly (replay/columnar.py): nothing columnar to check
FREEZE_WORLDS = world_logs(run_configs(weight_update="freeze", recycle=False), max_steps=60)


@given(FREEZE_WORLDS, st.floats(0.0, 1.0))
def test_each_rows_text_fingerprint_and_digest_are_the_definitions(
    log: list[Event], cut: float
) -> None:
    defined = _defined(log)
    assert [event for event, _, _ in defined] == log  # the deciders remake the log
    at = max(1, round(cut * len(log)))
    batches = [events_to_batch(part) for part in (log[:at], log[at:]) if part]
    fold = ColumnarFold.from_first_batch(batches[0], keep_digests=True)
    written: list[tuple[str, str]] = []
    for batch in batches:
        fold.apply_batch(batch, texts=written)
    fold.finish()
    assert [row for row, _ in written] == [text for _, text, _ in defined]
    assert [fingerprint for _, fingerprint in written] == [repr(f) for _, _, f in defined]
    digests, digest = [], GENESIS
    for _, text, fingerprint in defined:
        digest = chain(digest, text.encode(), fingerprint)
        digests.append(digest)
    assert fold.digests is not None
    assert list(fold.digests) == digests
