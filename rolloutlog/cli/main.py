"""The `rolloutlog` command group: one module per command family registers its commands here.

Bad input (a missing or damaged log, an invalid JSONL line, an existing output) is reported
as one line on stderr with exit status 2, never as a traceback: the message already names
the file, the line or the seq range to look at.
"""

from __future__ import annotations

import click

from rolloutlog import __version__
from rolloutlog.cli.bad_input import OneLineGroup
from rolloutlog.cli.explain import explain_command
from rolloutlog.cli.log import export_command, import_command, info_command
from rolloutlog.cli.metrics import metrics_command
from rolloutlog.cli.replay import diff_command, replay_command, show_command, verify_command
from rolloutlog.cli.simulate import simulate_command
from rolloutlog.cli.sweep import sweep_command
from rolloutlog.cli.timeline import timeline_command
from rolloutlog.cli.train import train_command
from rolloutlog.cli.whatif import whatif_command


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rolloutlog")
def main() -> None:
    """rolloutlog: the orchestrator of asynchronous RL as pure deciders over an event log.

    Simulate staleness policies, train for real, and replay, verify, show, diff and draw the
    recorded logs.
    """


for _command in (
    info_command,
    export_command,
    import_command,
    replay_command,
    verify_command,
    show_command,
    diff_command,
    metrics_command,
    explain_command,
    timeline_command,
    simulate_command,
    sweep_command,
    whatif_command,
    train_command,
):
    main.add_command(_command)
