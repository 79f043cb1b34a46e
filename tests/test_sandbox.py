"""The adversarial corpus: hostile code must end within its limits, score 0 where it misbehaves, leave nothing
behind and never crash the caller."""

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from rust_rewards.rewards import rewards_from_report
from rust_rewards.sandbox import Limits, detect_isolation
from rust_rewards.verifier import Verifier
from rust_rewards.verify import VerifierConfig

CORPUS = Path(__file__).parent / "adversarial"
COMPILE = Limits(wall_seconds=20, cpu_seconds=20, memory_mb=4096, file_size_mb=512, processes=64)
RUN = Limits(wall_seconds=5, cpu_seconds=5, memory_mb=2048, file_size_mb=64, processes=32)
ISO = detect_isolation()
STRONG = ISO.drop_uid or ISO.bwrap is not None


class Listener:
    """A loopback TCP server that records whether anything connected."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                continue

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


def _processes_using(work: Path) -> list[str]:
    """Processes whose command line or working directory is inside ``work``."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        pid = line.split()[0]
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = ""
        if str(work) in line or cwd.startswith(str(work)):
            found.append(line)
    return found


@pytest.fixture(scope="module")
def outcome():
    outside = Path("/var/tmp") / f"rr-adversarial-{secrets.token_hex(4)}"
    outside.mkdir(mode=0o755)
    secret_value = secrets.token_hex(16)
    secret = outside / "secret.txt"
    secret.write_text(secret_value)
    secret.chmod(0o600)
    canary = outside / "canary"
    canary.mkdir(mode=0o755)
    (canary / "keep.txt").write_text("keep")
    listener = Listener()
    work = Path(tempfile.mkdtemp(prefix="rr-work-", dir="/var/tmp"))
    work.chmod(0o755)
    names = sorted(p.stem for p in CORPUS.glob("*.rs"))
    sources = [
        (CORPUS / f"{n}.rs").read_text()
        .replace("{PORT}", str(listener.port)).replace("{SECRET_VALUE}", secret_value)
        .replace("{SECRET}", str(secret)).replace("{CANARY}", str(canary))
        for n in names
    ]
    verifier = Verifier(VerifierConfig(compile_limits=COMPILE, run_limits=RUN, workdir=str(work)), workers=2)
    start = time.monotonic()
    reports = verifier.verify_many(sources, raw_code=True)
    elapsed = time.monotonic() - start
    verifier.close()
    time.sleep(0.5)
    result = {
        "reports": dict(zip(names, reports, strict=True)),
        "elapsed": elapsed,
        "leftover_processes": _processes_using(work),
        "leftover_files": sorted(str(p) for p in work.iterdir()),
        "canary_intact": (canary / "keep.txt").exists(),
        "secret_intact": secret.read_text() == secret_value,
        "connections": listener.connections,
    }
    listener.close()
    shutil.rmtree(outside)
    shutil.rmtree(work)
    return result


def test_corpus_is_complete():
    expected = {
        "infinite_loop", "thread_storm", "process_storm", "huge_allocation", "huge_file", "network_connect",
        "read_secret", "delete_canary", "flood_output", "exit_zero", "include_outside", "generic_recursion",
        "const_eval_loop",
    }
    assert expected <= {p.stem for p in CORPUS.glob("*.rs")}


def test_every_case_ends_within_its_limits(outcome):
    # 13 cases on 2 workers; the slowest possible chain is a compile timeout plus run timeouts.
    assert outcome["elapsed"] < 2 * (COMPILE.wall_seconds + 2 * RUN.wall_seconds) + 30
    for name, report in outcome["reports"].items():
        assert not report.internal_error, (name, report.internal_error)
        assert sum(report.durations.values()) < 3 * COMPILE.wall_seconds, (name, report.durations)


def test_nothing_is_left_behind(outcome):
    assert outcome["leftover_processes"] == []
    assert outcome["leftover_files"] == []
    assert outcome["canary_intact"]
    assert outcome["secret_intact"]


@pytest.mark.parametrize("name", [
    "infinite_loop", "thread_storm", "process_storm", "huge_allocation", "huge_file", "flood_output",
    "exit_zero",
])
def test_misbehaving_tests_earn_no_test_reward(outcome, name):
    report = outcome["reports"][name]
    assert report.build_ok, report.diagnostics
    assert not report.tests_ok
    assert rewards_from_report(report)["test_reward"] == 0.0


def test_infinite_loop_times_out(outcome):
    report = outcome["reports"]["infinite_loop"]
    assert "test" in report.timed_out
    assert report.durations["test"] < RUN.wall_seconds + 2


def test_exit_zero_is_not_a_pass(outcome):
    report = outcome["reports"]["exit_zero"]
    assert "std::process::exit" in report.source.forbidden
    assert not report.own_tests.summary_seen


def test_flood_output_is_capped(outcome):
    assert len(outcome["reports"]["flood_output"].test_output) <= 20_000


@pytest.mark.skipif(not STRONG, reason="needs bwrap or root privilege dropping")
@pytest.mark.parametrize("name", ["network_connect", "read_secret", "delete_canary"])
def test_escapes_fail(outcome, name):
    report = outcome["reports"][name]
    assert report.build_ok, report.diagnostics
    assert report.own_tests.failed == report.own_tests.expected > 0
    assert rewards_from_report(report)["test_reward"] == 0.0


@pytest.mark.skipif(not STRONG, reason="needs bwrap or root privilege dropping")
def test_no_connection_reached_the_host(outcome):
    assert outcome["connections"] == 0


@pytest.mark.skipif(not STRONG, reason="needs bwrap or root privilege dropping")
def test_include_outside_the_crate_does_not_compile(outcome):
    report = outcome["reports"]["include_outside"]
    assert not report.build_ok
    assert rewards_from_report(report)["build_reward"] == 0.0


@pytest.mark.parametrize("name", ["generic_recursion", "const_eval_loop"])
def test_compile_time_blowups_fail_the_build(outcome, name):
    report = outcome["reports"][name]
    assert not report.build_ok
    assert rewards_from_report(report)["build_reward"] == 0.0
    assert report.durations["build"] < COMPILE.wall_seconds + 2


def test_isolation_layers_are_reported(outcome):
    layers = outcome["reports"]["infinite_loop"].isolation
    assert "wall-clock timeout" in layers and "rlimits" in layers
    if os.geteuid() == 0:
        assert "unprivileged uid per worker" in layers


def test_unreachable_workdir_is_a_clear_error(tmp_path):
    if not ISO.drop_uid:
        pytest.skip("only matters when the sandbox drops to another uid")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    verifier = Verifier(VerifierConfig(workdir=str(private)), workers=1)
    with pytest.raises(PermissionError, match="not searchable"):
        verifier.verify("pub fn f() {}", raw_code=True)
    verifier.close()
