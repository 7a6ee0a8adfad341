"""A timeline of a log of millions of events is drawn from a bounded part of it: every k-th
group past `--max-episodes` (a sampled view), or one group or a time range read alone, so
the command's memory does not grow with the log (2.4M events took 713 MB)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rolloutlog.cli import timeline as timeline_cli
from rolloutlog.cli.main import main
from rolloutlog.replay.source import open_log
from rolloutlog.replay.spans import Sample, episodes_dispatched, read_spans
from rolloutlog.replay.timeline_page import Window, ordinal, timeline_data

LOG = Path(__file__).resolve().parents[3] / "examples" / "simulated.arrow"


@pytest.mark.parametrize("max_episodes", [1, 7, 40, 100])
def test_a_sampled_page_draws_every_kth_group_whole_within_the_bound(max_episodes: int) -> None:
    source = open_log(LOG)
    whole = read_spans(source)
    total = episodes_dispatched(source)
    assert total == whole.episodes
    data = timeline_data(source, Window(max_episodes=max_episodes), "t")
    every = data["sample_every"]
    assert every == max(1, -(-total // max_episodes))  # the fewest groups left out
    kept = set(whole.group_ids[::every])  # in the order they opened
    drawn = np.isin(whole.group, [whole.group_ids.index(g) for g in kept])
    assert data["episodes"] == int(drawn.sum())  # each kept group with all its members
    assert set(data["groups"]) == kept
    assert ("sampled: every" in data["title"]) == (every > 1)
    assert data["summary"]["events"] == len(list(source.events()))  # the summary is whole


def test_reading_one_group_or_up_to_a_time_keeps_only_those_episodes() -> None:
    source = open_log(LOG)
    whole = read_spans(source)
    one = read_spans(source, Sample(group="g3"))
    g3 = whole.group_ids.index("g3")
    assert one.group_ids == ["g3"] and one.episodes == int((whole.group == g3).sum())
    middle = float(np.median(whole.start))
    early = read_spans(source, Sample(until=middle))
    assert early.episodes == int((whole.start <= middle).sum()) < whole.episodes
    assert early.ships == whole.ships  # the trainer's facts stay whole


def test_the_command_says_when_it_drew_a_sample(tmp_path: Path) -> None:
    page = tmp_path / "t.html"
    result = CliRunner().invoke(
        main, ["timeline", str(LOG), "-o", str(page), "--max-episodes", "10"]
    )
    assert result.exit_code == 0, result.output
    assert "more than 10 episodes in the range: drew every" in result.stderr
    assert "(sampled: every" in page.read_text()
    whole = CliRunner().invoke(main, ["timeline", str(LOG), "-o", str(page)])
    assert whole.exit_code == 0 and "drew every" not in whole.stderr


def test_without_max_episodes_the_command_samples_past_its_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the default bound is what keeps a log of millions of events in bounded memory: a
    # command that stopped applying it would draw every episode of such a log
    monkeypatch.setattr(timeline_cli, "MAX_EPISODES", 10)
    page = tmp_path / "t.html"
    result = CliRunner().invoke(main, ["timeline", str(LOG), "-o", str(page)])
    assert result.exit_code == 0, result.output
    assert "more than 10 episodes in the range: drew every 6th group" in result.stderr
    assert "(sampled: every 6th group)" in page.read_text()
    assert ": 12 episodes on" in result.stderr  # g0, g6, g12, ... of 60 episodes


def test_the_sample_is_named_as_people_count() -> None:
    # a 5M-event log drawn past 100,000 episodes said "every 22th group"
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 111, 112)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "23rd",
        "111th",
        "112th",
    ]
