"""A non-editable install works on its own: every room and the package data are in the wheel."""

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # every test here launches a whole run, a cluster or an install



def test_wheel_install_runs_the_cli_outside_the_checkout(tmp_path):
    source = tmp_path / "source"  # the tracked files only, so the build leaves the checkout as it was
    tracked = subprocess.run(["git", "ls-files"], check=True, capture_output=True, text=True, cwd=ROOT).stdout
    for rel in tracked.splitlines():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, source / rel, follow_symlinks=False)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source),
                    "-w", str(tmp_path / "dist")], check=True, capture_output=True, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("rust_rewards-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # this venv's dependencies
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True,
                   capture_output=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "one.rs").write_text("pub fn one() -> i32 {\n    1\n}\n")
    probe = ("import importlib, json, pkgutil, rust_rewards\n"
             "for room in pkgutil.walk_packages(rust_rewards.__path__, 'rust_rewards.'):\n"
             "    importlib.import_module(room.name)\n"
             "from rust_rewards.data.bundled import BUNDLED_TASKS, EASY_TASKS\n"
             "from rust_rewards.verify.bench import DEFAULT_CORPUS, load_corpus\n"
             "from rust_rewards.data.importers import load_tasks\n"
             "print(json.dumps([rust_rewards.__file__, len(load_tasks(str(BUNDLED_TASKS))),"
             " len(load_tasks(str(EASY_TASKS))), len(load_corpus(DEFAULT_CORPUS))]))\n")
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=work)
    assert out.returncode == 0, out.stderr
    location, tasks, easy, corpus = json.loads(out.stdout)
    assert location.startswith(str(site)) and (tasks, easy, corpus) == (70, 60, 26)
    check = subprocess.run([str(python), "-m", "rust_rewards", "check", "one.rs"], capture_output=True, text=True,
                           cwd=work)
    assert check.returncode == 0, check.stderr
    assert '"build_ok": true' in check.stdout
