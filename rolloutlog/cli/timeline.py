"""`rolloutlog timeline`: the run as one self-contained HTML page to open in a browser."""

from __future__ import annotations

from pathlib import Path

import click

from rolloutlog.cli.bad_input import command, fail, reports_bad_input
from rolloutlog.cli.options import FILE, OUTPUT
from rolloutlog.cli.output import note_being_written, warn_torn_tail
from rolloutlog.cli.progress import phase
from rolloutlog.events.whole_file import written_whole
from rolloutlog.replay.source import open_log
from rolloutlog.replay.timeline_page import (
    Window,
    WindowError,
    ordinal,
    page_parts,
    timeline_data,
)

# the most episodes a page draws unsampled: what grows with the page is about 260 bytes an
# episode (its id, its index, its columns, its page data); a 5M-event log so drawn (every
# 22nd group) peaked at 148,480 to 149,980 KiB (174,636 under a bound of 200,000;
# benchmarks/RESULTS.md)
MAX_EPISODES = 100_000


@command("timeline")
@click.argument("log", type=FILE)
@click.option("-o", "--output", type=OUTPUT, required=True, help="The HTML file to write.")
@click.option("--from", "t_from", type=float, help="Start of the time range (log seconds).")
@click.option("--to", "t_to", type=float, help="End of the time range (log seconds).")
@click.option("--group", "group", help="Draw only this group's episodes.")
@click.option(
    "--max-episodes",
    type=click.IntRange(min=0),
    default=lambda: MAX_EPISODES,  # read when the command runs
    show_default=f"{MAX_EPISODES:,}",
    help="Past this many episodes in the range, draw every k-th group (a sampled view, "
    "in bounded memory); 0 draws every episode.",
)
@reports_bad_input
def timeline_command(
    log: Path,
    output: Path,
    t_from: float | None,
    t_to: float | None,
    group: str | None,
    max_episodes: int,
) -> None:
    """Draw LOG as an HTML timeline: episodes by group and version, drops, versions, trainer.

    The page works offline (everything is inlined): open it from disk in any browser. A
    log of millions of events is drawn sampled (--max-episodes), or a part of it in full
    (--from, --to, --group).
    """
    if output.suffix.lower() not in (".html", ".htm"):
        fail(f"-o {output}: the timeline is an HTML page: name it NAME.html")
    try:
        window = Window(t_from, t_to, group, max_episodes)
    except WindowError as error:
        fail(str(error))
    source, title = open_log(log), f"rolloutlog · {log.name}"
    note_being_written(source, log)
    try:
        with phase(f"reading and replaying {log}"):
            data = timeline_data(source, window, title)
    except WindowError as error:
        fail(f"{log}: {error}")
    with written_whole(output) as temporary, temporary.open("w", encoding="utf-8") as page:
        page.writelines(page_parts(data))
    warn_torn_tail(source.torn_tail, log)
    if data["sample_every"] > 1:
        click.echo(
            f"rolloutlog: note: more than {max_episodes:,} episodes in the range: drew every "
            f"{ordinal(data['sample_every'])} group (--from/--to/--group draw a part in full, "
            "--max-episodes 0 everything)",
            err=True,
        )
    size = output.stat().st_size
    click.echo(
        f"wrote {output}: {data['episodes']} episodes on {data['rows']} rows, {size / 1e6:.1f} MB",
        err=True,
    )
