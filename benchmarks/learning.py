"""Does training with our rewards make a model better? Base, SFT and SFT+GRPO on held-out tasks, measured with our
own tools.

    .venv/bin/python benchmarks/learning.py [--preset tiny|smollm2-cpu] [--task-file FILE] [--sft-steps 0]
        [--steps 100] [--dpo-steps 0] [--eval-n 8] [--tasks 0] [--splits train,held-out] [--max-new-tokens 128]
        [--answer-format solution] [--external FILE --external-tasks 40 --external-n 2] [--batch-size 64]
        [--skip-base] [--out outputs/learning]

1. Split the task files (default: the bundled tasks for `tiny`, the easy tier for `smollm2-cpu`; several, such as
   the easy and medium tiers, are pooled and reported tier by tier too) into a training
   split and a held-out split by a hash of seed and task id; the tiny preset builds (or reuses) its warm-started
   model first.
2. Sample ``--eval-n`` completions per task with ``inference.py`` (the training temperature, fixed seed, the
   preset's answer format, ``--batch-size`` sequences decoded together) on ``--tasks`` tasks (0: all) of each split
   in ``--splits``, and on the first ``--external-tasks`` tasks of ``--external`` (an external evaluation-only set
   such as HumanEval-Rust, ``--external-n`` samples each), and score them with ``eval.py``: the ``base`` model
   (``--skip-base``: not evaluated; the first stage is compared with nothing).
3. With ``--sft-steps N``: ``train.py --stage sft`` on the training split's verified references, then sample and
   score its adapter (``sft``).
4. ``train.py`` (GRPO, the preset's settings) for ``--steps`` steps on the training split (``--grpo-tiers``: only
   its tasks of those tiers), from the SFT adapter if there is one (``--init-adapter``); its reward curve lands in
   ``OUT/grpo/metrics.jsonl`` (``marimo run viz.py -- --run OUT/grpo``). Sample and score it (``grpo``). With
   ``--grpo-name NAME`` the stage is ``OUT/NAME`` and labelled NAME: several GRPO configurations share one ``OUT``,
   its SFT adapter and its SFT samples (``train.py --resume auto`` and ``inference.py`` resume what is there), and
   a filter's counts of another configuration with the same setup are copied in (``train.py`` reuses them only
   when its filter's setup matches).
5. With ``--dpo-steps N``, the offline baseline from the same starting point: sample ``--dpo-n`` answers per training
   task with the SFT adapter (or the base), rank them with cargo into preference pairs
   (``python -m rust_rewards.data.dpo_pairs``), ``train.py --stage dpo`` for N steps, sample and score (``dpo``).
6. Print per split and metric (build, clippy, own tests, hidden pass@1) each model's rate with a 95% Wilson
   interval over completions, the paired difference of each stage over its starting point (SFT over base, GRPO and
   DPO over SFT; mean of per-task differences with a 95% bootstrap interval over tasks; tasks better / same /
   worse), the smallest gain over each stage's start the design could detect (80% power, from the start's per-task
   rates: ``rust_rewards.eval.metrics.detectable_gain``), why GRPO had or lacked signal (groups whose rewards were
   all equal, clipped completions, reward spread, each reward, KL when ``--beta`` > 0), where the signal was per
   step (each tier's groups whose answers pass different numbers of hidden tests, and those with a full pass beside
   a failure; training tasks that no filter sample passed and a rollout later did), and the wall time of every step.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rust_rewards.data.bundled import BUNDLED_TASKS, EASY_TASKS  # noqa: E402
from rust_rewards.data.importers import load_tasks  # noqa: E402
from rust_rewards.eval.metrics import (  # noqa: E402
    detectable_gain,
    paired_difference,
    pass_at_k,
    wilson_interval,
)
from rust_rewards.layout import PASS_RATE_SAMPLES_FILE, PASS_RATES_FILE  # noqa: E402
from rust_rewards.models.source import check_model_source  # noqa: E402
from rust_rewards.prompts import ANSWER_FORMATS, asks_for_tests  # noqa: E402
from rust_rewards.rewards.recipes import resolve_weights  # noqa: E402
from rust_rewards.runs.records import load_completions  # noqa: E402
from rust_rewards.train.config import PASS_RATE_KEEP, preset_params  # noqa: E402
from rust_rewards.train.hints import hint_summary  # noqa: E402
from rust_rewards.train.pass_rates import PassRates  # noqa: E402

METRICS = {"build": "build_ok", "clippy": "clippy_ok", "own tests": "tests_ok", "hidden pass@1": "hidden_ok"}
OWN_TESTS = "own tests"
"""Left out for answers without a test module (``--answer-format solution``)."""
PRESETS = {"tiny": BUNDLED_TASKS, "smollm2-cpu": EASY_TASKS}
"""The presets this protocol runs, with their default task file."""
SPLITS = ("train", "held-out")


def split(task_files: list[Path], seed: int, held_out: float = 0.3) -> dict[str, list[dict]]:
    """Task rows of every file by split; a task's split depends only on the seed and its id."""
    out: dict[str, list[dict]] = {name: [] for name in SPLITS}
    for task in (t for f in task_files for t in load_tasks(str(f))):
        digest = hashlib.sha256(f"{seed}:{task.task_id}".encode()).digest()
        out["held-out" if digest[0] < held_out * 256 else "train"].append(task.to_row())
    return out


def write_jsonl(rows: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(*args: str, check: bool = True) -> float:
    """Run one of the notebooks as a script; return its wall time (``check``: a failure raises)."""
    start = time.monotonic()
    subprocess.run([sys.executable, *args], cwd=ROOT, check=check, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def paired(before: pd.Series, after: pd.Series, seed: int) -> tuple[float, float, float, str]:
    """Mean per-task difference, its 95% bootstrap interval over tasks, and better/same/worse counts."""
    diff = (after - before).to_numpy()
    mean, low, high = paired_difference(before.to_numpy(), after.to_numpy(), seed)
    counts = f"{(diff > 0).sum()}/{(diff == 0).sum()}/{(diff < 0).sum()}"
    return mean, low, high, counts


def report(results: pd.DataFrame, models: list[str], label: str, seed: int, metrics: dict[str, str]) -> list[str]:
    """A markdown table: each model's rate per metric, then each stage's paired difference over its start, then the
    smallest hidden pass@1 gain each comparison could detect."""
    steps = [(a, b) for a, b in (("base", "sft"),) if a in models and b in models]
    start = "sft" if "sft" in models else "base"
    steps += [(start, m) for m in models if m not in ("base", "sft") and start in models]
    n = int(results.groupby(["model", "task_id"]).size().max())
    lines = [f"\n{label}: {results['task_id'].nunique()} tasks x {n} samples per model",
             "| metric | " + " | ".join(models) + " | "
             + " | ".join(f"{b} - {a} over tasks [95% CI], tasks +/=/-" for a, b in steps) + " |",
             "|---" * (1 + len(models) + len(steps)) + "|"]
    per_task_hidden = None
    for name, column in metrics.items():
        rows = results[results[column].notna()]
        if rows.empty:
            continue
        cells = []
        for model in models:
            ok = rows[rows["model"] == model][column].astype(bool)
            low, high = wilson_interval(int(ok.sum()), len(ok))
            cells.append(f"{int(ok.sum())}/{len(ok)} = {ok.mean():.1%} [{low:.1%}, {high:.1%}]")
        per_task = rows.assign(ok=rows[column].astype(float)).pivot_table(index="task_id", columns="model",
                                                                          values="ok", aggfunc="mean")
        for a, b in steps:
            mean, low, high, counts = paired(per_task[a], per_task[b], seed)
            cells.append(f"{mean:+.1%} [{low:+.1%}, {high:+.1%}], {counts}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
        if column == "hidden_ok":
            per_task_hidden = per_task
    if per_task_hidden is not None:
        for a, b in steps:
            gain = detectable_gain(per_task_hidden[a].to_numpy(), n, seed=seed)
            lines.append(f"power: {b} over {a}, {len(per_task_hidden)} tasks x {n} samples, detects a hidden pass@1 "
                         f"gain of {'more than +50 points' if gain is None else f'+{gain:.0%}'} 80% of the time "
                         f"(from {a}'s per-task rates, the gain spread evenly over tasks)")
    return lines


def pass_at_k_lines(results: pd.DataFrame, models: list[str], k: int, seed: int) -> list[str]:
    """Hidden pass@k per model (the unbiased estimate per task, averaged over tasks) and each stage's paired
    difference over its start, when every task has at least ``k`` samples."""
    rows = results[results["hidden_ok"].notna()]
    counts = rows.groupby(["model", "task_id"])["hidden_ok"].agg(["size", lambda v: int(v.astype(bool).sum())])
    counts.columns = ["n", "c"]
    if rows.empty or counts["n"].min() < k:
        return []
    per_task = counts.apply(lambda r: pass_at_k(int(r["n"]), int(r["c"]), k), axis=1).unstack("model")
    start = "sft" if "sft" in models else "base"
    steps = [(a, b) for a, b in (("base", "sft"), *((start, m) for m in models if m not in ("base", "sft")))
             if a in models and b in models and a != b]
    cells = [f"{per_task[m].mean():.1%}" for m in models]
    for a, b in steps:
        mean, low, high, tally = paired(per_task[a], per_task[b], seed)
        cells.append(f"{mean:+.1%} [{low:+.1%}, {high:+.1%}], {tally}")
    return [f"| hidden pass@{k} | " + " | ".join(cells) + " |"]


def grpo_signal(metrics_file: Path, window: int = 10) -> list[str]:
    """The reward curve and why GRPO had (or lacked) a learning signal, from the run's ``metrics.jsonl``."""
    rows = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    rows = [r for r in rows if r.get("reward") is not None]
    if not rows:
        return [f"no GRPO step logged in {metrics_file}"]

    def mean(key: str, part: list[dict]) -> float:
        values = [r[key] for r in part if r.get(key) is not None]
        return float(np.mean(values)) if values else float("nan")

    window = max(1, min(window, len(rows) // 2 or 1))
    first, last = rows[:window], rows[-window:]
    lines = [f"GRPO: {len(rows)} steps; mean over the first {window} steps -> the last {window} (rewards "
             "unweighted):"]
    rewards = sorted({k.split("/")[1] for r in rows for k in r if k.startswith("rewards/") and k.endswith("/mean")})
    for label, key in (("reward (weighted total)", "reward"), ("reward std within groups", "reward_std"),
                       ("hint fraction (--hints)", "hint_fraction"),
                       ("groups with reward spread", "groups_with_spread"),
                       ("groups with all-equal rewards (zero advantage)", "frac_reward_zero_std"),
                       ("completions cut at the length limit", "completions/clipped_ratio"),
                       ("completion length (tokens)", "completions/mean_length"),
                       *((name, f"rewards/{name}/mean") for name in rewards),
                       ("kl", "kl"), ("entropy", "entropy"),
                       ("seconds per step", "step_time"), ("reward_share", "reward_share")):
        if any(r.get(key) is not None for r in rows):
            lines.append(f"  {label}: {mean(key, first):.3f} -> {mean(key, last):.3f}")
    lines.append(f"  per-step values: {metrics_file}")
    return lines


def hidden_signal(run_dir: Path, tiers: dict[str, str], rates: PassRates | None) -> list[str]:
    """Where GRPO's correctness signal was, from the run's rollouts (``completions/``): per tier and step, the groups
    whose answers pass different numbers of hidden tests (the hidden reward's spread) and, of them, those with a full
    pass beside a failure (the only groups whose advantage says "right" over "wrong"), and the training tasks that no
    sample of the pass-rate filter passed (the start policy) and a rollout did."""
    rollouts = load_completions(run_dir)
    if rollouts.empty:
        return [f"no rollouts written in {run_dir / 'completions'}"]
    rollouts = rollouts.assign(tier=rollouts["task_id"].map(tiers).fillna("?"),
                               passed=rollouts["hidden_ok"].fillna(False).astype(bool),
                               tests=rollouts.get("hidden_passed", pd.Series(0, index=rollouts.index)).fillna(0))
    lines = ["hidden-test signal in GRPO's groups, per step (groups whose answers pass different numbers of hidden "
             "tests, the hidden reward's spread; of them, groups with a full pass and a failure / groups):"]
    for tier, part in rollouts.groupby("tier"):
        groups = part.groupby(["step", "task_id"]).agg(any=("passed", "any"), all=("passed", "all"),
                                                       low=("tests", "min"), high=("tests", "max"))
        groups = groups.assign(full=groups["any"] & ~groups["all"], partial=groups["high"] > groups["low"])
        steps = groups.groupby("step").agg(partial=("partial", "sum"), full=("full", "sum"), size=("full", "size"))
        per_step = " ".join(f"{int(r['partial'])},{int(r['full'])}/{int(r['size'])}" for _, r in steps.iterrows())
        total = int(steps["size"].sum())
        lines.append(f"  {tier} tier: {int(steps['partial'].sum())} of {total} groups with hidden-reward spread, "
                     f"{int(steps['full'].sum())} with a full pass and a failure; by step {per_step}")
        passing = set(part.loc[part["passed"], "task_id"])
        seen = set(part["task_id"])
        if rates is not None:
            never = {t for t in seen if rates.passed.get(t) == 0}
            lines.append(f"  {tier} tier: {len(seen)} tasks in rollouts, {len(passing)} with a hidden pass; "
                         f"{len(never)} never passed in the filter's {rates.k} samples, of them {len(never & passing)} "
                         "passed in a rollout")
        else:
            lines.append(f"  {tier} tier: {len(seen)} tasks in rollouts, {len(passing)} with a hidden pass")
    return lines


def copy_filter(out: Path, name: str) -> None:
    """Copy the pass-rate filter's counts and samples of another GRPO configuration in ``out`` into ``out/name``
    when it has none: ``train.py`` reuses them only when the filter's setup (start policy, sampling, rewards, data)
    is the same, and samples anew otherwise."""
    target = out / name
    if (target / PASS_RATES_FILE).exists():
        return
    for other in sorted(out.glob(f"*/{PASS_RATES_FILE}")):
        if other.parent != target:
            target.mkdir(parents=True, exist_ok=True)
            for file in (PASS_RATES_FILE, PASS_RATE_SAMPLES_FILE):
                if (other.parent / file).is_file():
                    shutil.copy2(other.parent / file, target / file)
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=tuple(PRESETS), default="tiny")
    parser.add_argument("--task-file", default="", help="tasks to split, comma-separated files (default: the preset's "
                        "task set); a mix is also reported tier by tier")
    parser.add_argument("--sft-steps", type=int, default=0, help="supervised steps before GRPO (0: no SFT stage)")
    parser.add_argument("--sft-adapter", default="", help="an SFT adapter trained before (such as another run's "
                        "OUT/sft/adapter): evaluated as the sft stage and GRPO's start instead of training one")
    parser.add_argument("--steps", type=int, default=100, help="GRPO steps")
    parser.add_argument("--grpo-tiers", default="", help="GRPO trains on the training split's tasks of these tiers "
                        "only, comma-separated difficulty values such as 'loop' (default: all of them; SFT always "
                        "has all)")
    parser.add_argument("--grpo-name", default="grpo", help="the GRPO stage's folder in --out and its label: "
                        "configurations with their own name share --out's SFT stage and samples")
    parser.add_argument("--dpo-steps", type=int, default=0, help="DPO steps on cargo-ranked pairs (0: no DPO)")
    parser.add_argument("--eval-n", type=int, default=8, help="samples per task in every evaluation")
    parser.add_argument("--dpo-n", type=int, default=4, help="samples per training task ranked into DPO pairs")
    parser.add_argument("--tasks", type=int, default=0, help="tasks evaluated per split (0: all)")
    parser.add_argument("--splits", default=",".join(SPLITS), help="splits to evaluate, comma-separated")
    parser.add_argument("--external", default="", help="an evaluation-only task file (e.g. "
                        "../shared/benchmarks/multiple_humaneval_rs.jsonl), reported as its own row")
    parser.add_argument("--external-tasks", type=int, default=40, help="its first N tasks (0: all)")
    parser.add_argument("--external-n", type=int, default=2, help="samples per external task")
    parser.add_argument("--batch-size", type=int, default=64, help="sequences decoded together in evaluation")
    parser.add_argument("--skip-base", action="store_true", help="do not evaluate the base model")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=128, help="sampling and GRPO completion length")
    parser.add_argument("--answer-format", choices=ANSWER_FORMATS, default="",
                        help="what prompts ask for (default: the preset's)")
    parser.add_argument("--pass-k", type=int, default=8, help="also report hidden pass@k (needs --eval-n >= k)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="", help="base model (default: the preset's)")
    parser.add_argument("--out", default="outputs/learning")
    parser.add_argument("--train-args", default="", help="extra train.py flags for GRPO, e.g. '--lr 1e-3'; the "
                        "seed's configuration: '--rewards published --loss-type dapo --scale-rewards group "
                        "--mask-truncated-completions false --pass-rate-k 0 --num-generations 4 "
                        "--per-device-train-batch-size 8 --lr 5e-5' with --answer-format solution+tests")
    parser.add_argument("--sft-args", default="", help="extra train.py flags for SFT, e.g. '--lr 2e-4'")
    parser.add_argument("--dpo-args", default="", help="extra train.py flags for DPO, e.g. '--lr 5e-5'")
    args = parser.parse_args(argv)
    preset = preset_params(args.preset)
    model = args.model or preset.model
    if args.model or args.preset != "tiny":  # the tiny preset builds its own model
        try:
            check_model_source(model)
        except ValueError as err:
            parser.exit(2, f"{err}\n")
    if args.sft_adapter and not (Path(args.sft_adapter) / "adapter_config.json").is_file():
        parser.exit(2, f"--sft-adapter {args.sft_adapter}: no adapter_config.json in it\n")
    stage = args.grpo_name
    if stage in ("base", "sft", "dpo") or not stage.replace("-", "").replace("_", "").isalnum():
        parser.error(f"--grpo-name {stage!r}: letters, digits, - and _ only, not base, sft or dpo")
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    answer_format = args.answer_format or preset.answer_format
    task_files = [Path(f) for f in args.task_file.split(",") if f] or [PRESETS[args.preset]]
    splits = split(task_files, args.seed)
    evaluated = [name for name in args.splits.split(",") if name]
    if unknown := set(evaluated) - set(SPLITS):
        parser.error(f"--splits: unknown {sorted(unknown)}; choose from {SPLITS}")
    if args.external and not Path(args.external).is_file():
        parser.error(f"--external {args.external}: no such file")
    train_file = write_jsonl(splits["train"], out / "train_tasks.jsonl")
    grpo_tiers = {t for t in args.grpo_tiers.split(",") if t}
    tier_of = {row["task_id"]: row["difficulty"] for rows in splits.values() for row in rows}
    trained = {row["difficulty"] for row in splits["train"]}
    if unknown := grpo_tiers - trained:
        parser.error(f"--grpo-tiers: no training task of tier {sorted(unknown)}; the training split's tiers are "
                     f"{sorted(trained)}")
    grpo_file = write_jsonl([r for r in splits["train"] if r["difficulty"] in grpo_tiers],
                            out / "train_grpo_tasks.jsonl") if grpo_tiers else train_file
    grpo_dir, suffix = out / stage, "" if stage == "grpo" else f"-{stage}"  # the default keeps its old file names
    limit = args.tasks or None
    eval_sets = {name: (write_jsonl(splits[name][:limit], out / f"eval_{name}.jsonl"), args.eval_n)
                 for name in evaluated}
    if args.external:
        rows = [t.to_row() for t in load_tasks(args.external)][: args.external_tasks or None]
        eval_sets[Path(args.external).stem] = (write_jsonl(rows, out / "eval_external.jsonl"), args.external_n)
    if args.preset == "tiny":
        from rust_rewards.train.tiny_model import build_tiny_model

        model = str(build_tiny_model(ROOT / model))
    sampling = ["--temperature", str(args.temperature), "--top-p", "1.0", "--max-new-tokens", str(args.max_new_tokens),
                "--seed", str(args.seed), "--backend", "hf", "--answer-format", answer_format,
                "--batch-size", str(args.batch_size)]
    train = ["train.py", "--preset", args.preset, "--model", model, "--resume", "auto",
             "--seed", str(args.seed), "--max-completion-length", str(args.max_new_tokens),
             "--answer-format", answer_format]
    times: dict[str, float] = {}

    def predict(label: str, extra: list[str]) -> None:
        for name, (file, n) in eval_sets.items():
            times[f"inference {label}"] = times.get(f"inference {label}", 0.0) + run(
                "inference.py", "--model", model, *extra, "--tasks", str(file), "--out",
                str(out / f"pred_{label}_{name}.parquet"), "--name", label, "--n", str(n), *sampling)

    models: list[str] = []
    if not args.skip_base:
        predict("base", [])
        models.append("base")
    init: list[str] = []
    if args.sft_steps or args.sft_adapter:
        adapter = Path(args.sft_adapter).resolve() if args.sft_adapter else out / "sft" / "adapter"
        if not args.sft_adapter:
            times["train sft"] = run(*train, "--data", str(train_file), "--stage", "sft", "--output-dir",
                                     str(out / "sft"), "--max-steps", str(args.sft_steps), *args.sft_args.split())
        init = ["--init-adapter", str(adapter)]
        predict("sft", ["--adapter", str(adapter)])
        models.append("sft")
    if args.steps:
        copy_filter(out, stage)
        times[f"train {stage}"] = run(*train, "--data", str(grpo_file), *init, "--output-dir", str(grpo_dir),
                                     "--max-steps", str(args.steps), "--temperature", str(args.temperature),
                                     *args.train_args.split(), check=False)
        if (grpo_dir / "adapter" / "adapter_config.json").is_file():  # else refused (the pass-rate filter's
            predict(stage, ["--adapter", str(grpo_dir / "adapter")])  # no-go, on stderr): nothing to score
            models.append(stage)
    if args.dpo_steps:
        samples, pairs = out / "dpo_samples.parquet", out / "dpo_pairs.jsonl"
        start_adapter = ["--adapter", init[1]] if init else []
        times["dpo pairs"] = run("inference.py", "--model", model, *start_adapter, "--tasks", str(train_file),
                                 "--out", str(samples), "--name", "dpo-samples", "--n", str(args.dpo_n), *sampling)
        times["dpo pairs"] += run("-m", "rust_rewards.data.dpo_pairs", "--tasks", str(train_file), "--predictions",
                                  str(samples), "--out", str(pairs))
        times["train dpo"] = run(*train, "--data", str(train_file), *init, "--stage", "dpo", "--dpo-pairs", str(pairs),
                                 "--output-dir", str(out / "dpo"), "--max-steps", str(args.dpo_steps),
                                 *args.dpo_args.split())
        predict("dpo", ["--adapter", str(out / "dpo" / "adapter")])
        models.append("dpo")
    grpo_record = grpo_dir / "params.json"
    grpo_params = json.loads(grpo_record.read_text()) if args.steps and grpo_record.is_file() else {}
    recipe = grpo_params.get("rewards", preset.rewards)
    sft_stage = f"adapter {args.sft_adapter}" if args.sft_adapter else f"{args.sft_steps} steps"
    grpo_on = f"the {'+'.join(sorted(grpo_tiers))} tier's training tasks" if grpo_tiers else "every training task"
    lines = [f"learning benchmark: {args.preset} ({model}), {'+'.join(f.name for f in task_files)}: "
             f"{len(splits['train'])} training "
             f"tasks, {len(splits['held-out'])} held-out tasks; SFT {sft_stage}, GRPO ({stage}) {args.steps} steps "
             f"on {grpo_on} (rewards {resolve_weights(recipe, grpo_params.get('reward_weights', ''))}, loss "
             f"{grpo_params.get('loss_type', preset.loss_type)}, scale_rewards "
             f"{grpo_params.get('scale_rewards', preset.scale_rewards)}), DPO {args.dpo_steps} steps; answer format "
             f"{answer_format}; sampling temperature {args.temperature}, {args.max_new_tokens} new tokens"]
    metrics = {k: v for k, v in METRICS.items() if asks_for_tests(answer_format) or k != OWN_TESTS}
    for name, (file, _) in eval_sets.items():
        eval_dir = out / f"eval_{name}{suffix}"
        predictions = [arg for m in models for arg in ("--predictions", str(out / f"pred_{m}_{name}.parquet"))]
        times[f"eval {name}"] = run("eval.py", "--tasks", str(file), *predictions, "--out", str(eval_dir), "--k", "1")
        results = pd.read_parquet(eval_dir / "results.parquet")
        lines += report(results, models, f"{name} split", args.seed, metrics) + pass_at_k_lines(
            results, models, args.pass_k, args.seed)
        tiers = results["task_id"].map({t.task_id: t.difficulty for t in load_tasks(str(file))})
        if tiers.nunique() > 1:  # a mix of task sets: each tier's own rows too
            for tier in sorted(tiers.dropna().unique()):
                part = results[tiers == tier]
                lines += report(part, models, f"{name} split, {tier} tier", args.seed, metrics) + pass_at_k_lines(
                    part, models, args.pass_k, args.seed)
    if args.steps:
        filtered, rates = grpo_dir / PASS_RATES_FILE, None
        if filtered.is_file():
            rates = PassRates(**json.loads(filtered.read_text()))
            keep = grpo_params.get("pass_rate_keep", "rewards")
            lines += ["", f"{rates.verdict()}; GRPO trained on the {len(rates.kept(keep))} {PASS_RATE_KEEP[keep]}"]
        if (grpo_dir / "metrics.jsonl").is_file():
            lines += ["", *grpo_signal(grpo_dir / "metrics.jsonl"), *hidden_signal(grpo_dir, tier_of, rates)]
        if (grpo_dir / "hints.jsonl").is_file():  # --train-args '--hints ...': what the hints did
            hinted = [json.loads(line) for line in (grpo_dir / "hints.jsonl").read_text().splitlines()]
            lines += ["", *hint_summary(hinted)]
    lines += ["", "wall: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
              + f"; total {time.monotonic() - start:.0f} s"]
    print("\n".join(lines))
    (out / f"report{suffix}.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
