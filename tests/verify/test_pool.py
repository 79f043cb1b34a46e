"""Worker pools of any size: usable CPUs from affinity and cgroup quotas, one sandbox uid per slot; malloc settings."""

import os
import shutil
import subprocess
import sys
import tempfile
from math import ceil
from pathlib import Path

import pytest
from conftest import ROOT

from rust_rewards.cpus import usable_cpus
from rust_rewards.verify import sandbox
from rust_rewards.verify.sandbox import RUN_LIMITS, UID_BASE, UID_BLOCK, Step, UidBlocks, detect_isolation, slot_uid
from rust_rewards.verify.verifier import Verifier

AFFINITY = len(os.sched_getaffinity(0))
DROP_UID = detect_isolation().drop_uid


def _cgroup(tmp_path: Path, files: dict[str, str], own: str = "0::/\n") -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    root.mkdir(exist_ok=True)
    self_cgroup = tmp_path / "self_cgroup"
    self_cgroup.write_text(own)
    return root, self_cgroup


@pytest.mark.parametrize(("files", "own", "quota"), [
    ({}, "0::/\n", None),
    ({"cpu.max": "max 100000\n"}, "0::/\n", None),
    ({"cpu.max": "150000 100000\n"}, "0::/\n", 1.5),
    ({"cpu.max": "50000 100000\n"}, "0::/\n", 0.5),
    ({"cpu.max": "max 100000\n", "job/cpu.max": "max 100000\n", "job/step/cpu.max": "100000 100000\n"},
     "0::/job/step\n", 1),
    ({"cpu.max": "garbage\n"}, "0::/\n", None),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, "1:cpu,cpuacct:/\n", None),
    ({"cpu/cpu.cfs_quota_us": "250000\n", "cpu/cpu.cfs_period_us": "100000\n"}, "1:cpu,cpuacct:/\n", 2.5),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n",
      "cpu/docker/abc/cpu.cfs_quota_us": "100000\n", "cpu/docker/abc/cpu.cfs_period_us": "100000\n"},
     "2:cpuacct,cpu:/docker/abc\n1:memory:/other\n0::/\n", 1),
], ids=["none", "v2-max", "v2-1.5", "v2-0.5", "v2-nested", "v2-garbage", "v1-unlimited", "v1-2.5", "v1-nested"])
def test_usable_cpus_caps_affinity_by_cgroup_quota(tmp_path, files, own, quota):
    root, self_cgroup = _cgroup(tmp_path, files, own)
    expected = AFFINITY if quota is None else min(AFFINITY, ceil(quota))
    assert usable_cpus(root, self_cgroup) == expected >= 1


def test_usable_cpus_follows_affinity(tmp_path):
    root, self_cgroup = _cgroup(tmp_path, {"cpu.max": "max 100000\n"})
    cpu = min(os.sched_getaffinity(0))
    code = (f"import os; os.sched_setaffinity(0, {{{cpu}}}); from pathlib import Path; "
            f"from rust_rewards.cpus import usable_cpus; print(usable_cpus(Path({str(root)!r}), "
            f"Path({str(self_cgroup)!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "1"


def test_default_pool_size_is_usable_cpus():
    verifier = Verifier()
    assert verifier.workers == usable_cpus()
    verifier.close()


def test_uid_blocks_are_claimed_as_slots_need_them_and_never_shared(tmp_path):
    first, second = UidBlocks(tmp_path, blocks=3), UidBlocks(tmp_path, blocks=3)
    mine = [first.uid(slot) for slot in range(2 * UID_BLOCK)]
    assert len(set(mine)) == 2 * UID_BLOCK and min(mine) >= UID_BASE
    theirs = second.uid(0)
    assert theirs not in mine
    with pytest.raises(RuntimeError, match=str(tmp_path)):
        second.uid(UID_BLOCK)


@pytest.mark.skipif(not DROP_UID, reason="uids are only dropped when running as root")
def test_every_slot_of_a_big_pool_has_its_own_uid():
    uids = [slot_uid(slot) for slot in range(200)]
    assert len(set(uids)) == 200 and min(uids) >= UID_BASE


@pytest.mark.skipif(not DROP_UID, reason="uids are only dropped when running as root")
def test_slot_beyond_the_first_block_runs_as_its_uid():
    crate = Path(tempfile.mkdtemp(prefix="rr-slot-", dir="/var/tmp"))
    try:
        crate.chmod(0o755)
        sandbox.prepare_dir(crate, 199)
        result = sandbox.run_steps([Step("id", ["id", "-u"])], crate=crate, log_dir=crate / "logs",
                                   limits=RUN_LIMITS, env={"PATH": "/usr/bin:/bin"}, slot=199)
        assert result["id"].stdout.strip() == str(slot_uid(199))
    finally:
        shutil.rmtree(crate)


SOLUTION = "pub fn double(x: i32) -> i32 {\n    x * 2\n}\n"


def _tests(expected: int) -> str:
    return f"#[cfg(test)]\nmod tests {{\n    use super::*;\n    #[test]\n    fn two() {{\n" \
           f"        assert_eq!(double(2), {expected});\n    }}\n}}\n"


def test_a_pool_of_200_workers_verifies_on_its_high_slots():
    # Slots are popped from the end of the slot list: these jobs run on slots 199, 198, ...
    verifier = Verifier(workers=200)
    codes = {
        "passes": SOLUTION + _tests(4),
        "fails": SOLUTION + _tests(5),
        "type_error": "pub fn double(x: i32) -> i32 {\n    \"x\"\n}\n",
        "clippy": "pub fn double(x: i32) -> i32 {\n    return x * 2;\n}\n" + _tests(4),
    }
    try:
        reports = dict(zip(codes, verifier.verify_many(list(codes.values()), raw_code=True), strict=True))
    finally:
        verifier.close()
    for name, report in reports.items():
        assert not report.internal_error, (name, report.internal_error)
    assert reports["passes"].tests_ok and reports["passes"].clippy_ok
    assert reports["fails"].build_ok and not reports["fails"].tests_ok and reports["fails"].own_tests.failed == 1
    assert not reports["type_error"].build_ok and "E0308" in reports["type_error"].error_codes
    assert reports["clippy"].tests_ok and not reports["clippy"].clippy_ok
    assert "needless_return" in reports["clippy"].clippy_warnings


RSS_AFTER_FREE = """
import sys
from rust_rewards.cpus import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
block = bytearray(256 << 20)
block[::4096] = b"x" * len(block[::4096])
del block
rss = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
print(rss // 1024)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_keep_freed_memory_keeps_a_freed_block_for_reuse():
    def rss_mib(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", RSS_AFTER_FREE, mode], capture_output=True, text=True,
                             check=True)
        return int(out.stdout)

    # glibc by default serves a 256 MiB block by mmap and unmaps it on free; kept, it stays resident for reuse
    assert rss_mib("default") < 200 <= rss_mib("keep")


def test_contiguous_lm_head_hands_the_head_a_copy_and_keeps_the_logits():
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rust_rewards.cpus import contiguous_lm_head

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=128)).eval()
    ids = torch.randint(0, 128, (3, 7))
    with torch.no_grad():
        before = model(ids, logits_to_keep=1).logits
    seen = []
    assert contiguous_lm_head(model)
    model.lm_head.register_forward_pre_hook(lambda _m, args: seen.append(args[0].is_contiguous()))
    with torch.no_grad():
        after = model(ids, logits_to_keep=1).logits
    assert seen == [True] and torch.allclose(before, after)
    assert not contiguous_lm_head(torch.nn.Linear(2, 2))  # no output layer: nothing hooked
