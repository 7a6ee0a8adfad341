"""A log as Trace Event Format JSON, the format Perfetto and chrome://tracing open.

A log does not say which endpoint ran an episode, so inference is drawn as *slots*: each
episode takes the lowest slot free at its dispatch (a slot frees when its episode
arrives or is cancelled), which needs as many slots as episodes were ever in flight at
once. Process 1 ("inference") has one thread per slot holding its episodes as complete
(`X`) events (an interrupted and resumed one as one event per segment, each with the
version that generated it, the gap between them empty) and their cancellations, drops,
failures and late arrivals as instant (`i`) events; process 2 ("trainer") has one thread
with the trainer's busy, weight-update and idle spans and an instant per shipped batch;
versions published and made live are global instants. Timestamps are microseconds since
the log's first event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any, Final

from rolloutlog.events.types import CANCEL_REASONS
from rolloutlog.replay.spans import MARKERS, OUTCOMES, TRAINER_SPANS, Spans, pack_lanes

INFERENCE_PID: Final = 1
TRAINER_PID: Final = 2
TRAINER_TID: Final = 1
_SPAN_NAMES: Final = {"busy": "train", "weight_update": "weight update", "idle": "idle"}


def trace_events(spans: Spans) -> Iterator[dict[str, Any]]:
    """Every trace event of the run: metadata first, then episodes, trainer, instants."""
    slots = pack_lanes(spans.start.tolist(), spans.end.tolist())
    yield _meta("process_name", INFERENCE_PID, 0, "inference")
    yield _meta("process_name", TRAINER_PID, 0, "trainer")
    yield _meta("thread_name", TRAINER_PID, TRAINER_TID, "trainer")
    for slot in range(max(slots, default=-1) + 1):
        yield _meta("thread_name", INFERENCE_PID, slot + 1, f"slot {slot}")
    yield from _episodes(spans, slots)
    yield from _markers(spans, slots)
    origin = spans.t_start
    for start, end, code in spans.trainer:
        kind = TRAINER_SPANS[code]
        yield {
            "name": _SPAN_NAMES[kind],
            "cat": kind,
            "ph": "X",
            **_slice(start - origin, end - origin),
            "pid": TRAINER_PID,
            "tid": TRAINER_TID,
        }
    for t, step, cut, trained in spans.ships:
        args = {"step": step, "episodes": cut, "trained": trained}
        yield _instant(
            f"batch {step} shipped", "ship", t - origin, "t", TRAINER_PID, TRAINER_TID, args
        )
    for moments, what in ((spans.pending, "pending"), (spans.live, "live")):
        for t, version in moments:
            name, cat = f"v{version} {what}", f"version_{what}"
            yield _instant(name, cat, t - origin, "g", TRAINER_PID, TRAINER_TID, {})


def write_chrome_trace(spans: Spans, out: IO[str]) -> int:
    """Write the trace as one JSON object to `out`, one event per line; returns the count."""
    out.write('{"displayTimeUnit": "ms", "traceEvents": [\n')
    count = 0
    for event in trace_events(spans):
        out.write(("" if count == 0 else ",\n") + json.dumps(event, separators=(",", ":")))
        count += 1
    out.write("\n]}\n")
    return count


def _episodes(spans: Spans, slots: list[int]) -> Iterator[dict[str, Any]]:
    origin = spans.t_start
    paused = spans.segments()
    columns = zip(
        spans.episode_ids,
        spans.group.tolist(),
        spans.version.tolist(),
        spans.start.tolist(),
        spans.end.tolist(),
        spans.outcome.tolist(),
        spans.reason.tolist(),
        spans.age.tolist(),
        spans.step.tolist(),
        slots,
        strict=True,
    )
    for i, (episode_id, group, version, start, end, outcome, reason, age, step, slot) in enumerate(
        columns
    ):
        args: dict[str, Any] = {
            "group": spans.group_ids[group] if group >= 0 else None,
            "version": version,
            "outcome": OUTCOMES[outcome],
        }
        if reason >= 0:
            args["cancel_reason"] = CANCEL_REASONS[reason]
        if age >= 0:
            args["age"] = age
        if step >= 0:
            args["step"] = step
        segments = paused.get(i, [(start, end, version)])
        for k, (since, until, generated_by) in enumerate(segments):
            segment = {"segment": k, "version": generated_by} if i in paused else {}
            yield {
                "name": episode_id,
                "cat": OUTCOMES[outcome],
                "ph": "X",
                **_slice(since - origin, until - origin),
                "pid": INFERENCE_PID,
                "tid": slot + 1,
                "args": {**args, **segment},
            }


def _markers(spans: Spans, slots: list[int]) -> Iterator[dict[str, Any]]:
    origin = spans.t_start
    for t, kind, episode in zip(
        spans.marker_t.tolist(),
        spans.marker_kind.tolist(),
        spans.marker_episode.tolist(),
        strict=True,
    ):
        args = {"episode_id": spans.episode_ids[episode]}
        tid = slots[episode] + 1
        yield _instant(MARKERS[kind], "marker", t - origin, "t", INFERENCE_PID, tid, args)


def _meta(name: str, pid: int, tid: int, label: str) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": {"name": label}}


def _instant(
    name: str, cat: str, t: float, scope: str, pid: int, tid: int, args: dict[str, Any]
) -> dict[str, Any]:
    """An instant event; scope `t` draws it on its thread, `g` across the whole trace."""
    event = {"name": name, "cat": cat, "ph": "i", "s": scope, "ts": _us(t), "pid": pid, "tid": tid}
    if args:
        event["args"] = args
    return event


def _slice(start: float, end: float) -> dict[str, float]:
    """ts and dur of a complete event, so that slices that touch do not overlap when rounded."""
    ts = _us(start)
    return {"ts": ts, "dur": round(_us(end) - ts, 3)}


def _us(seconds: float) -> float:
    """Seconds as microseconds, rounded to a nanosecond's worth so the JSON stays short."""
    return round(seconds * 1e6, 3)
