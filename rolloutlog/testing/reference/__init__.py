"""A reference model of the deciders: naive, slow, written from docs/ and apart from `core`.

The equivalence the project promises is two independent implementations agreeing on random
sequences. This package is the second one. It imports nothing from `rolloutlog.core` (a
test in tests/test_code_quality.py enforces it): its own settings, age arithmetic, task
source, curricula and reaction loop. It keeps every episode and group it ever saw and
recomputes what it needs (in-flight counts, the queue, the ledger, the admission window)
by scanning that record on every decision, so that it shares no bookkeeping with `core`.

`reference_log(world_events)` re-decides a log's world events and returns the whole log it
makes; `testing.equivalence.REFERENCE_MODEL` compares it with today's deciders.
"""

from rolloutlog.testing.reference.loop import reference_log

__all__ = ["reference_log"]
