import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from rust_rewards.cpus import usable_cpus
from rust_rewards.workspace import ENV

ROOT = Path(__file__).resolve().parent.parent
"""The repository root (tests import it: ``from conftest import ROOT``)."""
ADVERSARIAL = ROOT / "tests" / "adversarial"
"""The adversarial corpora: hostile completions, one file per case, in a folder per review."""
FIXTURES = ROOT / "tests" / "fixtures"
"""Test data that is not a corpus (the wrong answers of the medium and loop tiers)."""
os.environ.setdefault(ENV, str(ROOT))  # the notebooks' workspace, wherever pytest is started

WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
"""pytest-xdist workers (``-n N``): they share the cores, so torch's OpenMP threads (in each worker and the runs it
launches) take their share and sleep while they wait; spinning ones made two parallel trainings slower than one after
the other (the feedback-turns and SFT tests: 176 s side by side, 113 s with these settings, 106 s in sequence)."""
if WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, usable_cpus() // WORKERS)))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The warm-started tiny model the tiny preset trains, for the whole test session: the workspace's
    ``outputs/tiny-model``, reused when the main job (or an earlier session) built it, else built (~30 s)."""
    from rust_rewards.train.config import preset_params
    from rust_rewards.train.tiny_model import build_tiny_model

    return build_tiny_model(ROOT / preset_params("tiny").model)


@dataclass(frozen=True)
class ScriptRun:
    """``train.py`` run as a script: its output folder, wandb's offline folder and what it printed."""

    out: Path
    wandb_dir: Path
    stdout: str


@pytest.fixture(scope="session")
def script_run(tmp_path_factory, tiny_model_dir) -> ScriptRun:
    """One real two-step GRPO run of the tiny preset through ``train.py`` as a script, wandb offline, shared by the
    tests that only read such a run (the command line's own test, the dashboard in the browser, DPO beside GRPO).
    Under pytest-xdist the first worker to ask trains it, under a file lock, and the others read it."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's folder, above each worker's own
    root = shared / "script-run"
    with FileLock(str(shared / "script-run.lock")):
        printed = root / "stdout.txt"
        if not printed.is_file():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(root), "WANDB_SILENT": "true"}
            proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--preset", "tiny", "--max-steps", "2",
                                   "--output-dir", str(root / "out"), "--model", str(tiny_model_dir), "--wandb"],
                                  cwd=root, env=env, capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                pytest.fail(f"train.py failed with {proc.returncode}:\n{(proc.stdout + proc.stderr)[-4000:]}")
            printed.write_text(proc.stdout)
    return ScriptRun(root / "out", root, printed.read_text())


@pytest.fixture(scope="module")
def verifier():
    """A local verifier with 2 workers for one test module, closed after it."""
    from rust_rewards.verify.verifier import Verifier

    v = Verifier(workers=2)
    yield v
    v.close()


LONGEST_FIRST = ("test_browser.py", "test_batch.py", "test_feedback_turns.py", "test_bundled_tasks.py",
                 "test_honest_code.py", "test_distributed.py", "test_ray.py", "test_eval.py", "test_dry_run.py",
                 "test_wrong_solutions.py", "test_sft.py", "test_train.py", "test_soundness_holes.py",
                 "test_rule_costs.py", "test_std_value_notes.py", "test_clippy_forced.py", "test_sandbox.py")
"""Files whose tests take longest (``--durations`` of a whole run), started first so that the two pytest-xdist
workers do not end with one long file running alone; only the order changes."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--corpora", choices=("sample", "all"), default="sample",
                     help="the whole-corpus tests (../shared/benchmarks: the honest Exercism answers, eval on the "
                          "Exercism references and MultiPL-E stubs; the shipped task sets' cargo checks): a fixed "
                          "sample of each (default, CI) or every task (a measurement: the four files with these tests "
                          "took 7.5 minutes on 2 cores)")


@pytest.fixture(scope="session")
def whole_corpora(request) -> bool:
    """Whether the corpus tests take every task (``--corpora all``) or their fixed sample."""
    return request.config.getoption("corpora") == "all"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests start servers and a headless chromium: they count as slow (``pytest -m "not slow"``).
    The files in ``LONGEST_FIRST`` run first, in that order; the others keep theirs."""
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(pytest.mark.slow)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
