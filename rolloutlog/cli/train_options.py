"""The options of `rolloutlog train`, and which of them a resume or `--save-initial` refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from rolloutlog.cli.bad_input import fail
from rolloutlog.cli.options import (
    STEPS,
    file_option,
    folder_option,
    json_option,
    seed_option,
    set_option,
)

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_STEPS = 300

OPTIONS = [
    click.option(
        "--steps",
        type=STEPS,
        default=DEFAULT_STEPS,
        show_default=True,
        help="Batches to ship; the run then stops.",
    ),
    seed_option(
        "Seeds the task source, the model's initialisation and every episode's sampling.", 0
    ),
    click.option(
        "--policy",
        metavar="PRESET",
        help="A policy preset (per-episode, per-group, all, prime-rl, tinker, ..., or "
        "BASE+RULE+... as simulate takes); a --set of one of its keys wins. Default: the "
        "train defaults.",
    ),
    set_option(
        "overrides",
        "KEY=VALUE",
        "A RunConfig key (batch_size, max_off_policy_steps, ...) or a live key "
        "(learning_rate, servers, ...); run.KEY / live.KEY name the section. Repeatable.",
    ),
    file_option(
        "--log",
        "log_path",
        help="The Arrow log to write (must not exist). Default: runs/train-<time>.arrow.",
    ),
    click.option(
        "--backend",
        type=click.Choice(["cpu", "vllm"]),
        default="cpu",
        show_default=True,
        help="cpu: start local CPU servers (or use --url); vllm: `vllm serve` at --url.",
    ),
    click.option("--url", "urls", multiple=True, help="An inference endpoint; repeatable."),
    folder_option(
        "--weights-dir",
        help="The weight broadcast directory; the servers must read it (required for vllm). "
        "Default: LOG.weights beside the log, so that --resume finds the checkpoints.",
    ),
    folder_option(
        "--save-initial",
        "initial_dir",
        help="Only write the v0 checkpoint (for `vllm serve DIR`) and exit.",
    ),
    file_option(
        "--resume",
        "resume_log",
        help="Continue the run whose process died, appending to its log; seed, settings and "
        "weights dir come from the run (LOG.rollouts). --steps, --url, --weights-dir override.",
    ),
    json_option("Print the report as JSON."),
]


def train_options(command: F) -> F:
    """Apply every option of `train` (in `--help` order)."""
    for option in reversed(OPTIONS):
        command = option(command)
    return command


# Options a resume takes from the run, and why each is refused beside --resume.
NOT_WITH_RESUME = {
    "overrides": ("--set", "the run's own settings are used"),
    "policy": ("--policy", "the run's own settings are used"),
    "log_path": ("--log", "the run's own log is continued"),
    "initial_dir": ("--save-initial", "it writes a new run's v0 checkpoint"),
    "seed": ("--seed", "the run's own is used"),
    "backend": ("--backend", "the run's --url servers, or local CPU ones, are used"),
}
# Options `--save-initial` would ignore: it only writes the v0 checkpoint.
NOT_WITH_SAVE_INITIAL = {
    name: (option, "it only writes the v0 checkpoint")
    for name, option in [
        ("steps", "--steps"),
        ("log_path", "--log"),
        ("backend", "--backend"),
        ("urls", "--url"),
        ("weights_dir", "--weights-dir"),
        ("as_json", "--json"),
    ]
}


def refuse_beside(option: str, refused: dict[str, tuple[str, str]]) -> None:
    """Refuse options given on the command line that `option` would silently ignore."""
    context = click.get_current_context()
    for name, (other, why) in refused.items():
        if context.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            fail(f"{other}: not with {option} ({why})")
