"""Verification on a local Ray cluster started by the test (2 CPUs): the same verdicts as local verification,
nothing lost when a worker dies mid-batch, one clear error for an unreachable cluster."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT

from rust_rewards.rewards import rewards_from_report
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.bench import DEFAULT_CORPUS, load_corpus, report_verdict
from rust_rewards.verify.ray import RayExecutor, RayUnreachable, connect
from rust_rewards.verify.verifier import Verifier

pytestmark = pytest.mark.slow  # every test here launches a whole run, a cluster or an install

ray = pytest.importorskip("ray")

FORGERY = ROOT / "tests" / "adversarial" / "forgery"
SLOW = """```rust
pub fn slow(x: u64) -> u64 {{
    std::thread::sleep(std::time::Duration::from_millis({ms}));
    x + {n}
}}

#[cfg(test)]
mod tests {{
    use super::*;
    #[test]
    fn adds() {{ assert_eq!(slow(1), {n1}); }}
}}
```"""


def slow(n: int, ms: int = 1500) -> str:
    """A distinct completion whose test takes ``ms`` milliseconds (and passes)."""
    return SLOW.format(ms=ms, n=n, n1=n + 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RAY_CLI = shutil.which("ray", path=str(Path(os.sys.executable).parent))


@pytest.fixture(scope="module")
def ray_home(tmp_path_factory) -> Path:
    """A home of the module's own for Ray's files (``~/.ray/auth_token``): what an earlier Ray run on this machine
    left in the real home changes nothing here."""
    return tmp_path_factory.mktemp("ray-home")


def ray_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without Ray auth settings, with ``home`` as HOME (Rust's toolchain still found
    where it is), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(HOME=str(home), CARGO_HOME=os.environ.get("CARGO_HOME", str(Path.home() / ".cargo")),
               RUSTUP_HOME=os.environ.get("RUSTUP_HOME", str(Path.home() / ".rustup")), **extra)
    return env


PROBE = ("from rust_rewards.verify.ray import connect, RayUnreachable\n"
         "import ray\n"
         "try:\n"
         "    connect({address!r})\n"
         "    print('CPUS', ray.cluster_resources().get('CPU'))\n"
         "except RayUnreachable as err:\n"
         "    print('ERR', err)\n")


def probe(address: str, env: dict[str, str]) -> str:
    """What a fresh process joining ``address`` with ``env`` prints: ``CPUS n`` or ``ERR <the one-line error>``."""
    done = subprocess.run([os.sys.executable, "-c", PROBE.format(address=address)], capture_output=True, text=True,
                          timeout=180, env=env, cwd=ROOT)
    return done.stdout + done.stderr[-2000:]


def start_head(port: int, env: dict[str, str]) -> None:
    """``ray start --head`` on this machine, 2 CPUs; its own output when it fails."""
    done = subprocess.run([RAY_CLI, "start", "--head", "--port", str(port), "--num-cpus", "2",
                           "--include-dashboard=false", "--disable-usage-stats"],
                          capture_output=True, text=True, timeout=120, env=env)
    if done.returncode:
        pytest.fail(f"ray start failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}")


@pytest.fixture(scope="module")
def cluster(ray_home):
    """A 2-CPU Ray head node started as README says (no auth), joined by this process; its address."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    start_head(port, ray_env(ray_home, RAY_AUTH_MODE="disabled"))
    try:
        connect(address)
        yield address
    finally:
        ray.shutdown()
        subprocess.run([RAY_CLI, "stop", "--force"], capture_output=True, timeout=120)


def corpus_with_hidden() -> tuple[list[str], list[HiddenTests | None]]:
    """The benchmark corpus (no hidden tests) plus the forgery corpus's controls and attacks with theirs."""
    texts = [text for _, text in load_corpus(DEFAULT_CORPUS)]
    hidden: list[HiddenTests | None] = [None] * len(texts)
    for name in ("honest_right", "honest_wrong", "nested_module", "exit_in_hidden_named_fn"):
        source = (FORGERY / f"{name}.rs").read_text()
        shape = source.split("// hidden: ", 1)[1].split()[0]
        texts.append(f"```rust\n{source}\n```")
        hidden.append(HiddenTests((FORGERY / "hidden" / f"{shape}.rs").read_text(), shape=shape))
    return texts, hidden


def test_same_verdicts_as_local_in_input_order_each_completion_once(cluster):
    texts, hidden = corpus_with_hidden()
    assert any(h is not None for h in hidden)
    local = Verifier(workers=2).verify_many(texts, hidden)
    remote = Verifier(executor=RayExecutor(address=cluster, cpus_per_worker=1, batch_size=4))
    try:
        doubled = remote.verify_many(texts + texts[:5], hidden + hidden[:5])
        assert [report_verdict(r) for r in doubled[: len(texts)]] == [report_verdict(r) for r in local]
        assert [(r.hidden_tests, r.hack_reasons) for r in doubled[: len(texts)]] == [
            (r.hidden_tests, r.hack_reasons) for r in local]
        assert doubled[len(texts):] == doubled[:5]
        assert not any(r.internal_error for r in doubled)
        assert remote.stats["verified"] == len(texts) and remote.stats["batches"] >= 2
        remote.verify_many(texts, hidden)
        assert remote.stats["verified"] == len(texts)  # the content-hash cache still applies
    finally:
        remote.close()


def _kill_mid_batch(remote: Verifier, texts: list[str]) -> list:
    """Verify ``texts`` while every worker is killed once, 0.8 s in (their tests take 1.5 s)."""
    pids = remote.executor.worker_pids()
    out: list = []
    runner = threading.Thread(target=lambda: out.extend(remote.verify_many(texts)))
    runner.start()
    time.sleep(0.8)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    runner.join(timeout=300)
    assert not runner.is_alive()
    return out


def _wait_for_actors(remote: Verifier, seconds: float = 120.0) -> None:
    """Until every actor answers again (Ray restarts killed ones)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            remote.executor.worker_pids()
            return
        except Exception:  # noqa: BLE001 - an actor still restarting
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def test_a_worker_killed_mid_batch_loses_nothing(cluster):
    texts = [slow(n) for n in range(4)]
    remote = Verifier(executor=RayExecutor(address=cluster, cpus_per_worker=1, batch_size=2))
    try:
        reports = _kill_mid_batch(remote, texts)
        assert remote.stats["retried"] >= 1
        assert len(reports) == 4 and not any(r.internal_error for r in reports)
        assert all(r.build_ok and r.tests_ok and r.own_tests.passed == 1 for r in reports)
    finally:
        remote.close()


def test_a_batch_that_cannot_be_verified_scores_none_not_an_exception(cluster):
    texts = [slow(n) for n in range(10, 14)]
    remote = Verifier(executor=RayExecutor(address=cluster, cpus_per_worker=1, batch_size=2, retries=0))
    try:
        reports = _kill_mid_batch(remote, texts)
        assert len(reports) == 4
        failed = [r for r in reports if r.internal_error]
        assert failed and all(r.internal_error.startswith("RayError: ") for r in failed)
        assert all(v is None for r in failed for v in rewards_from_report(r).values())
        assert remote.forget_failures() == len(failed)
        _wait_for_actors(remote)  # a restart takes longer on a loaded machine
        again = remote.verify_many(texts)  # the actors were restarted: the next step verifies them
        assert all(r.tests_ok and not r.internal_error for r in again)
    finally:
        remote.close()


def test_unreachable_cluster_is_one_clear_error_at_start():
    port = free_port()
    started = time.monotonic()
    with pytest.raises(RayUnreachable, match=f"--ray-address 127.0.0.1:{port}: no Ray cluster answers there"):
        connect(f"127.0.0.1:{port}", timeout=2.0)
    assert time.monotonic() - started < 10
    with pytest.raises(ValueError, match="expected auto, local or HOST:PORT"):
        connect("not-an-address")


def _stop_head(port: int) -> None:
    """Kill the processes of the cluster whose GCS listens on ``port`` (``ray stop`` would stop every cluster)."""
    mark = re.compile(rb"(--gcs[-_]address=[^\x00\s]+:|--gcs_server_port=)%d\b" % port)
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and int(proc.name) != os.getpid() and mark.search(cmdline):
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_local_run_then_the_readme_cluster_then_a_token_cluster(ray_home, cluster):
    """The user's sequence: ``--ray-address local`` leaves no token behind; the README's no-auth head (the module's
    ``cluster``) is joined afterwards; a token-auth head refuses a client without its token, or with another, in one
    line naming the auth modes, and accepts one with it."""
    local = subprocess.run([os.sys.executable, "-c", "from rust_rewards.verify.ray import connect\n"
                            "import ray\nconnect('local', num_cpus=1)\nprint('CPUS', ray.cluster_resources()['CPU'])"],
                           capture_output=True, text=True, timeout=180, env=ray_env(ray_home), cwd=ROOT)
    assert "CPUS 1.0" in local.stdout, local.stdout + local.stderr[-2000:]
    assert not (ray_home / ".ray" / "auth_token").exists()
    (ray_home / ".ray").mkdir(exist_ok=True)
    (ray_home / ".ray" / "auth_token").write_text("0" * 32)  # what a local run of Ray 2.60 left before this fix
    assert "CPUS 2.0" in probe(cluster, ray_env(ray_home))

    port, token = free_port(), os.urandom(16).hex()
    start_head(port, ray_env(ray_home, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token))
    # a refused client: ray.init asks the cluster 20 times before it raises (21 s each); the message is the same
    # after 2 (measured: 2.7 s)
    refused = {"RAY_NUM_REDIS_GET_RETRIES": "2"}
    try:
        without = probe(f"127.0.0.1:{port}", ray_env(ray_home, **refused))
        wrong = probe(f"127.0.0.1:{port}", ray_env(ray_home, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="0" * 32,
                                                   **refused))
        right = probe(f"127.0.0.1:{port}", ray_env(ray_home, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token))
    finally:
        _stop_head(port)
    line = next((text for text in without.splitlines() if text.startswith("ERR")), without)
    assert line.startswith(f"ERR --ray-address 127.0.0.1:{port}: authentication refused (InvalidAuthToken): the "
                           "cluster has token auth (RAY_AUTH_MODE=token); this process connects with "
                           "RAY_AUTH_MODE=disabled, no token"), without
    assert line.endswith("export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or copy ~/.ray/auth_token) before starting")
    assert "the cluster has token auth with another token; this process connects with RAY_AUTH_MODE=token, its " \
           "token from the RAY_AUTH_TOKEN variable" in wrong, wrong
    assert "CPUS 2.0" in right, right


def test_eval_and_process_data_verify_on_the_cluster(cluster):
    """``--verifier ray``: eval's scores and process_data's reference check equal the local ones."""
    import pandas as pd

    from rust_rewards.data.importers import load_tasks
    from rust_rewards.data.pipeline import verify_tasks
    from rust_rewards.eval.scoring import score_predictions
    from rust_rewards.verify.verifier import configure_verifier, get_verifier

    tasks = load_tasks(ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl")[:6]
    predictions = pd.DataFrame({"model": "m", "task_id": [t.task_id for t in tasks], "sample": 0,
                                "completion": [f"```rust\n{t.reference_code}\n```" for t in tasks]})
    try:
        local = score_predictions(tasks, predictions)
        local_kept = [t.task_id for t in verify_tasks(tasks).kept]
        remote = score_predictions(tasks, predictions, backend="ray", ray_address=cluster)
        assert get_verifier().backend == "ray"
        remote_kept = [t.task_id for t in verify_tasks(tasks, backend="ray", ray_address=cluster).kept]
    finally:
        configure_verifier()
    columns = ["task_id", "build_ok", "clippy_ok", "tests_ok", "hidden_ok", "hidden_passed", "internal_error"]
    assert remote[columns].equals(local[columns]) and local["hidden_ok"].all()
    assert remote_kept == local_kept == [t.task_id for t in tasks]


def test_training_rewards_come_from_the_cluster(cluster, tmp_path, tiny_model_dir):
    """``train.py --verifier ray``: a tiny GRPO step whose every completion was verified by the Ray actors."""
    import pandas as pd

    from rust_rewards.train.config import params_from_mapping
    from rust_rewards.train.loop import run_training
    from rust_rewards.verify.verifier import configure_verifier, get_verifier

    params = params_from_mapping({"preset": "tiny", "model": str(tiny_model_dir), "output-dir": str(tmp_path / "run"),
                                  "max-steps": 1, "num-generations": 4, "per-device-train-batch-size": 8,
                                  "verifier": "ray", "ray-address": cluster})
    try:
        result = run_training(params, progress=None)
        remote = get_verifier()
        assert remote.backend == "ray" and remote.stats["batches"] >= 1
        assert remote.stats["verified"] == remote.stats["requested"] - remote.stats["cache_hits"] > 0
    finally:
        configure_verifier()
    rows = pd.read_parquet(tmp_path / "run" / "completions" / "step_000001.parquet")
    assert result.global_step == 1 and len(rows) == 8 and (rows["internal_error"] == "").all()
