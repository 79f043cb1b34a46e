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
from conftest import ADVERSARIAL

from rust_rewards.rewards import rewards_from_report
from rust_rewards.verify import sandbox
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.sandbox import Limits, SandboxError, Step, detect_isolation
from rust_rewards.verify.verifier import Verifier

CORPUS = ADVERSARIAL
COMPILE = Limits(wall_seconds=10, cpu_seconds=10, memory_mb=4096, file_size_mb=512, processes=64)
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
        "const_eval_loop", "infra_fake_bwrap_message",
    }
    assert expected <= {p.stem for p in CORPUS.glob("*.rs")}


@pytest.mark.slow
def test_every_case_ends_within_its_limits(outcome):
    # 13 cases on 2 workers; the slowest possible chain is a compile timeout plus run timeouts.
    assert outcome["elapsed"] < 2 * (COMPILE.wall_seconds + 2 * RUN.wall_seconds) + 30
    for name, report in outcome["reports"].items():
        assert not report.internal_error, (name, report.internal_error)
        assert sum(report.durations.values()) < 3 * COMPILE.wall_seconds, (name, report.durations)


@pytest.mark.slow
def test_nothing_is_left_behind(outcome):
    assert outcome["leftover_processes"] == []
    assert outcome["leftover_files"] == []
    assert outcome["canary_intact"]
    assert outcome["secret_intact"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "infinite_loop", "thread_storm", "process_storm", "huge_allocation", "huge_file", "flood_output",
    "exit_zero",
])
def test_misbehaving_tests_earn_no_test_reward(outcome, name):
    report = outcome["reports"][name]
    assert report.build_ok, report.diagnostics
    assert not report.tests_ok
    assert rewards_from_report(report)["test_reward"] == 0.0


@pytest.mark.slow
def test_infinite_loop_times_out(outcome):
    report = outcome["reports"]["infinite_loop"]
    assert "test" in report.timed_out
    assert report.durations["test"] < RUN.wall_seconds + 2


@pytest.mark.slow
def test_exit_zero_is_not_a_pass(outcome):
    report = outcome["reports"]["exit_zero"]
    assert "std::process::exit" in report.source.forbidden
    assert report.own_tests.passed == 0 and not report.tests_ok  # exited 0 before its seal ran


@pytest.mark.slow
def test_flood_output_is_capped(outcome):
    assert len(outcome["reports"]["flood_output"].test_output) <= 20_000


@pytest.mark.slow
@pytest.mark.skipif(not STRONG, reason="needs bwrap or root privilege dropping")
@pytest.mark.parametrize("name", ["network_connect", "read_secret", "delete_canary"])
def test_escapes_fail(outcome, name):
    report = outcome["reports"][name]
    assert report.build_ok, report.diagnostics
    assert report.own_tests.failed == report.own_tests.expected > 0
    assert rewards_from_report(report)["test_reward"] == 0.0


@pytest.mark.slow
@pytest.mark.skipif(not STRONG, reason="needs bwrap or root privilege dropping")
def test_no_connection_reached_the_host(outcome):
    assert outcome["connections"] == 0


@pytest.mark.slow
@pytest.mark.skipif(not STRONG, reason="needs bwrap or root privilege dropping")
def test_include_outside_the_crate_does_not_compile(outcome):
    report = outcome["reports"]["include_outside"]
    assert not report.build_ok
    assert rewards_from_report(report)["build_reward"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["generic_recursion", "const_eval_loop"])
def test_compile_time_blowups_fail_the_build(outcome, name):
    report = outcome["reports"][name]
    assert not report.build_ok
    assert rewards_from_report(report)["build_reward"] == 0.0
    assert report.durations["build"] < COMPILE.wall_seconds + 2


@pytest.mark.slow
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


# ---- infrastructure failures are decided from the sandbox's own signals ------------------------------------

@pytest.mark.slow
def test_fake_sandbox_messages_from_tests_are_test_failures(outcome):
    # Its tests write "bwrap: ..." to stderr, past libtest's capture, then panic or exit(127).
    report = outcome["reports"]["infra_fake_bwrap_message"]
    assert not report.internal_error
    assert report.build_ok, report.diagnostics
    assert not report.tests_ok and report.own_tests.passed == 0
    assert rewards_from_report(report)["test_reward"] == 0.0


SQUARE = """pub fn square(x: i64) -> i64 {
    x * x
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn small() {
        assert_eq!(square(3), 9);
    }
}
"""


def _bwrap_failing_to_mount(folder: Path) -> str:
    """A real bwrap that fails while setting up its mounts (a bind of a missing source)."""
    script = folder / "bwrap"
    script.write_text(f'#!/bin/sh\nexec {ISO.bwrap} --ro-bind /nonexistent-rr-source /mnt "$@"\n')
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("failure", ["bwrap_is_false", "bwrap_cannot_mount", "prlimit_bad_flag"])
def test_sandbox_failure_is_an_internal_error_retried_once_forgotten(monkeypatch, failure):
    if failure == "bwrap_cannot_mount" and not ISO.bwrap:
        pytest.skip("needs bwrap")
    folder = Path(tempfile.mkdtemp(prefix="rr-fake-bwrap-", dir="/var/tmp"))
    folder.chmod(0o755)
    if failure == "prlimit_bad_flag":
        monkeypatch.setattr(sandbox, "_rlimit_prefix", lambda *a, **k: ["prlimit", "--no-such-flag", "--"])
        broken = ISO
    else:
        bwrap = "/bin/false" if failure == "bwrap_is_false" else _bwrap_failing_to_mount(folder)
        broken = sandbox.Isolation(bwrap=bwrap, drop_uid=ISO.drop_uid, unshare_net=None)
    monkeypatch.setattr(sandbox, "detect_isolation", lambda: broken)
    verifier = Verifier(workers=1)
    try:
        report = verifier.verify(SQUARE, raw_code=True)
        assert report.internal_error.startswith("SandboxError"), report.internal_error
        assert all(value is None for value in rewards_from_report(report).values())
        monkeypatch.undo()
        assert verifier.verify(SQUARE, raw_code=True) is report  # one verdict per step for every consumer
        assert verifier.forget_failures() == 1
        again = verifier.verify(SQUARE, raw_code=True)
        assert not again.internal_error and again.tests_ok and again.own_tests.passed == 1
    finally:
        verifier.close()
        shutil.rmtree(folder)


@pytest.fixture
def box():
    """A crate folder the sandbox user may use, with a model-built program and a program of ours in it."""
    root = Path(tempfile.mkdtemp(prefix="rr-box-", dir="/var/tmp"))
    root.chmod(0o755)
    crate, ours = root / "crate", root / "ours"
    (crate / "target").mkdir(parents=True)
    ours.mkdir()
    scripts = {
        crate / "target" / "exit-127": 'echo "bwrap: Can\'t mount proc on /newroot/proc" >&2; exit 127',
        crate / "target" / "kill-wrapper": "read -r _ _ _ wrapper _ < /proc/$PPID/stat; kill -9 $wrapper; sleep 5",
        ours / "kill-wrapper": "read -r _ _ _ wrapper _ < /proc/$PPID/stat; kill -9 $wrapper; sleep 5",
        ours / "fds": "for fd in /proc/self/fd/*; do readlink $fd; done",
    }
    for path, body in scripts.items():
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    (ours / "not-executable").write_text("")
    (ours / "not-executable").chmod(0o644)
    sandbox.prepare_dir(crate, 0)
    yield crate, ours, root / "logs"
    shutil.rmtree(root)


def _run(box, steps, **kw):
    crate, _ours, logs = box
    return sandbox.run_steps(steps, crate=crate, log_dir=logs, limits=RUN, env={"PATH": "/usr/bin:/bin"},
                             writable=False, **kw)


def test_model_program_exit_127_and_fake_message_is_its_own_failure(box):
    results = _run(box, [Step("test", ["target/exit-127"]), Step("hidden:0", ["/bin/true"])])
    assert results["test"].returncode == 127 and "bwrap:" in results["test"].stderr
    assert results["hidden:0"].returncode == 0


def test_steps_that_wait_on_a_group_run_only_while_it_passes(box):
    """``while_ok``: a variant's copy runs only while every hidden test exited 0; ``after`` chains (a mutant's copy
    after the reference's copy) skip what follows a skipped step."""
    hidden_ok = [Step("hidden:0", ["/bin/true"], group="hidden"), Step("hidden:1", ["/bin/true"], group="hidden")]
    hidden_bad = [Step("hidden:0", ["/bin/true"], group="hidden"), Step("hidden:1", ["/bin/false"], group="hidden")]
    copies = [Step("home", ["/bin/true"]),
              Step("ref", ["/bin/true"], after="home", while_ok="hidden"),
              Step("mutant", ["/bin/true"], after="ref", while_ok="hidden"),
              Step("failing-ref", ["/bin/false"], after="home", while_ok="hidden"),
              Step("after-failing-ref", ["/bin/true"], after="failing-ref", while_ok="hidden")]
    ran = _run(box, [*hidden_ok, *copies])
    assert [ran[n].returncode for n in ("ref", "mutant", "failing-ref", "after-failing-ref")] == [
        0, 0, 1, sandbox.SKIPPED]
    ran = _run(box, [*hidden_bad, *copies])
    assert ran["hidden:1"].returncode == 1 and ran["home"].returncode == 0
    assert {ran[n].returncode for n in ("ref", "mutant", "failing-ref", "after-failing-ref")} == {sandbox.SKIPPED}


def test_a_copy_on_the_next_mutant_is_skipped_once_the_test_killed_one(box):
    """``unless_failed``: a failure in time skips the step; a pass, a skip or a time-out does not."""
    steps = [Step("home", ["/bin/true"]),
             Step("m0", ["/bin/true"], after="home"),
             Step("m1", ["/bin/false"], after="home", unless_failed="m0"),
             Step("m2", ["/bin/true"], after="home", unless_failed="m1"),
             Step("m2b", ["/bin/true"], after="home", unless_failed="m2"),  # a skip passes the kill on
             Step("m3", ["/bin/sleep", "5"], after="home", unless_failed="m0"),
             Step("m4", ["/bin/true"], after="home", unless_failed="m3")]
    ran = _run(box, steps)
    assert [ran[n].returncode for n in ("m0", "m1", "m2", "m2b")] == [0, 1, sandbox.SKIPPED, sandbox.SKIPPED]
    assert ran["m3"].timed_out and ran["m4"].returncode == 0  # 1 s + 10 x home's time: sleep 5 runs out


def test_our_program_that_cannot_run_is_a_sandbox_error(box):
    _crate, ours, _logs = box
    for program in (str(ours / "not-executable"), "/nonexistent/rustc", "no-such-rustc"):
        with pytest.raises(SandboxError, match="could not run"):
            _run(box, [Step("build", [program])])


def test_steps_see_only_their_own_output_files(box):
    # Not the status descriptor, nor the other steps' output files.
    _crate, ours, logs = box
    seen = _run(box, [Step("fds", [str(ours / "fds")]), Step("other", ["/bin/true"])])["fds"].stdout
    assert sorted(seen.split()) == ["/dev/null", f"{logs}/fds.stderr", f"{logs}/fds.stdout"]


def test_a_wrapper_script_longer_than_one_argument_may_be_still_runs(box):
    """Hundreds of tests make a wrapper script longer than one argv string may be (128 KiB): it still runs."""
    words = [f"t{i:05d}" + "x" * 60 for i in range(2500)]  # ~170 KB of one step's arguments
    ran = _run(box, [Step("long", ["/bin/echo", *words]), Step("after", ["/bin/true"])])
    assert ran["long"].stdout.split() == words and ran["after"].returncode == 0


def test_sandbox_that_cannot_start_is_an_error_whatever_the_steps(box, monkeypatch):
    broken = sandbox.Isolation(bwrap="/bin/false", drop_uid=ISO.drop_uid, unshare_net=None)
    monkeypatch.setattr(sandbox, "detect_isolation", lambda: broken)
    with pytest.raises(SandboxError, match="failed to start"):
        _run(box, [Step("test", ["target/exit-127"])])


def test_wrapper_killed_by_model_code_fails_that_step_but_by_ours_is_an_error(box, monkeypatch):
    # Without bwrap's pid namespace a step can kill the wrapper (pid 1 inside bwrap cannot be killed).
    _crate, ours, _logs = box
    plain = sandbox.Isolation(bwrap=None, drop_uid=ISO.drop_uid, unshare_net=None)
    monkeypatch.setattr(sandbox, "detect_isolation", lambda: plain)
    results = _run(box, [Step("test", ["target/kill-wrapper"]), Step("hidden:0", ["/bin/true"])])
    assert list(results) == ["test"] and results["test"].returncode != 0 and not results["test"].timed_out
    with pytest.raises(SandboxError, match="stopped before step 'build'"):
        _run(box, [Step("build", [str(ours / "kill-wrapper")])])


@pytest.mark.skipif(ISO.bwrap is None, reason="needs bwrap")
@pytest.mark.parametrize("mode", ["direct", "cargo"])
def test_test_runs_cannot_read_world_readable_files_of_the_host(mode):
    """A dataset file with expected answers, readable by everyone on the host, is absent while tests run:
    a solution cannot look the answers up (only system dirs, std's library and the crate are visible)."""
    folder = Path(tempfile.mkdtemp(prefix="rr-answers-", dir="/var/tmp"))
    folder.chmod(0o755)
    answers = folder / "answers.txt"
    answers.write_text("42\n")
    answers.chmod(0o644)
    code = f"""pub fn answer() -> String {{
    std::fs::read_to_string("{answers}").unwrap_or_else(|e| e.to_string())
}}

#[cfg(test)]
mod tests {{
    use super::*;
    #[test]
    fn looks_up_the_answer() {{
        assert_eq!(answer(), "42\\n");
    }}
}}
"""
    verifier = Verifier(VerifierConfig(mode=mode), workers=1)
    try:
        report = verifier.verify(code, raw_code=True)
    finally:
        verifier.close()
        shutil.rmtree(folder)
    assert report.build_ok and (report.own_tests.passed, report.own_tests.failed) == (0, 1), report.test_output
    assert "No such file or directory" in report.test_output
