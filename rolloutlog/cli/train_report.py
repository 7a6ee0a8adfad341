"""How `rolloutlog train` prints its report (`runs.train.run_training`'s) as a table."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from rolloutlog.cli.output import duration, key_values
from rolloutlog.cli.sim_report import mean_token_age, token_age_line


def print_report(report: dict[str, Any]) -> None:
    """The run as a table; the reward curve in tenths of the run."""
    curve = [r for r in report["reward_curve"] if r is not None]
    rows = [
        ("finished", report["finished_reason"]),
        ("steps shipped", report["steps_shipped"]),
        ("wall time", duration(report["wall_seconds"])),
        ("reward first → last 5", _first_last(curve)),
        ("reward curve", _sparkline(curve)),
        ("episodes dispatched", report["episodes_dispatched"]),
        ("episodes trained", report["episodes_trained"]),
        ("cancelled in flight", json.dumps(report["episodes_cancelled"])),
        ("aborts sent / late arrivals", f"{report['aborts_sent']} / {report['late_arrivals']}"),
        ("dropped stale", report["episodes_dropped_stale"]),
        *(
            [("  of it withheld", report["episodes_withheld"])]
            if "episodes_withheld" in report
            else []
        ),
        *(
            (label, report[key])
            for label, key in (
                ("groups requeued", "groups_requeued"),
                ("evicted (full queue)", "episodes_evicted"),
            )
            if report.get(key)
        ),
        *(
            [("ship waits", f"{report['ship_waits']} ({report['ship_wait_seconds']:.1f} s)")]
            if "ship_waits" in report
            else []
        ),
        *(
            [("leftovers dropped finished", report["episodes_dropped_leftover"])]
            if "episodes_dropped_leftover" in report
            else []
        ),
        *(
            [
                ("trained tokens, gradient", report["tokens_trained_gradient"]),
                ("trained tokens, masked", report["tokens_trained_masked"]),
            ]
            if "tokens_trained_masked" in report
            else []
        ),
        ("failed", report["episodes_failed"]),
        ("trained ages", json.dumps(report["trained_age_histogram"])),
        *_segments(report),
        ("invariant violations", len(report["invariant_violations"])),
        ("endpoints", _endpoints(report["endpoints"])),
        ("log", f"{report['log']}  (check it: rolloutlog verify {report['log']})"),
    ]
    Console().print(key_values("rolloutlog train", [(key, str(value)) for key, value in rows]))


def _segments(report: dict[str, Any]) -> list[tuple[str, str]]:
    """A run whose rule segments episodes (interrupt, recycle): its partial figures and its
    trained tokens by the age of the version that generated them."""
    if "trained_token_age_histogram" not in report:
        return []
    ratio = report["partial_ratio"]
    partial = "-" if ratio is None else f"{100.0 * ratio:.1f}%"
    return [
        ("partial episodes / largest span", f"{partial} / {report['largest_version_span']}"),
        ("trained token ages", f"{token_age_line(report)} (mean {mean_token_age(report)})"),
    ]


def _endpoints(endpoints: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"{e['url']}  {e['generations']} generations"
        + ("" if e["alive"] else f"  (lost: {e['lost_reason']})")
        for e in endpoints
    )


def _first_last(curve: list[float]) -> str:
    if not curve:
        return "-"
    tail = curve[-5:]
    return f"{curve[0]:.3f} → {sum(tail) / len(tail):.3f}"


def _sparkline(curve: list[float]) -> str:
    if not curve:
        return "-"
    size = max(1, len(curve) // 10)
    points = [curve[i : i + size] for i in range(0, len(curve), size)]
    return " ".join(f"{sum(p) / len(p):.2f}" for p in points)
