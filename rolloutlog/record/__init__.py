"""Recording another orchestrator's run: `Recorder` takes its calls and its own ids.

    from rolloutlog.record import Recorder

See docs/log-format.md § Recording your own orchestrator.
"""

from rolloutlog.record.ids import RecordError, read_foreign_ids
from rolloutlog.record.recorder import Recorder

__all__ = ["RecordError", "Recorder", "read_foreign_ids"]
