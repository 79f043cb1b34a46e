"""Where CPU generation time goes, and which cheap settings cut it: SmolLM2-135M sampling side by side.

    .venv/bin/python benchmarks/cpu_generation.py [--model smollm2-135m] [--sequences 8] [--tokens 128] [--repeats 3]

Each setting runs in its own fresh process (malloc settings apply per process), settings interleaved per repeat,
the same prompt and seed; prints the median generate time of each setting, its ratio to the baseline, and whether
it sampled the same tokens as the baseline (a setting that changes results is reported as such). Settings:
``fp32`` (baseline: torch's default threads), ``fp32 + malloc`` (glibc keeps freed memory instead of returning it
to the system: ``rust_rewards.cpus.keep_freed_memory``), ``fp32, 1 thread``, and ``bf16`` where the CPU
has native bf16 (``avx512_bf16`` or AMX).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SETTINGS = ("fp32", "fp32 + malloc", "fp32, 1 thread", "bf16")


def worker(setting: str, model: str, sequences: int, tokens: int) -> dict:
    """Load the model, sample once to warm up, then time one generate call; return its time and tokens."""
    if setting == "fp32 + malloc":
        from rust_rewards.cpus import keep_freed_memory

        assert keep_freed_memory(), "not glibc: nothing to compare"
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rust_rewards.data.bundled import EASY_TASKS
    from rust_rewards.data.importers import load_tasks
    from rust_rewards.models.gguf import resolve_model
    from rust_rewards.prompts import chat_messages

    if setting == "fp32, 1 thread":
        torch.set_num_threads(1)
    folder = resolve_model(model)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    dtype = torch.bfloat16 if setting == "bf16" else torch.float32
    net = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
    task = load_tasks(str(EASY_TASKS))[0]
    text = tokenizer.apply_chat_template(chat_messages(task.prompt), tokenize=False, add_generation_prompt=True)
    batch = tokenizer([text] * sequences, return_tensors="pt")

    def sample() -> tuple[float, list[list[int]]]:
        torch.manual_seed(0)
        start = time.perf_counter()
        with torch.inference_mode():
            out = net.generate(**batch, do_sample=True, temperature=1.0, top_p=1.0, max_new_tokens=tokens,
                               min_new_tokens=tokens, pad_token_id=tokenizer.pad_token_id)
        return time.perf_counter() - start, out[:, batch["input_ids"].shape[1]:].tolist()

    sample()
    seconds, ids = sample()
    return {"seconds": seconds, "ids": ids, "threads": torch.get_num_threads()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.model, args.sequences, args.tokens)))
        return 0
    from rust_rewards.models.source import check_model_source

    try:
        check_model_source(args.model)
    except ValueError as err:
        parser.exit(2, f"{err}\n")
    from rust_rewards.cpus import cpu_has_native_bf16

    settings = [s for s in SETTINGS if s != "bf16" or cpu_has_native_bf16()]
    results: dict[str, list[dict]] = {s: [] for s in settings}
    for repeat in range(args.repeats):
        for setting in settings if repeat % 2 == 0 else settings[::-1]:
            done = subprocess.run([sys.executable, __file__, "--worker", setting, "--model", args.model,
                                   "--sequences", str(args.sequences), "--tokens", str(args.tokens)],
                                  capture_output=True, text=True, check=True)
            results[setting].append(json.loads(done.stdout.strip().splitlines()[-1]))
    base = statistics.median(r["seconds"] for r in results["fp32"])
    print(f"{args.model}: {args.sequences} sequences x {args.tokens} new tokens, medians of {args.repeats} "
          f"(each setting a fresh process, interleaved)")
    for setting, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        same = all(r["ids"] == results["fp32"][0]["ids"] for r in runs)
        print(f"{setting:>15}: {seconds:6.2f} s  x{seconds / base:.2f} of fp32  threads {runs[0]['threads']}  "
              f"same tokens as fp32: {same}  (runs {[round(r['seconds'], 2) for r in runs]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
