"""How many CPUs this process may really use: its CPU affinity, capped by its cgroup's CPU quota.

``os.cpu_count()`` counts the machine's CPUs; a container or batch job usually gets fewer, through an affinity
mask (cpuset) or a CFS quota (cgroup v2 ``cpu.max``, cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")


def usable_cpus(cgroup_root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> int:
    """min(CPUs in this process's affinity mask, ceil(cgroup CPU quota)), at least 1."""
    count = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_quota(cgroup_root, self_cgroup)
    if quota is not None:
        count = min(count, math.ceil(quota))
    return max(1, count)


def cgroup_cpu_quota(cgroup_root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> float | None:
    """The tightest CPU quota, in CPUs, over the cgroup root and this process's cgroup and its ancestors
    (v2 and v1 alike); ``None`` when unlimited or unknown."""
    v2_path, v1_path = _own_cgroups(self_cgroup)
    quotas = [_v2_quota(d / "cpu.max") for d in _ancestors(cgroup_root, v2_path)]
    quotas += [_v1_quota(d) for d in _ancestors(cgroup_root / "cpu", v1_path)]
    found = [q for q in quotas if q is not None]
    return min(found) if found else None


def _own_cgroups(self_cgroup: Path) -> tuple[str, str]:
    """This process's cgroup v2 path and cgroup v1 ``cpu`` path ("/" when not listed)."""
    v2 = v1 = "/"
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return v2, v1
    for line in lines:
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if not controllers:
            v2 = path or "/"
        elif "cpu" in controllers.split(","):
            v1 = path or "/"
    return v2, v1


def _ancestors(base: Path, cgroup: str) -> list[Path]:
    """``base`` and every folder down to ``base/cgroup`` (a cgroup's quota is bounded by its ancestors')."""
    folders = [base]
    for part in Path(cgroup).parts[1:]:
        folders.append(folders[-1] / part)
    return folders


def _v2_quota(cpu_max: Path) -> float | None:
    try:
        quota, period = cpu_max.read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def _v1_quota(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period


def cpu_share() -> int:
    """This process's share of the usable CPUs when ``LOCAL_WORLD_SIZE`` processes (set by ``torchrun`` and
    ``accelerate launch``) run on this machine; at least 1."""
    return max(1, usable_cpus() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))


BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""CPU flags (``/proc/cpuinfo``) of native bfloat16 arithmetic; without one, PyTorch emulates bf16 and a
backward pass on CPU runs many times slower than in fp32."""


def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this x86 CPU computes bf16 natively (``avx512_bf16`` or ``amx_bf16`` among its flags)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return bool(set(line.split(":", 1)[-1].split()) & set(BF16_FLAGS))
    return False


_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
"""glibc ``mallopt`` parameters (``malloc.h``)."""


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory for reuse instead of handing it back to the kernel at once.

    CPU generation allocates and frees the same large tensors every token; by default glibc serves big blocks with
    fresh ``mmap`` calls and returns them on ``free``, so every token pays page faults and zeroing again. This
    turns per-allocation ``mmap`` off and raises the trim threshold to 2 GiB, for this process only (the same as
    ``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647``). Results do not change; resident memory stays at its
    peak. False where the C library is not glibc (nothing is changed).
    """
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


def contiguous_lm_head(model) -> bool:
    """Hand ``model``'s output layer (its ``get_output_embeddings()``) a contiguous input: for bf16 on CPU.

    Generation keeps the logits of the last position only (``hidden[:, -1:, :]``), a strided view. torch's bf16
    ``linear`` on CPU takes a slow path for such an input: the 1.5B model's 151,936 x 1,536 head on the last position
    of 8 prompts took 8.5 s strided, 0.027 s contiguous (``benchmarks/lm_head_input.py``, 2-core Intel Xeon with AMX,
    torch 2.13). The copy is a few KB. The logits may differ in the last bits (another kernel), so fp32 runs, where
    the gain is 2-3x on a small share of a step, are left as they are. False when there is no output layer to hook.
    """
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None:
        return False
    head.register_forward_pre_hook(lambda _module, args: (args[0].contiguous(), *args[1:]) if args else None)
    return True
