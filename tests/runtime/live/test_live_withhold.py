"""`rolloutlog train --policy prime-rl-withhold`: the live driver runs a withholding preset.

Nothing is cancelled for its age, so no abort is sent for staleness: every rollout runs to
its end, the sink withholds the stale ones after scoring them, and the log re-decides.
"""

from __future__ import annotations

from rolloutlog.events.log_reader import read_log
from tests.runtime.live.live_helpers import train_preset_at_bound_zero


def test_train_withholds_stale_members_instead_of_cancelling_them(tmp_path):
    log = tmp_path / "withhold.arrow"
    report = train_preset_at_bound_zero(log, "prime-rl-withhold")
    assert report["episodes_cancelled"]["stale"] == 0
    assert 0 <= report["episodes_withheld"] <= report["episodes_dropped_stale"]
    assert read_log(log)[0].config["stale_member"] == "withhold"
