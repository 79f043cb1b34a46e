"""The output layer's input on CPU: a strided view (what generation and training hand it) against a contiguous copy
(``rust_rewards.cpus.contiguous_lm_head``), side by side.

    .venv/bin/python benchmarks/lm_head_input.py [--batch 8] [--positions 389] [--repeats 3]

For the heads of Qwen2.5-Coder-1.5B (151,936 x 1,536) and SmolLM2-135M (49,152 x 576), in fp32 and (where the CPU
has native bf16) bf16: the last position of ``batch`` prompts of ``positions`` tokens (generation's first step) and
the last 17 (a 16-token completion's log-probabilities in training). Prints the median time of each, the ratio, and
whether the logits are equal (bit for bit: another kernel may round differently).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADS = {"Qwen2.5-Coder-1.5B": (151_936, 1_536), "SmolLM2-135M": (49_152, 576)}


def median_seconds(fn, repeats: int) -> float:
    fn()  # the first call of a shape builds its kernel
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--positions", type=int, default=389)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    import torch

    from rust_rewards.cpus import cpu_has_native_bf16

    dtypes = [torch.float32] + ([torch.bfloat16] if cpu_has_native_bf16() else [])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch {args.batch}, "
          f"{args.positions} positions, medians of {args.repeats}")
    with torch.no_grad():
        for name, (vocab, hidden) in HEADS.items():
            for dtype in dtypes:
                weight = torch.randn(vocab, hidden).to(dtype)
                states = torch.randn(args.batch, args.positions, hidden).to(dtype)
                for label, keep in (("last position", 1), ("last 17", 17)):
                    view = states[:, -keep:, :]
                    strided = median_seconds(lambda v=view, w=weight: torch.nn.functional.linear(v, w), args.repeats)
                    copied = median_seconds(lambda v=view, w=weight: torch.nn.functional.linear(v.contiguous(), w),
                                            args.repeats)
                    same = torch.equal(torch.nn.functional.linear(view, weight),
                                       torch.nn.functional.linear(view.contiguous(), weight))
                    print(f"{name:>19} {str(dtype).removeprefix('torch.'):>8} {label:>13}: strided {strided:8.4f} s"
                          f"  contiguous {copied:8.4f} s  x{strided / copied:7.1f}  equal logits: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
