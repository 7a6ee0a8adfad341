"""Why a run that makes no progress is stuck: the rule that starves it, in one clause.

A driver that finds no batch shipping for too long, or nothing left to happen, asks the
loop (`ReactionLoop.stall_reason`) which rule holds the run: the ship hold or the ship wait
on a full batch, else what keeps the dispatcher from sending the train work that would
fill it (the gate, the update it waits for, the admission rule of the run without the
liveness exception). A faithful field preset can starve where its source would not, since
rolloutlog cuts batches in episodes and its sources count groups: a group that lost a
member to a failure leaves the batch short, and the source's rule has no room to make it up.
"""

from __future__ import annotations

from rolloutlog.core.dispatcher_fill import gated
from rolloutlog.core.rules.admission import episodes_per_batch
from rolloutlog.core.rules.table import Rules
from rolloutlog.core.staleness import trainer_lags
from rolloutlog.core.state import DispatcherState, SinkState


def starving_rule(rules: Rules, dispatcher: DispatcherState, sink: SinkState) -> str:
    """The rule that holds the run now, named with its key and the numbers behind it."""
    config = sink.config
    queued = f"the queue holds {len(sink.queue)} episodes for batch {sink.step}"
    if trainer_lags(sink.version, sink.step, rules.hold_lag):
        return f"{queued}; the ship hold waits for a version past v{sink.version} (gate_lag)"
    if rules.ship_waits(sink):
        return f"{queued}; the ship wait holds it for work at its last chance (ship_wait)"
    if dispatcher.limit <= len(dispatcher.inflight):
        return f"{queued}; every permit is held ({len(dispatcher.inflight)} in flight)"
    if gated(rules, dispatcher):
        return f"{queued}; train dispatch is held at v{dispatcher.version} (gate_lag, updates)"
    ledger, version = dispatcher.ledger, dispatcher.version
    left = None if rules.allowance is None else rules.allowance(config, ledger, version)
    if left is not None and rules.live(left, rules.idle_floor(config, ledger, version)) <= 0:
        per_batch = episodes_per_batch(config, ledger)
        exception = "" if config.liveness else ", and the run has no liveness exception"
        return (
            f"{queued} of {per_batch}; admission = {config.admission!r} lets no train "
            f"episode out{exception} (liveness)"
        )
    return f"{queued}, and nothing the dispatcher may send would fill it"
