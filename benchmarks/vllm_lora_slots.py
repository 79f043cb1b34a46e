"""What serving a LoRA adapter costs vLLM (its CPU build above all): the same prompts sampled from the base alone
and with a rank-``--rank`` adapter on every linear layer, served in LoRA slots (``max_lora_rank``) of each
``--slots`` size. One process per setting (one engine each), ``--calls`` calls each with a new adapter id (as GRPO
serves the policy each step), fixed lengths (``ignore_eos``). Needs vLLM (``bash scripts/vllm-cpu-env.sh``):

    .venv-vllm/bin/python benchmarks/vllm_lora_slots.py [--slots 64,16] [--rank 16] [--calls 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def one(slot: int, rank: int, calls: int, prompts: int, tokens: int) -> None:
    """Sample in this process: ``slot`` 0 is the base alone."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from vllm import LLM, SamplingParams, TokensPrompt
    from vllm.lora.request import LoRARequest

    from rust_rewards.models.gguf import resolve_model
    from rust_rewards.sampling.vllm_engine import MAX_MODEL_LEN, cpu_defaults

    base = resolve_model("smollm2-135m")
    folder = Path(tempfile.mkdtemp(prefix="rr-lora-slots-"))
    if slot:
        torch.manual_seed(0)
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
                               LoraConfig(r=rank, lora_alpha=2 * rank, target_modules="all-linear"))
        with torch.no_grad():
            for name, weight in model.named_parameters():
                if "lora_B" in name:
                    weight.normal_(0.0, 0.02)
        model.save_pretrained(folder)
    lora = {"enable_lora": True, "max_lora_rank": slot, "max_loras": 1} if slot else {}
    llm = LLM(model=str(base), dtype="float32", seed=0, enforce_eager=True, max_model_len=MAX_MODEL_LEN, **lora,
              **cpu_defaults())
    asks = [TokensPrompt(prompt_token_ids=list(range(100 + i, 160 + i))) for i in range(prompts)]
    sampling = SamplingParams(temperature=0.7, max_tokens=tokens, ignore_eos=True, detokenize=False)
    seconds = []
    for call in range(calls):
        request = LoRARequest(f"policy-{call}", call + 1, str(folder)) if slot else None
        start = time.perf_counter()
        llm.generate(asks, sampling, lora_request=request, use_tqdm=False)
        seconds.append(time.perf_counter() - start)
    name = f"rank {rank} in a {slot} slot" if slot else "base alone"
    print(f"{name:>22}: {', '.join(f'{s:.1f}' for s in seconds)} s per call; "
          f"{prompts * tokens / min(seconds):.0f} tokens/s at best", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", default="64,16", help="LoRA slot sizes to compare (vLLM's max_lora_rank values)")
    parser.add_argument("--rank", type=int, default=16, help="the adapter's rank")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # a setting, in its own process
    args = parser.parse_args()
    if args.one is not None:
        one(args.one, args.rank, args.calls, args.prompts, args.tokens)
        return 0
    try:
        slots = [int(s) for s in args.slots.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--slots: comma-separated integers, got {args.slots!r}")
    if any(s < args.rank for s in slots):
        parser.error(f"--slots: each slot must hold the adapter's rank {args.rank}")
    print(f"{args.prompts} prompts x {args.tokens} tokens, {args.calls} calls per setting", flush=True)
    for slot in (0, *slots):
        done = subprocess.run([sys.executable, __file__, "--one", str(slot), "--rank", str(args.rank), "--calls",
                               str(args.calls), "--prompts", str(args.prompts), "--tokens", str(args.tokens)])
        if done.returncode:
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
