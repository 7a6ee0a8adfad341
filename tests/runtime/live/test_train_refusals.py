"""`rolloutlog train` refuses bad input in one line (exit 2) before it writes anything: a
refused `--resume` leaves the log, its rollout store and the weights directory as they were,
and a refused new run creates no file."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from rolloutlog.cli.main import main
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.log_writer import LogWriter
from rolloutlog.runs.train import prepare_resume
from rolloutlog.runs.train_inputs import RunRefused, read_crashed_run
from rolloutlog.runtime.live import session
from rolloutlog.runtime.live.crash_points import ENVIRONMENT_VARIABLE
from rolloutlog.runtime.live.rollout_store import read_store
from rolloutlog.runtime.live.twin.launch import ServerStartError

SETTINGS = ("group_size=4", "batch_size=16", "max_inflight=16", "server_mode=thread")


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run SIGKILLed mid-commit (a torn tail) after its first shipped batch: run.arrow,
    run.arrow.rollouts and weights/ (v0, v1)."""
    root = tmp_path_factory.mktemp("crashed")
    command = [sys.executable, "-c", "from rolloutlog.cli.main import main; main()", "train"]
    command += ["--steps", "4", "--seed", "1", "--log", "run.arrow", "--weights-dir", "weights"]
    for setting in SETTINGS:
        command += ["--set", setting]
    environment = {**os.environ, ENVIRONMENT_VARIABLE: "commit:2"}
    done = subprocess.run(command, cwd=root, env=environment, capture_output=True, timeout=240)
    assert done.returncode == -9, done.stderr[-2000:]
    return root


@pytest.fixture
def run(crashed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the crashed run, as the working directory (its store still names
    the original weights directory: a test that may resume passes --weights-dir)."""
    copy = tmp_path / "run"
    shutil.copytree(crashed, copy)
    monkeypatch.chdir(copy)
    return copy


def _files(root: Path) -> dict[str, bytes]:
    """The run's files; an output's lock (`events.output_lock`) holds no run data: the
    SIGKILLed run left its lock file, which the next command on the log takes and removes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix != ".lock"
    }


def _train(*arguments: str) -> Result:
    return CliRunner().invoke(main, ["train", *arguments])


def _refused(result: Result, message: str) -> None:
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output


def test_a_resume_refused_for_the_weights_directory_changes_nothing(run: Path) -> None:
    shutil.copytree(run / "weights" / "v0", run / "other" / "v5")  # another run's, further on
    ready = run / "other" / "v5" / "READY"
    ready.write_text(json.dumps({**json.loads(ready.read_text()), "version": 5}))
    before = _files(run)
    _refused(_train("--resume", "run.arrow", "--weights-dir", "other"), "not this run's weights")
    assert _files(run) == before
    _refused(_train("--resume", "run.arrow", "--weights-dir", "gone"), "no complete checkpoint")
    assert _files(run) == before and not (run / "gone").exists()


def _rewrite_ready(weights: Path, **changes: object) -> None:
    """Set (or, for None, drop) keys of every READY marker under `weights`."""
    for ready in weights.glob("v*/READY"):
        marker = {**json.loads(ready.read_text()), **changes}
        ready.write_text(json.dumps({k: v for k, v in marker.items() if v is not None}))


def test_a_resume_refuses_another_runs_checkpoints_and_names_both_runs(run: Path) -> None:
    run_id = read_store(run / "run.arrow.rollouts").meta["run_id"]
    assert {json.loads(r.read_text())["run"] for r in run.glob("weights/v*/READY")} == {run_id}
    shutil.copytree(run / "weights", run / "other")  # the versions fit; the run does not
    _rewrite_ready(run / "other", run="0123456789abcdef")
    before = _files(run)
    result = _train("--resume", "run.arrow", "--weights-dir", "other")
    _refused(result, "written by run 0123456789abcdef, but this run is " + run_id)
    assert _files(run) == before


def test_a_resumed_run_publishes_under_its_own_id(run: Path) -> None:
    run_id = read_store(run / "run.arrow.rollouts").meta["run_id"]
    resumed = _train("--resume", "run.arrow", "--weights-dir", "weights")
    assert resumed.exit_code == 0, resumed.output
    readies = [json.loads(r.read_text()) for r in run.glob("weights/v*/READY")]
    assert {r["run"] for r in readies} == {run_id} and max(r["version"] for r in readies) == 4


@pytest.mark.parametrize("checkpoint_id", [False, True])
def test_runs_and_checkpoints_from_before_run_ids(run: Path, checkpoint_id: bool) -> None:
    """Checkpoints without an id are accepted as before; a run without one (its store has
    none) gets one, and refuses checkpoints that name a run."""
    _rewrite_ready(run / "weights", run="0123456789abcdef" if checkpoint_id else None)
    with (run / "run.arrow.rollouts").open("a") as store:
        store.write('{"meta":{"run_id":null}}\n')
    crashed = read_crashed_run(Path("run.arrow"))
    if checkpoint_id:
        with pytest.raises(RunRefused, match="this run is unnamed"):
            prepare_resume(Path("run.arrow"), crashed, run / "weights")
    else:
        point = prepare_resume(Path("run.arrow"), crashed, run / "weights")
        # The crash (at the second commit) races the trainer's v1: resume takes the newest.
        newest = max(json.loads(r.read_text())["version"] for r in run.glob("weights/v*/READY"))
        assert point.checkpoint == newest and len(point.run_id) == 16


def test_a_resume_asking_for_no_more_steps_than_shipped_is_refused(run: Path) -> None:
    before = _files(run)
    _refused(
        _train("--resume", "run.arrow", "--steps", "1"), "--steps 1: the run already shipped 1"
    )
    assert _files(run) == before


@pytest.mark.parametrize("header", [True, False])
def test_a_run_killed_before_its_first_event_is_said_never_to_have_started(
    header: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    writer = LogWriter(tmp_path / "started.arrow", mode="create")
    written = (tmp_path / "started.arrow").read_bytes()  # the header, no event
    writer.close()
    Path("e1.arrow").write_bytes(written if header else b"")
    Path("e1.arrow.rollouts").touch()
    before = _files(tmp_path)
    _refused(_train("--resume", "e1.arrow"), "e1.arrow: the run never started")
    assert _files(tmp_path) == before


def test_resume_names_what_is_missing_and_the_options_it_refuses(tmp_path: Path) -> None:
    _refused(_train("--resume", str(tmp_path / "x.arrow")), "x.arrow: no such log")
    with_initial = _train("--resume", str(tmp_path / "x.arrow"), "--save-initial", "v0")
    assert (
        with_initial.exit_code == 2 and "--save-initial: not with --resume" in with_initial.stderr
    )
    _refused(_train("--resume", "x.arrow", "--url", "foo"), "--url foo: expected http://")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--set", "frozen_fraction=0.5"], "no frozen policy"),
        (["--url", "http://127.0.0.1:99999"], "--url http://127.0.0.1:99999: Port out of range"),
        (["--url", "foo"], "--url foo: expected http://"),
        (["--weights-dir", "afile/sub"], "--weights-dir afile/sub: "),
        (["--weights-dir", "held"], "--weights-dir held: holds checkpoints v3..v3"),
        (["--save-initial", "afile/sub"], "--save-initial afile/sub: "),
        (["--save-initial", "/proc/si"], "--save-initial /proc/si: "),
        (["--log", "kept.arrow"], "kept.arrow.rollouts exists"),
        (["--log", "gone/x.arrow"], "--log gone/x.arrow: the folder gone does not exist"),
        (["--weights-dir", "gone/w"], "--weights-dir gone/w: the folder gone does not exist"),
        (["--save-initial", "gone/v0"], "--save-initial gone/v0: the folder gone does not exist"),
    ],
)
def test_a_refused_new_run_creates_nothing(
    arguments: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("afile").touch()
    Path("kept.arrow.rollouts").touch()
    (tmp_path / "held" / "v3").mkdir(parents=True)
    before = _files(tmp_path)
    log = [] if "--log" in arguments else ["--log", "new.arrow"]
    run = [] if "--save-initial" in arguments else ["--steps", "1", *log]  # it takes none
    result = _train(*run, *arguments)
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert "Traceback" not in result.output
    assert _files(tmp_path) == before and sorted(os.listdir(tmp_path)) == [
        "afile",
        "held",
        "kept.arrow.rollouts",
    ]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--save-initial", "v0", "--log", "x.arrow"], "--log: not with --save-initial"),
        (["--save-initial", "v0", "--steps", "5"], "--steps: not with --save-initial"),
        (["--save-initial", "v0", "--weights-dir", "w"], "--weights-dir: not with --save-initial"),
        (["--resume", "x.arrow", "--backend", "vllm"], "--backend: not with --resume"),
        (["--resume", "x.arrow", "--policy", "tinker"], "--policy: not with --resume"),
    ],
)
def test_options_that_would_be_ignored_are_refused(
    arguments: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _train(*arguments)
    _refused(result, "rolloutlog: error: " + message)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--set", "hidden_size=40"], "live.hidden_size: must be a multiple of 32"),
        (
            ["--set", "batch_size=64", "--set", "run.batch_size=128"],
            "--set batch_size and --set run.batch_size: two values for run.batch_size",
        ),
        (["--backend", "vllm"], "--backend vllm needs --url"),
        (["--policy", "per-batch"], "Invalid value for --policy: policy 'per-batch': must start"),
    ],
)
def test_bad_settings_are_one_line(arguments: list[str], message: str, tmp_path: Path) -> None:
    result = _train("--log", str(tmp_path / "x.arrow"), *arguments)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert result.stderr.startswith("rolloutlog: error: " + message)
    assert os.listdir(tmp_path) == []


def test_a_resume_that_cannot_reach_inference_leaves_the_run_resumable(run: Path) -> None:
    shutil.copytree(run / "weights", run / "moved")
    recorded = (run / "run.arrow").read_bytes()  # it ends in a torn tail
    failed = _train(
        "--resume", "run.arrow", "--url", "http://127.0.0.1:9", "--weights-dir", "moved"
    )
    assert failed.exit_code == 1, failed.output
    kinds = [event.kind for event in LogReader(run / "run.arrow", warn=False)]
    assert "run_finished" not in kinds and "run_resumed" not in kinds
    assert (run / "run.arrow").read_bytes() == recorded  # the torn tail is not cut either
    # the override is remembered: the next resume finds its checkpoints without it
    assert read_store(run / "run.arrow.rollouts").meta["weights_dir"] == str(run / "moved")


def test_a_server_that_will_not_start_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @contextlib.contextmanager
    def exits(*args: object, **kwargs: object) -> Iterator[list[str]]:
        raise ServerStartError("CPU inference server exited before it listened (exit code 1)")
        yield []

    monkeypatch.setattr(session, "local_servers", exits)
    result = _train("--steps", "1", "--log", str(tmp_path / "s.arrow"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip() == (
        "rolloutlog: error: CPU inference server exited before it listened (exit code 1)"
    )


def test_train_without_the_train_extra_names_the_extra_in_one_line(tmp_path: Path) -> None:
    """The README's first venv has no torch: a sitecustomize hides it from the process."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    path = os.pathsep.join([str(tmp_path), *sys.path])
    command = [sys.executable, "-c", "from rolloutlog.cli.main import main; main()", "train"]
    done = subprocess.run(
        [*command, "--steps", "1", "--log", str(tmp_path / "x.arrow")],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr == (
        "rolloutlog: error: rolloutlog train needs torch (pip install 'rolloutlog[train]')\n"
    )
    assert not (tmp_path / "x.arrow").exists()


def test_an_existing_log_is_refused_before_torch_is_imported(tmp_path: Path) -> None:
    """Start-up (torch, the model) takes seconds: a log that exists is refused before it."""
    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, sys\n"
        "atexit.register(lambda: print('torch imported:', 'torch' in sys.modules))\n"
    )
    (tmp_path / "kept.arrow").touch()
    path = os.pathsep.join([str(tmp_path), *sys.path])
    command = [sys.executable, "-c", "from rolloutlog.cli.main import main; main()", "train"]
    done = subprocess.run(
        [*command, "--log", str(tmp_path / "kept.arrow")],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "kept.arrow: exists; name a new file" in done.stderr
    assert done.stdout == "torch imported: False\n"


def test_a_new_run_that_cannot_reach_inference_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _train("--steps", "1", "--log", "new.arrow", "--url", "http://127.0.0.1:9")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert (
        result.stderr.startswith("rolloutlog: error: ") and "nothing was recorded" in result.stderr
    )
    assert os.listdir(tmp_path) == []
