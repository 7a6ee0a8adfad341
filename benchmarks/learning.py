"""The learning study: which staleness preset reaches a reward soonest, task by task?

Fewer discarded rollouts is a proxy; this runs `rolloutlog train` (in process: exactly
what the command runs, log written and replayed) under each preset of `--presets`, over
`--seeds`, for the same `--steps`, in each settings set of `--settings`, and reports per
preset: wall seconds until the mean reward of the last 10 batches first reaches 0.5 and
0.8 (median and min-max over seeds; a run that never gets there ranks after those that
do, by its final reward), the final reward (last 10 batches), trained completion tokens
per second, finished rollouts discarded, the trained-age histogram, and per task
difficulty (`live.hard_task_share`) the share of trained episodes against the share
dispatched and the reward of the last 10 batches. `rolloutlog whatif` then ranks the
same presets on each live log, and the study reports the Spearman rank correlation
between that ranking (by trained episodes per hour) and the learner's (by time to 0.8).

Resumable: each finished run is appended to `--table` (JSON lines, one row per run) and a
run already there is not run again, so a study may be run in parts (a preset, a seed at a
time); the table is what the report reads, and says which runs it holds.

`--backend vllm` starts `live.servers` real `vllm serve` processes (the CPU build in
`.venv-vllm` or `ROLLOUTLOG_VLLM_VENV`, or `--vllm-command`) once and runs every cell
against them; the twin's `server_min_step_s` does not apply there (vLLM decodes at its own
speed). Each row names its backend, a run is keyed by it, and a report reads the rows of
its command's backend only: the twin's and vLLM's runs of one cell are never pooled.

The staleness sweep (`--bounds`, `--stale`, `--corrections`, `--sync`, `--sync-batch`):
each combination is a variant of `--set` items applied after the preset's (a preset's own
bound or rule gives way to the variant's), and every run scores the held-out tasks every
`--eval-every` batches (`live.eval_every`). Its table (`learning_report.sweep_report`)
ranks by the final held-out reward and reports batches and CPU seconds to the held-out
reward `--target`; the training-batch reward and wall seconds stay as diagnostics, beside
the trained ages, the importance ratio's ESS, the clip fraction and KL(behaviour ‖
current) per step. The `long-gen` settings set raises the twin's per-token time so that
rollouts span updates. Then the sweep's contrasts (mask against drop, a correction against
none, each bound and the synchronous baseline against bound 1), each a difference of means
with its 95% interval over the runs, and the learning model
(`rolloutlog.studies.learning_model`) fitted on the sweep's cells and tested leaving one
cell out. Runs go seed by seed, so a sweep cut short keeps whole seeds.

Run: `python benchmarks/learning.py [--presets per-group,per-episode,all] [--compare P,Q]
[--seeds 0 1 2] [--steps 60] [--settings default,contended,long,hard,study,long-gen]
[--bounds 1,2,4,8] [--stale drop,mask] [--corrections none,decoupled] [--sync] [--sync-batch 64]
[--eval-every 5] [--target 0.5] [--eval-plot FILE] [--table FILE] [--plot FILE] [--set KEY=VALUE]
[--backend twin|vllm] [--report-only]`. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from learning_report import (
    WINDOW,
    Row,
    final_reward,
    label,
    model_report,
    plot,
    plot_eval,
    report,
    sweep_effects,
    sweep_report,
)

from rolloutlog.core.config import ConfigError, parse_overrides
from rolloutlog.core.presets import preset_overrides
from rolloutlog.events.types import BatchShipped, EpisodeCompleted, GroupOpened
from rolloutlog.replay.source import open_log
from rolloutlog.runs.train import run_training
from rolloutlog.runtime.live.digits import task_from_id
from rolloutlog.runtime.live.reports import StepStats
from rolloutlog.runtime.live.session import vllm_from_v0
from rolloutlog.runtime.live.settings import build_settings
from rolloutlog.runtime.live.twin.launch import ServerStartError
from rolloutlog.runtime.live.vllm_launch import VLLMProcess, VLLMStartError, cpu_command

REPO: Final = Path(__file__).resolve().parents[1]
TABLE: Final = REPO / "benchmarks" / "learning_runs.jsonl"
DEFAULT_PRESETS: Final = (
    "per-group", "per-episode", "all", "prime-rl", "prime-rl-withhold", "areal", "tinker",
    "tinker-822", "per-episode+interrupt",
)  # fmt: skip
# beside the defaults: members of a group start at different versions only when the
# permits bind (large groups) or generations outlast a train step
SETTINGS_SETS: Final[dict[str, tuple[str, ...]]] = {
    "default": (),
    "contended": ("group_size=32", "max_inflight=64"),
    "long": ("server_min_step_s=0.01",),
    "hard": ("hard_task_share=0.2",),
    # the study's budget: about a minute a run on a shared 2-core machine; batches of 64
    # at lr 1e-3 learned the most per wall second of the pilots (RESULTS.md's history:
    # "The budget: pilots", removed at 2026-12-07 as a superseded diary)
    "study": ("hard_task_share=0.2", "batch_size=64", "learning_rate=1e-3"),
    # the staleness sweep's: a decode step of at least 0.25 s makes a 5-digit rollout last
    # about 1.5 s and a hard one 3 s, several train steps of a batch of 64 (about 0.5 s);
    # four optimizer steps a batch, AReaL's default `ppo_n_minibatches` (inclusionAI/AReaL
    # 4aef98d8, areal/api/cli_args.py:1393-1395), so that `decoupled`'s clip around the
    # proximal policy binds (with one, u = 1 and it never does)
    "long-gen": (
        "hard_task_share=0.2",
        "batch_size=64",
        "learning_rate=1e-3",
        "server_min_step_s=0.25",
        "minibatches=4",
    ),
}
SYNC: Final = ("max_off_policy_steps=0", "weight_update=drain")  # the synchronous baseline


def sync_batch(inflight: int) -> tuple[str, ...]:
    """The synchronous baseline that generates one batch per version: bound 0 and drain
    with at most a batch in flight. Plain `SYNC` keeps `max_inflight` (128) in flight for
    a batch of 64, and under long generations the slow half, stale once the batch ships,
    is dropped: it trains the short, easy rollouts only."""
    return (*SYNC, f"max_inflight={inflight}")


class StudyError(ValueError):
    """A bad option: one line naming it."""


# ---- running ---------------------------------------------------------------------------
def check_presets(names: Sequence[str], option: str = "--presets") -> list[str]:
    """The presets, each known to `core.presets`; a missing one is refused by name."""
    for name in names:
        try:
            preset_overrides(name)
        except ConfigError as error:
            raise StudyError(f"{option}: {error} (not a preset of this tree)") from error
    if len(set(names)) != len(names) or not names:
        raise StudyError(f"{option} {','.join(names)}: name each preset once")
    return list(names)


def check_settings(names: Sequence[str]) -> None:
    unknown = [name for name in names if name not in SETTINGS_SETS]
    if unknown:
        raise StudyError(f"--settings {unknown[0]}: known sets: {', '.join(SETTINGS_SETS)}")


def variants(
    bounds: Sequence[int], stale: Sequence[str], corrections: Sequence[str], sync: bool
) -> list[tuple[str, ...]]:
    """The sweep's `--set` items, one tuple per run variant (`()`: no sweep): every bound
    with every stale rule and correction, then the synchronous baseline (bound 0, drain)."""
    combos = [
        tuple(
            item
            for item, given in (
                (f"max_off_policy_steps={bound}", bounds),
                (f"stale_tokens={rule}", stale),
                (f"is_correction={correction}", corrections),
            )
            if given
        )
        for bound in bounds or [None]
        for rule in stale or [None]
        for correction in corrections or [None]
    ]
    swept = [combo for combo in combos if combo]
    return [*swept, SYNC] if sync else swept or [()]


def check_variants(found: Sequence[tuple[str, ...]], settings: Sequence[str]) -> None:
    """Each variant's settings are valid in each settings set, before anything runs."""
    for name in settings:
        for variant in found:
            try:
                build_settings(parse_overrides([*SETTINGS_SETS[name], *variant]), seed=0)
            except ConfigError as error:
                raise StudyError(f"variant {' '.join(variant)} in {name}: {error}") from error


def reported(
    rows: Sequence[Row],
    settings: Sequence[str],
    seeds: Sequence[int],
    extra: Sequence[str],
    backend: str = "twin",
) -> list[Row]:
    """The rows of a command's backend, settings sets and seeds whose `--set` items begin
    with the command's: older runs of other settings stay in the table but out of its
    report, runs with more items (a correction beside the study) are reported as sets of
    their own, and the twin's runs and vLLM's are never pooled in one cell or contrast."""

    def of_command(row: Row) -> bool:
        if row["settings"] not in settings or row["seed"] not in seeds:
            return False
        if backend_of(row) != backend:
            return False
        base = [*SETTINGS_SETS[row["settings"]], *extra]
        return bool(row["overrides"][: len(base)] == base)

    return [row for row in rows if of_command(row)]


def run_key(row: Row) -> tuple[str, str, str, str, int, int]:
    """What makes a run: its backend, settings (the set's and `--set`'s), preset, seed and
    length: a vLLM run of a cell the twin ran is a run of its own."""
    return backend_of(row), row["settings"], label(row), row["preset"], row["seed"], row["steps"]


def backend_of(row: Row) -> str:
    """Who generated a run's rollouts: `twin` or `vllm` (rows before the field: the twin)."""
    return str(row.get("backend", "twin"))


def load_table(path: Path) -> list[Row]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def study(
    *,
    presets: Sequence[str],
    seeds: Sequence[int],
    steps: int,
    settings: Sequence[str],
    table: Path,
    extra: Sequence[str] = (),
    compare: Sequence[str] = (),
    variant_sets: Sequence[tuple[str, ...]] = ((),),
    backend: str = "twin",
    runner: Callable[..., Row] | None = None,
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> int:
    """Run every (settings, preset, seed) the table lacks, appending each row; how many ran.
    `whatif` ranks `compare` on each log (default `presets`): a study run a preset at a
    time names all of its presets there, so that every log ranks the same ones."""
    check_presets(presets)
    compare = check_presets(compare, "--compare") if compare else list(presets)
    check_settings(settings)
    done = {run_key(row) for row in load_table(table)}
    todo = [  # seed by seed: a study cut short keeps whole seeds of every setting
        (name, variant, preset, seed)
        for seed in seeds
        for name in settings
        for variant in variant_sets
        for preset in presets
        if run_key(_planned(name, preset, seed, steps, [*extra, *variant], backend)) not in done
    ]
    progress(f"learning: {len(done)} runs in {table}, {len(todo)} to run")
    table.parent.mkdir(parents=True, exist_ok=True)
    run = runner or run_one
    for index, (name, variant, preset, seed) in enumerate(todo, 1):
        started = time.monotonic()
        what = f"[{index}/{len(todo)}] {name} {' '.join(variant)} {preset} seed {seed}"
        progress(f"{what}: {steps} batches ...")
        overrides = [*SETTINGS_SETS[name], *extra, *variant]
        row = run(name, preset, seed, steps, overrides, compare, variant=variant)
        with table.open("a") as out:
            out.write(json.dumps(row) + "\n")
        progress(
            f"{what}: final reward {final_reward(row):.3f} in {time.monotonic() - started:.0f} s"
        )
    return len(todo)


def _planned(
    name: str, preset: str, seed: int, steps: int, extra: Sequence[str], backend: str
) -> Row:
    overrides = [*SETTINGS_SETS[name], *extra]
    return {
        "settings": name,
        "backend": backend,
        "preset": preset,
        "seed": seed,
        "steps": steps,
        "overrides": overrides,
    }


def preset_sets(preset: str) -> list[str]:
    """`--set` items of a preset (TOML values: `true`, not `True`; a key left at `None`, which
    `--set` cannot say, is left out: its default)."""
    return [
        f"{key}={str(value).lower() if isinstance(value, bool) else value}"
        for key, value in preset_overrides(preset).items()
        if value is not None
    ]


def run_one(
    settings_name: str,
    preset: str,
    seed: int,
    steps: int,
    overrides: Sequence[str],
    compare: Sequence[str],
    servers: Sequence[VLLMProcess] = (),
    variant: Sequence[str] = (),
    eval_every: int = 5,
) -> Row:
    """One `rolloutlog train` run and `rolloutlog whatif` on its log: one table row.
    `overrides` ends with `variant`, whose keys win over the preset's."""
    before = _cpu_s()
    batch_cpu_s: list[float] = []

    def on_step(stats: StepStats) -> None:  # the CPU clock, and progress every 10 batches
        batch_cpu_s.append(round(_cpu_s() - before, 2))
        if stats.step % WINDOW == 0:
            reward = "n/a" if stats.mean_reward is None else f"{stats.mean_reward:.3f}"
            print(f"  batch {stats.step}/{steps}: reward {reward} at {stats.wall_s:.0f} s",
                  file=sys.stderr, flush=True)  # fmt: skip

    config, live = build_settings(
        parse_overrides(run_items(preset, overrides, variant, eval_every)), seed=seed
    )
    with tempfile.TemporaryDirectory(prefix="learning-") as scratch:
        log = Path(scratch) / "train.arrow"
        report = run_training(
            config, live, steps=steps, seed=seed, log_path=log,
            urls=tuple(s.url for s in servers), on_step=on_step,
            weights_dir=Path(scratch) / "weights" if servers else None,
        )  # fmt: skip
        cpu_s = round(_cpu_s() - before, 1)
        figures = log_figures(log, live.hard_task_share)
        whatif = _whatif(log, compare)
    return {
        "settings": settings_name,
        "backend": "vllm" if servers else "twin",
        "preset": preset,
        "seed": seed,
        "steps": steps,
        "overrides": list(overrides),
        "variant": list(variant),
        "ok": report["finished_reason"] == "steps" and report["replay_error"] is None,
        "curve": [r if r is not None else 0.0 for r in report["reward_curve"]],
        "wall_s": round(report["wall_seconds"], 1),
        "cpu_s": cpu_s,
        "batch_cpu_s": batch_cpu_s,
        "episodes_trained": report["episodes_trained"],
        "trained_ages": report["trained_age_histogram"],
        "discarded": whatif["recorded"]["finished_rollouts_discarded"],
        "whatif": {
            name: result["trained_episodes_per_hour"] for name, result in whatif["policies"].items()
        },
        "eval_every": live.eval_every,
        "eval": [step["eval"] for step in report["train_steps"] if "eval" in step],
        "diagnostics": [{key: step[key] for key in DIAGNOSTICS} for step in report["train_steps"]],
        **figures,
    }


DIAGNOSTICS: Final = (
    "step", "ratio_mean", "ratio_ess", "clip_fraction", "kl_behaviour", "corrected_fraction",
    "ages",
)  # fmt: skip


def run_items(
    preset: str, overrides: Sequence[str], variant: Sequence[str], eval_every: int
) -> list[str]:
    """A run's `--set` items: the settings (variant last), the preset's items whose keys
    the variant does not set, and `eval_every` unless the settings name it."""
    keys = {item.partition("=")[0] for item in variant}
    preset_items = [item for item in preset_sets(preset) if item.partition("=")[0] not in keys]
    named = any(item.partition("=")[0] in ("eval_every", "live.eval_every") for item in overrides)
    return [*overrides, *preset_items, *([] if named else [f"eval_every={eval_every}"])]


def log_figures(log: Path, hard_share: float) -> Row:
    """What the report lacks, read from the log: when each batch shipped, the trained
    tokens, and per difficulty the episodes dispatched and trained and the late reward."""
    difficulty: dict[str, str] = {}  # group id -> easy / hard
    completed: dict[str, tuple[float, int]] = {}
    batches: list[BatchShipped] = []
    dispatched: Counter[str] = Counter()
    for event in open_log(log).events():
        if isinstance(event, GroupOpened) and event.work == "train":
            difficulty[event.group_id] = task_from_id(event.task_id, hard_share).difficulty
            dispatched[difficulty[event.group_id]] += event.group_size
        elif isinstance(event, EpisodeCompleted):
            completed[event.episode_id] = (event.reward, event.completion_tokens)
        elif isinstance(event, BatchShipped):
            batches.append(event)

    def of(episode_id: str) -> str:
        return difficulty[episode_id.rpartition("/")[0]]

    trained = [e for batch in batches for e in batch.trained_ids]
    lengths = [tokens for e, (_, tokens) in completed.items() if e.rpartition("/")[0] in difficulty]
    late = [e for batch in batches[-WINDOW:] for e in batch.episode_ids]
    by_difficulty = {}
    for name in sorted(set(difficulty.values())):
        rewards = [completed[e][0] for e in late if of(e) == name]
        by_difficulty[name] = {
            "dispatched": dispatched[name],
            "trained": sum(1 for e in trained if of(e) == name),
            "reward": round(statistics.fmean(rewards), 4) if rewards else None,
        }
    return {
        "batch_t": [round(batch.t, 2) for batch in batches],
        "trained_tokens": sum(completed[e][1] for e in trained),
        # the simulator's `trained_length_ratio`: trained against completed train episodes
        "trained_length_ratio": round(
            statistics.fmean(completed[e][1] for e in trained) / statistics.fmean(lengths), 4
        )
        if trained and lengths and sum(lengths)
        else None,
        "by_difficulty": by_difficulty,
    }


def _whatif(log: Path, compare: Sequence[str]) -> dict[str, Any]:
    command = [
        sys.executable, "-c", "from rolloutlog.cli.main import main; main()",
        "whatif", str(log), "--compare", ",".join(compare), "--json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"whatif {log}: {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _live_cpu_s() -> float:
    """CPU seconds of this process and of every live descendant (Linux /proc): the local
    servers and vLLM's run in sessions of their own, but they are this process's children
    (vLLM's engine cores its grandchildren)."""
    ticks, parent, used = os.sysconf("SC_CLK_TCK"), {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid = int(stat.parent.name)  # ppid at 1; utime and stime at 11 and 12
            parent[pid], used[pid] = int(fields[1]), int(fields[11]) + int(fields[12])
    mine, total = {os.getpid()}, 0
    for pid in sorted(parent, key=lambda p: _depth(p, parent)):
        if pid in mine or parent[pid] in mine:
            mine.add(pid)
            total += used[pid]
    return total / ticks


def _depth(pid: int, parent: dict[int, int]) -> int:
    """How many ancestors `pid` has among the processes read (parents before children)."""
    depth = 0
    while pid in parent and depth < 64:
        pid, depth = parent[pid], depth + 1
    return depth


def _cpu_s() -> float:
    """CPU seconds so far of this process and its descendants, alive or exited."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # those that exited
    return _live_cpu_s() + children.ru_utime + children.ru_stime


@contextlib.contextmanager
def _backend(
    backend: str, command: str | None, extra: list[str], root: Path
) -> Iterator[list[Any]]:
    """No servers for the twin (each run starts its own); started vLLM servers otherwise
    (`command`, else the CPU build's launcher)."""
    if backend == "twin":
        yield []
        return
    _, settings = build_settings(parse_overrides(extra), seed=0)
    launcher = shlex.split(command) if command else cpu_command()
    with vllm_from_v0(launcher, settings, root) as servers:
        yield servers


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--presets", default=",".join(DEFAULT_PRESETS))
    parser.add_argument("--compare", default="", help="whatif's presets (default: --presets)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--settings", default="default", help=",".join(SETTINGS_SETS))
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--plot", type=Path, help="draw reward against wall seconds here")
    parser.add_argument("--set", dest="extra", action="append", default=[])
    parser.add_argument("--backend", choices=["twin", "vllm"], default="twin")
    parser.add_argument(
        "--vllm-command",
        help="vLLM's command line (default: the CPU build's, from ROLLOUTLOG_VLLM_VENV or "
        ".venv-vllm: vllm_launch.cpu_command)",
    )
    parser.add_argument("--report-only", action="store_true", help="run nothing new")
    parser.add_argument("--bounds", default="", help="sweep max_off_policy_steps: 1,2,4,8")
    parser.add_argument("--stale", default="", help="sweep stale_tokens: drop,mask")
    parser.add_argument("--corrections", default="", help="sweep is_correction: none,decoupled")
    parser.add_argument("--sync", action="store_true", help="add bound 0 with drain")
    parser.add_argument(
        "--sync-batch", type=int, metavar="B", help="add bound 0, drain, B in flight (the batch)"
    )
    parser.add_argument("--eval-every", type=int, default=5, help="held-out eval period")
    parser.add_argument("--target", type=float, default=0.5, help="held-out reward to reach")
    parser.add_argument("--eval-plot", type=Path, help="draw held-out reward against CPU s")
    args = parser.parse_args(argv)
    presets, settings, compare = _names(args.presets), _names(args.settings), _names(args.compare)
    try:
        check_presets(presets)
        check_settings(settings)
        if compare:
            check_presets(compare, "--compare")
        found = variants(
            [_number(b, "--bounds") for b in _names(args.bounds)],
            _names(args.stale),
            _names(args.corrections),
            args.sync,
        )
        if args.sync_batch:
            found = [variant for variant in found if variant] + [sync_batch(args.sync_batch)]
        check_variants(found, settings)
        if not args.report_only:
            run_missing(args, presets, settings, compare, found)
    except (StudyError, ConfigError) as error:
        print(f"learning.py: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    table = reported(load_table(args.table), settings, args.seeds, args.extra, args.backend)
    # a run stopped before its last batch (`ok` false: interrupted, failed) stays in the
    # table but out of the report
    rows = [r for r in table if r["preset"] in presets and r.get("ok", True)]
    swept = [r for r in rows if r["steps"] == args.steps and r.get("variant")]
    print(report([r for r in rows if not r.get("variant")], args.steps))  # the presets' study
    print(sweep_report(rows, args.steps, args.target))
    if swept:
        print(sweep_effects(swept, args.steps))
        print(model_report(swept, args.target)[0])
    if args.plot:
        plot(rows, args.steps, args.plot)
    if args.eval_plot:
        plot_eval(rows, args.steps, args.eval_plot)


def run_missing(
    args: argparse.Namespace,
    presets: Sequence[str],
    settings: Sequence[str],
    compare: Sequence[str],
    found: Sequence[tuple[str, ...]],
) -> None:
    """`study` on the command's backend. A server that does not start (vLLM's or the
    twin's, on a machine too loaded) ends the command with one line, exit 1: the rows
    already in the table are kept, and the same command goes on from them."""
    try:
        with (
            tempfile.TemporaryDirectory() as scratch,
            _backend(args.backend, args.vllm_command, args.extra, Path(scratch)) as servers,
        ):
            study(
                presets=presets,
                seeds=args.seeds,
                steps=args.steps,
                settings=settings,
                table=args.table,
                extra=args.extra,
                compare=compare,
                variant_sets=found,
                backend=args.backend,
                runner=functools.partial(run_one, servers=servers, eval_every=args.eval_every),
            )
    except (VLLMStartError, ServerStartError) as error:
        first, _, tail = str(error).partition("\n")  # vLLM's: its log's tail, from a scratch dir
        print(f"learning.py: error: {first.rstrip(':')} (the rows in {args.table} are kept)",
              *filter(None, [tail]), sep="\n", file=sys.stderr)  # fmt: skip
        raise SystemExit(1) from None


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _number(text: str, option: str) -> int:
    if not text.isdigit():
        raise StudyError(f"{option} {text}: a bound is a whole number of steps")
    return int(text)


if __name__ == "__main__":
    main()
