"""The run as one self-contained HTML page: episodes on a time axis, drawn on a canvas.

The page inlines everything it needs (uPlot, our drawing code, the data), so it opens
from `file://` with no network, and its Content-Security-Policy forbids any request. The
data is columnar: each episode and marker column is a little-endian typed array (times
as float32 seconds from the page's origin) in base64, decoded once into JavaScript typed
arrays. Episodes are ordered by (dispatch version, discarded, start), so that the page
draws each colour as one run and finds the visible part of it by binary search; a second
order by (row, start) answers hover. Rows are packed by group: a group's members share
as few rows as their spans allow, and groups that do not overlap in time share a band.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import resources
from typing import Any, Final

import attrs
import numpy as np
import pyarrow as pa

from rolloutlog.events.types import CANCEL_REASONS
from rolloutlog.replay.explain import cause_bands
from rolloutlog.replay.explain_state import CAUSES
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import LogSource
from rolloutlog.replay.spans import (
    DISCARDED,
    MARKERS,
    OUTCOMES,
    SPAN_ROW,
    TRAINER_SPANS,
    Rows,
    Sample,
    Spans,
    episodes_dispatched,
    pack_lanes,
    read_spans,
)

ASSETS: Final = "rolloutlog.replay.assets"
_PLACEHOLDER: Final = re.compile(r"__([A-Z_]+)__")
_SCRIPT_END: Final = re.compile(r"</(script)", re.IGNORECASE)
_DISCARDED_CODES: Final = np.array([name in DISCARDED for name in OUTCOMES], dtype=bool)
_FLOAT32_MAX: Final = float(np.finfo(np.float32).max)


class WindowError(ValueError):
    """The window selects nothing the log has (an unknown group, an empty time range), or
    its time range cannot be drawn (an end that is not finite, a range wider than float32)."""


@attrs.frozen
class Window:
    """What part of the run to draw: a time range (log seconds), optionally one group, and
    at most `max_episodes` episodes (0: all): past it, every k-th group is drawn, the
    fewest groups left out that bring the episodes under it (a sampled view)."""

    t_from: float | None = None
    t_to: float | None = None
    group: str | None = None
    max_episodes: int = 0

    def __attrs_post_init__(self) -> None:
        """Refuse a range before the log is read: ends must be finite (the page's data is
        JSON, which has no inf or nan) and in order."""
        for option, t in (("--from", self.t_from), ("--to", self.t_to)):
            if t is not None and not math.isfinite(t):
                raise WindowError(f"{option} {t} is not a finite number of log seconds")
        if self.t_from is not None and self.t_to is not None and self.t_from >= self.t_to:
            raise WindowError(f"--from {self.t_from} is not before --to {self.t_to}")


def timeline_page(source: LogSource, window: Window, title: str) -> tuple[str, dict[str, Any]]:
    """The page of the log `source` and the data in it (`timeline_data`)."""
    data = timeline_data(source, window, title)
    return render_page(data), data


def timeline_data(source: LogSource, window: Window, title: str) -> dict[str, Any]:
    """What the page of the log `source` draws; the summary is `replay`'s, of the whole
    log. `data["sample_every"]` is k of a sampled view (1: every group drawn)."""
    replay = replay_log(source)  # before the spans, so that the two peaks do not add up
    summary = {**replay.summary, "error": None if replay.error is None else str(replay.error)}
    del replay
    pa.default_memory_pool().release_unused()  # each pass's batches, given back before the next
    causes = Rows.of(cause_bands(source), SPAN_ROW)
    pa.default_memory_pool().release_unused()
    sample = _sample(source, window)
    if sample.every > 1:
        title = f"{title} (sampled: every {ordinal(sample.every)} group)"
    data = page_data(read_spans(source, sample), summary, window, title, causes=causes)
    return {**data, "sample_every": sample.every}


def _sample(source: LogSource, window: Window) -> Sample:
    """What to read of `source` for `window`: its group alone, or every k-th group with k
    the smallest that keeps the episodes dispatched by its end within `max_episodes`."""
    every = 1
    if window.max_episodes > 0 and window.group is None:
        dispatched = episodes_dispatched(source, window.t_to)
        every = max(1, math.ceil(dispatched / window.max_episodes))
    return Sample(every, window.group, window.t_to)


def ordinal(n: int) -> str:
    """`n` as people count: 1st, 2nd, 3rd, 4th, 11th, 22nd (the sample's "every 22nd group")."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def summary_rows(summary: dict[str, Any]) -> list[list[str]]:
    """The summary panel's rows, as people read them: a mapping's entries one a row
    (`episodes_cancelled · stale`), a list by its length, a fraction to three decimals."""
    rows = []
    for key, value in summary.items():
        if isinstance(value, dict):
            rows += [[f"{key} · {k}", _shown(v)] for k, v in value.items()]
        else:
            rows.append([key, _shown(len(value) if isinstance(value, list) else value)])
    return rows


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{round(value, 3):g}"
    return value if isinstance(value, str) else json.dumps(value)


def _time_range(spans: Spans, window: Window) -> tuple[float, float]:
    """The window's times (the run's where it names none), drawable as float32 seconds."""
    lo = spans.t_start if window.t_from is None else window.t_from
    hi = spans.t_end if window.t_to is None else window.t_to
    if hi - lo > _FLOAT32_MAX:
        raise WindowError(
            f"the time range {lo:g}..{hi:g} is too wide to draw "
            f"(the page holds times as float32 seconds, at most {_FLOAT32_MAX:.3g})"
        )
    return lo, hi


def _trainer_marks(spans: Spans, causes: Rows, lo: float, hi: float) -> dict[str, Any]:
    """Versions pending and live, batches shipped, the trainer's spans and the causes of
    its waits (`replay.explain`) within lo..hi."""
    return {
        "pending": _instants(spans.pending, lo, hi),
        "live": _instants(spans.live, lo, hi),
        "ships": _instants(spans.ships, lo, hi),
        "trainer": _clipped(spans.trainer, lo, hi),
        "cause_kinds": list(CAUSES),
        "causes": _clipped(causes, lo, hi),
    }


def _json_value(value: object) -> object:
    """What the page's JSON writes for a value json does not know: a `Rows` as its rows."""
    if isinstance(value, Rows):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not drawn by the page")


def _instants(rows: Rows, lo: float, hi: float) -> Rows:
    """Instants (t, then whole numbers) within lo..hi, t from lo."""
    t, *numbers = rows.columns
    keep = _within(t, lo, hi)
    return Rows(t[keep] - lo, *(column[keep] for column in numbers))


def page_data(
    spans: Spans,
    summary: dict[str, Any],
    window: Window,
    title: str,
    causes: Rows | Sequence[tuple[float, float, int]] = (),
) -> dict[str, Any]:
    """Everything the page draws, as plain data with the columns in base64."""
    keep = _selected(spans, window)
    lo, hi = _time_range(spans, window)
    index = np.flatnonzero(keep)
    rows, row_count = _rows(spans.group[index], spans.start[index], spans.end[index])
    discarded = _DISCARDED_CODES[spans.outcome[index]]
    order = np.lexsort((spans.start[index], discarded, spans.version[index]))
    episodes = index[order]
    rows = rows[order]
    position = np.full(spans.episodes, -1, dtype=np.int64)
    position[episodes] = np.arange(len(episodes))
    marks = np.flatnonzero(keep[spans.marker_episode] & _within(spans.marker_t, lo, hi))
    marks = marks[np.argsort(spans.marker_t[marks], kind="stable")]
    by_row = np.lexsort((spans.start[episodes], rows))
    row_start = np.searchsorted(rows[by_row], np.arange(row_count + 1))
    ids = [spans.episode_ids[i] for i in episodes.tolist()]
    groups = spans.group[episodes]
    members = spans.member[episodes]
    implied = all(
        episode_id == f"{spans.group_ids[g]}/{m}"
        for episode_id, g, m in zip(ids, groups.tolist(), members.tolist(), strict=True)
    )
    duration = spans.end[episodes] - spans.start[episodes]
    return {
        "title": title,
        "origin": lo,
        "range": [0.0, _float32_at_least(max(hi - lo, 1e-9))],
        "episodes": len(episodes),
        "rows": row_count,
        "outcomes": list(OUTCOMES),
        "discarded": sorted(DISCARDED),
        "markers": list(MARKERS),
        "cancel_reasons": list(CANCEL_REASONS),
        "trainer_kinds": list(TRAINER_SPANS),
        "slices": _slices(spans.version[episodes], discarded[order]),
        "max_duration": float(duration.max()) if len(duration) else 0.0,
        "groups": spans.group_ids,
        "ids": None if implied else ids,
        **_trainer_marks(spans, Rows.of(causes, SPAN_ROW), lo, hi),
        "summary": summary,
        "summary_rows": summary_rows(summary),
        "columns": {
            "start": _column(spans.start[episodes] - lo, "<f4"),
            "end": _column(spans.end[episodes] - lo, "<f4"),
            "row": _column(rows, "<u4"),
            "version": _column(spans.version[episodes], "<i4"),
            "outcome": _column(spans.outcome[episodes], "u1"),
            "reason": _column(spans.reason[episodes], "i1"),
            "age": _column(spans.age[episodes], "<i2"),
            "step": _column(spans.step[episodes], "<i4"),
            "late": _column(spans.late[episodes], "u1"),
            "group": _column(groups, "<u4"),
            "member": _column(members, "<u4"),
            "by_row": _column(by_row, "<u4"),
            "row_start": _column(row_start, "<u4"),
            "marker_t": _column(spans.marker_t[marks] - lo, "<f4"),
            "marker_kind": _column(spans.marker_kind[marks], "u1"),
            "marker_episode": _column(position[spans.marker_episode[marks]], "<u4"),
            **_pause_columns(spans, position, lo),
        },
    }


def _clipped(spans: Rows, lo: float, hi: float) -> Rows:
    """Spans (start, end, kind) that overlap the window, clipped to it, from its start."""
    start, end, kind = spans.columns
    keep = (end >= lo) & (start <= hi)
    return Rows(np.maximum(start[keep], lo) - lo, np.minimum(end[keep], hi) - lo, kind[keep])


def _pause_columns(
    spans: Spans, position: np.ndarray[Any, Any], lo: float
) -> dict[str, dict[str, str]]:
    """The pauses of the episodes shown, by (episode, time): each gap from `pause_start`
    to `pause_end`, then the segment generated by `pause_version` up to `pause_until` (the
    next pause or the episode's end), which the page paints in that version's colour. None
    for a log without pauses, whose page stays as it was."""
    shown = [p for p in spans.pauses if position[p[0]] >= 0]
    if not shown:
        return {}
    shown.sort(key=lambda p: (position[p[0]], p[1]))
    until = [
        nxt[1] if nxt[0] == p[0] else float(spans.end[p[0]])
        for p, nxt in zip(shown, [*shown[1:], (-1, 0.0, 0.0, 0)], strict=True)
    ]
    episode, start, end, version = (np.array(column) for column in zip(*shown, strict=True))
    return {
        "pause_episode": _column(position[episode], "<u4"),
        "pause_start": _column(start - lo, "<f4"),
        "pause_end": _column(end - lo, "<f4"),
        "pause_version": _column(version, "<i4"),
        "pause_until": _column(np.array(until) - lo, "<f4"),
    }


def render_page(data: dict[str, Any]) -> str:
    """The HTML page: the template with uPlot, our script and `data` inlined."""
    return "".join(page_parts(data))


def page_parts(data: dict[str, Any]) -> Iterator[str]:
    """The HTML page in pieces, to write one after another: a page of tens of megabytes
    is never one string (nor the JSON of its data)."""
    assets = resources.files(ASSETS)
    parts: dict[str, Callable[[], Iterable[str]]] = {
        "TITLE": lambda: [_html_text(data["title"])],
        "UPLOT_CSS": lambda: [assets.joinpath("uPlot.min.css").read_text(encoding="utf-8")],
        "UPLOT_JS": lambda: [
            _script_text(assets.joinpath("uPlot.iife.min.js").read_text(encoding="utf-8"))
        ],
        "TIMELINE_JS": lambda: [
            _script_text(assets.joinpath("timeline.js").read_text(encoding="utf-8"))
        ],
        "DATA": lambda: (
            chunk.replace("<", "\\u003c")
            for chunk in json.JSONEncoder(
                separators=(",", ":"), allow_nan=False, default=_json_value
            ).iterencode(data)
        ),
    }
    template = assets.joinpath("timeline.html").read_text(encoding="utf-8")
    at = 0
    for match in _PLACEHOLDER.finditer(template):
        yield template[at : match.start()]
        yield from parts[match.group(1)]()
        at = match.end()
    yield template[at:]


def _selected(spans: Spans, window: Window) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """The episodes the window shows: those of its group that overlap its time range."""
    keep = np.ones(spans.episodes, dtype=bool)
    if window.group is not None:
        if window.group not in spans.group_ids:
            raise WindowError(f"no group {window.group!r} in the log")
        keep &= spans.group == spans.group_ids.index(window.group)
    if window.t_from is not None:
        keep &= spans.end >= window.t_from
    if window.t_to is not None:
        keep &= spans.start <= window.t_to
    return keep


def _within(
    t: np.ndarray[Any, np.dtype[np.float64]], lo: float, hi: float
) -> np.ndarray[Any, np.dtype[np.bool_]]:
    return (t >= lo) & (t <= hi)


def _rows(
    group: np.ndarray[Any, Any], start: np.ndarray[Any, Any], end: np.ndarray[Any, Any]
) -> tuple[np.ndarray[Any, np.dtype[np.int64]], int]:
    """Each episode's row: its group's band, plus its lane among the group's members."""
    rows = np.zeros(len(group), dtype=np.int64)
    if not len(group):
        return rows, 0
    order = np.argsort(group, kind="stable")
    cuts = np.flatnonzero(np.diff(group[order])) + 1
    members = np.split(order, cuts)
    group_start = [float(start[m].min()) for m in members]
    group_end = [float(end[m].max()) for m in members]
    bands = pack_lanes(group_start, group_end)
    heights = np.zeros(max(bands) + 1, dtype=np.int64)
    for m, band in zip(members, bands, strict=True):
        lanes = np.array(pack_lanes(start[m].tolist(), end[m].tolist()), dtype=np.int64)
        rows[m] = lanes
        heights[band] = max(heights[band], int(lanes.max()) + 1)
    offsets = np.concatenate(([0], np.cumsum(heights)))
    for m, band in zip(members, bands, strict=True):
        rows[m] += offsets[band]
    return rows, int(offsets[-1])


def _slices(version: np.ndarray[Any, Any], discarded: np.ndarray[Any, Any]) -> list[list[int]]:
    """[offset, count, version, discarded] of each run of one colour in page order."""
    if not len(version):
        return []
    change = np.flatnonzero((np.diff(version) != 0) | (np.diff(discarded) != 0)) + 1
    starts = np.concatenate(([0], change))
    counts = np.diff(np.concatenate((starts, [len(version)])))
    return [
        [int(s), int(n), int(version[s]), int(discarded[s])]
        for s, n in zip(starts, counts, strict=True)
    ]


def _float32_at_least(seconds: float) -> float:
    """The smallest float32 >= `seconds`, so that the page's float32 times fit its range."""
    rounded = np.float32(seconds)
    return float(rounded if rounded >= seconds else np.nextafter(rounded, np.float32(np.inf)))


def _column(values: np.ndarray[Any, Any], dtype: str) -> dict[str, str]:
    """A typed array for the page: its JavaScript type and its bytes in base64."""
    array = np.ascontiguousarray(values, dtype=np.dtype(dtype))
    js_type = {"f": "Float", "u": "Uint", "i": "Int"}[array.dtype.kind] + str(8 * array.itemsize)
    return {"type": js_type, "b64": base64.b64encode(array.tobytes()).decode("ascii")}


def _script_text(text: str) -> str:
    """Script text that cannot end the <script> element it is inlined in."""
    return _SCRIPT_END.sub(r"<\\/\1", text)


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
