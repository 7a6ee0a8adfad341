"""The timeline page's band of causes under the trainer's row is explain's split."""

from __future__ import annotations

import math
from collections import defaultdict

from rolloutlog.core.config import RunConfig
from rolloutlog.replay.explain import cause_bands, explain_log
from rolloutlog.replay.explain_state import CAUSES
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.timeline_page import Window, timeline_page
from tests.explain.tiny_world import TinyWorld


def test_the_band_holds_every_wait_and_the_page_carries_it() -> None:
    config = RunConfig(group_size=2, batch_size=4, max_inflight=8)
    world = TinyWorld(config, lambda e: 1.0, train_s=1.0, update_s=lambda step: 2.5)
    source = MemoryLog(world.run(6))
    bands = cause_bands(source)
    explanation = explain_log(source)
    seconds: dict[str, float] = defaultdict(float)
    for start, end, code in bands:
        seconds[CAUSES[code]] += end - start
    totals = explanation.totals()
    assert math.isclose(sum(seconds.values()), explanation.total_wait() + explanation.tail_s)
    assert seconds["pause"] >= totals["pause"] == 7.5  # the tail may hold an update too
    _, data = timeline_page(source, Window(), "t")
    assert data["cause_kinds"] == list(CAUSES)
    assert data["causes"].tolist() == [
        [s - data["origin"], e - data["origin"], k] for s, e, k in bands
    ]
