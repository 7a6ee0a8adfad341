"""`export --format chrome-trace`: the Trace Event Format JSON that Perfetto opens."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonschema
from click.testing import CliRunner

from rolloutlog.cli.main import main
from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.replay.source import open_log
from rolloutlog.replay.spans import read_spans

# The parts of the Trace Event Format the export uses: complete events (X) with a duration,
# instant events (i) with a scope, metadata (M) naming processes and threads; ts and dur in
# microseconds; pid and tid integers.
TRACE_SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "ph", "pid", "tid"],
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "cat": {"type": "string"},
                    "ph": {"enum": ["X", "i", "M"]},
                    "pid": {"type": "integer", "minimum": 0},
                    "tid": {"type": "integer", "minimum": 0},
                    "args": {"type": "object"},
                },
                "allOf": [
                    {
                        "if": {"properties": {"ph": {"const": "X"}}},
                        "then": {
                            "required": ["ts", "dur"],
                            "properties": {
                                "ts": {"type": "number", "minimum": 0},
                                "dur": {"type": "number", "minimum": 0},
                            },
                        },
                    },
                    {
                        "if": {"properties": {"ph": {"const": "i"}}},
                        "then": {
                            "required": ["ts", "s"],
                            "properties": {
                                "ts": {"type": "number", "minimum": 0},
                                "s": {"enum": ["g", "p", "t"]},
                            },
                        },
                    },
                    {
                        "if": {"properties": {"ph": {"const": "M"}}},
                        "then": {
                            "required": ["args"],
                            "properties": {
                                "name": {"enum": ["process_name", "thread_name"]},
                                "args": {
                                    "required": ["name"],
                                    "properties": {"name": {"type": "string"}},
                                },
                            },
                        },
                    },
                ],
            },
        },
    },
}


def export(log: Path, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "trace.json"
    result = CliRunner().invoke(
        main, ["export", str(log), "--format", "chrome-trace", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    trace: dict[str, Any] = json.loads(out.read_text())
    jsonschema.validate(trace, TRACE_SCHEMA)
    return trace


def test_the_trace_has_a_track_per_slot_and_one_for_the_trainer(
    chaos_log: Path, tmp_path: Path
) -> None:
    trace = export(chaos_log, tmp_path)
    spans = read_spans(open_log(chaos_log))
    events = trace["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert processes == {1: "inference", 2: "trainer"}
    assert [name for (pid, _), name in names.items() if pid == 2] == ["trainer"]
    slots: dict[int, list[tuple[float, float]]] = defaultdict(list)
    episodes = {}
    for e in events:
        assert (e["pid"], e["tid"]) in names or e["ph"] == "M"
        if e["ph"] == "X" and e["pid"] == 1:
            slots[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
            episodes[e["name"]] = e
    # every episode once, in µs since the first event; a slot runs one episode at a time,
    # and never more slots than permits (the scenario's max_inflight)
    assert len(episodes) == spans.episodes
    for i in (0, spans.episodes // 2, spans.episodes - 1):
        e = episodes[spans.episode_ids[i]]
        assert abs(e["ts"] - (spans.start[i] - spans.t_start) * 1e6) < 1e-2
        assert abs(e["dur"] - (spans.end[i] - spans.start[i]) * 1e6) < 1e-2
    for held in slots.values():
        held.sort()
        assert all(a[1] <= b[0] + 1e-3 for a, b in itertools.pairwise(held))
    max_inflight = LogReader(chaos_log).info().config["max_inflight"]  # type: ignore[index]
    assert 1 <= len(slots) <= max_inflight
    assert {names[(1, tid)] for tid in slots} <= {f"slot {n}" for n in range(len(slots))}


def test_versions_and_ships_are_instants_and_the_trainer_spans_tile_the_run(
    chaos_log: Path, tmp_path: Path
) -> None:
    events = export(chaos_log, tmp_path)["traceEvents"]
    spans = read_spans(open_log(chaos_log))
    instants = [e for e in events if e["ph"] == "i"]
    versions = [e for e in instants if e["cat"].startswith("version_")]
    assert {e["s"] for e in versions} == {"g"}
    assert sorted(e["name"] for e in versions) == sorted(
        [f"v{v} pending" for _, v in spans.pending] + [f"v{v} live" for _, v in spans.live]
    )
    ships = [e for e in instants if e["cat"] == "ship"]
    assert [e["args"]["step"] for e in ships] == [step for _, step, _, _ in spans.ships]
    markers = [e for e in instants if e["cat"] == "marker"]
    assert len(markers) == len(spans.marker_t) and {e["pid"] for e in markers} == {1}
    trainer = [e for e in events if e["ph"] == "X" and e["pid"] == 2]
    assert trainer[0]["ts"] == 0
    for a, b in itertools.pairwise(trainer):
        assert abs(a["ts"] + a["dur"] - b["ts"]) < 1e-2  # back to back: busy, update, idle
    end = trainer[-1]["ts"] + trainer[-1]["dur"]
    assert abs(end - (spans.t_end - spans.t_start) * 1e6) < 1e-2
    assert {e["cat"] for e in trainer} == {"busy", "weight_update", "idle"}


def test_export_still_writes_jsonl_by_default(worked_log: Path) -> None:
    result = CliRunner().invoke(main, ["export", str(worked_log)])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert len(lines) == len(read_log(worked_log)) and json.loads(lines[0])["kind"] == "run_started"


def test_an_unknown_format_is_refused(worked_log: Path) -> None:
    result = CliRunner().invoke(main, ["export", str(worked_log), "--format", "svg"])
    assert result.exit_code == 2 and "svg" in result.output
