"""The `rolloutlog` command group: one module per command family registers its commands here.

Bad input (a missing or damaged log, an invalid JSONL line, an existing output) is reported
as one line on stderr with exit status 2, never as a traceback: the message already names
the file, the line or the seq range to look at.

A command's module is imported when the command runs, not when the group is built: the
families between them import pyarrow's compute kernels, numpy, the importers and the
trainer, about half a second that `simulate` never uses.
"""

from __future__ import annotations

import importlib

import click

from rolloutlog import __version__
from rolloutlog.cli.bad_input import OneLineGroup

# name -> (module, attribute): the table the group reads, in the order `--help` lists them.
COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("rolloutlog.cli.log", "info_command"),
    "export": ("rolloutlog.cli.log", "export_command"),
    "import": ("rolloutlog.cli.log", "import_command"),
    "replay": ("rolloutlog.cli.replay", "replay_command"),
    "verify": ("rolloutlog.cli.replay", "verify_command"),
    "show": ("rolloutlog.cli.replay", "show_command"),
    "diff": ("rolloutlog.cli.replay", "diff_command"),
    "metrics": ("rolloutlog.cli.metrics", "metrics_command"),
    "explain": ("rolloutlog.cli.explain", "explain_command"),
    "timeline": ("rolloutlog.cli.timeline", "timeline_command"),
    "simulate": ("rolloutlog.cli.simulate", "simulate_command"),
    "sweep": ("rolloutlog.cli.sweep", "sweep_command"),
    "whatif": ("rolloutlog.cli.whatif", "whatif_command"),
    "train": ("rolloutlog.cli.train", "train_command"),
}


class LazyGroup(OneLineGroup):
    """The group whose commands are imported from `COMMANDS` when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name]
        found: click.Command = getattr(importlib.import_module(module), attribute)
        return found


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rolloutlog")
def main() -> None:
    """rolloutlog: the orchestrator of asynchronous RL as pure deciders over an event log.

    Simulate staleness policies, train for real, and replay, verify, show, diff and draw the
    recorded logs.
    """
