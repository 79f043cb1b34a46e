"""Preference pairs for ``train.py --stage dpo``: sampled completions of one prompt, ranked by cargo's rewards.

Input shape (``build_pairs``): one mapping per sampled completion with ``task_id``, ``sample`` (its index among the
task's samples), ``completion`` (the model's answer text) and ``report`` (the verifier's ``Report`` for it, e.g. from
``get_verifier().verify_many(completions, hidden=[task.hidden_tests() ...])``). Every two completions of a task whose
weighted reward totals (``rewards_from_report`` + ``weighted_total``) differ by at least ``PairRule.min_margin`` form a
pair: the higher one is ``chosen``, the lower one ``rejected``. Ties and pairs below the margin are dropped; with
``drop_format_only`` so are pairs that differ only in the format rewards (``non_empty_reward``, ``test_block_reward``:
nothing cargo judged). At most ``max_pairs_per_prompt`` pairs per task, the widest margins first.

Output: TRL's conversational preference format, ``{"prompt": chat_messages(task.prompt), "chosen": [assistant
message], "rejected": [assistant message], "task_id", "margin"}``, in the order of ``tasks``, then by margin
(descending), then by the samples' indices: the same input always gives the same list.

From sampled predictions (eval.py's input: task_id, completion, optional sample; its ``results.parquet`` has the same
columns), ``pairs_from_predictions`` verifies them and builds the pairs; as a command::

    python -m rust_rewards.data.dpo_pairs --tasks T.jsonl --predictions P.parquet --out pairs.jsonl [--min-margin 1]
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rust_rewards.prompts import ANSWER_FORMATS, chat_messages, system_prompt
from rust_rewards.rewards import rewards_from_report, weighted_total
from rust_rewards.rewards.recipes import RECIPES, resolve_weights
from rust_rewards.tasks import Task

FORMAT_REWARDS = ("non_empty_reward", "test_block_reward", "format_reward")
"""Rewards that judge the answer's shape, not what cargo found."""
PAIR_COLUMNS = ("prompt", "chosen", "rejected")


@dataclass(frozen=True)
class PairRule:
    """Which pairs of completions of one prompt are preferences worth training on."""

    min_margin: float = 1.0
    """chosen's weighted reward total minus rejected's, at least (ties are always dropped)."""
    drop_format_only: bool = True
    """drop pairs whose rewards differ only in ``FORMAT_REWARDS``."""
    max_pairs_per_prompt: int = 4
    """the widest-margin pairs kept per task (0: none)."""


def _text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    return str(completion[-1]["content"])  # a TRL message list: the final assistant message


def build_pairs(rows: Sequence[Mapping[str, Any]], tasks: Sequence[Task], rule: PairRule = PairRule(),
                weights: Mapping[str, float] | None = None, answer_format: str = "solution+tests"
                ) -> list[dict[str, Any]]:
    """Preference pairs from ``rows`` (see the module docstring) for ``tasks``; pure and deterministic.

    ``weights``: reward weights for the totals (default ``DEFAULT_WEIGHTS``); ``answer_format``: the one the
    completions were sampled with (the pairs' system prompt asks for it). Rows whose report is an
    ``internal_error`` (the verifier failed, not the answer) take part in no pair. A row naming a task not in
    ``tasks`` is a ``ValueError``.
    """
    by_id = {task.task_id: task for task in tasks}
    scored: dict[str, list[tuple[int, str, dict[str, float | None], float]]] = {}
    for row in rows:
        task_id = str(row["task_id"])
        if task_id not in by_id:
            raise ValueError(f"build_pairs: a row names task {task_id!r}, which is not among the tasks")
        report = row["report"]
        if report.internal_error:
            continue
        rewards = rewards_from_report(report)
        total = weighted_total(rewards, dict(weights) if weights is not None else None)
        scored.setdefault(task_id, []).append((int(row["sample"]), _text(row["completion"]), rewards, total))
    out: list[dict[str, Any]] = []
    for task in tasks:
        samples = sorted(scored.get(task.task_id, []), key=lambda s: s[0])
        candidates = []
        for i, a in enumerate(samples):
            for b in samples[i + 1:]:
                hi, lo = (a, b) if a[3] >= b[3] else (b, a)
                margin = hi[3] - lo[3]
                if margin <= 0 or margin < rule.min_margin:
                    continue
                if rule.drop_format_only and all(hi[2][k] == lo[2][k] for k in hi[2] if k not in FORMAT_REWARDS):
                    continue
                candidates.append((margin, hi, lo))
        candidates.sort(key=lambda c: (-c[0], c[1][0], c[2][0]))
        prompt = chat_messages(task.prompt, system_prompt(answer_format))
        for margin, hi, lo in candidates[: max(rule.max_pairs_per_prompt, 0)]:
            out.append({"prompt": prompt, "chosen": [{"role": "assistant", "content": hi[1]}],
                        "rejected": [{"role": "assistant", "content": lo[1]}], "task_id": task.task_id,
                        "margin": round(margin, 6), "chosen_sample": hi[0], "rejected_sample": lo[0]})
    return out


def pairs_from_predictions(predictions: Sequence[Mapping[str, Any]], tasks: Sequence[Task],
                           rule: PairRule = PairRule(), weights: Mapping[str, float] | None = None,
                           verifier: Any = None, answer_format: str = "solution+tests") -> list[dict[str, Any]]:
    """Verify ``predictions`` (mappings with task_id, completion and optionally sample; one model's samples) against
    their tasks' hidden tests with ``verifier`` (default: the shared one) and ``build_pairs`` from the reports."""
    from rust_rewards.verify.verifier import get_verifier

    by_id = {task.task_id: task for task in tasks}
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for pred in predictions:
        task_id = str(pred["task_id"])
        if task_id not in by_id:
            raise ValueError(f"predictions: task {task_id!r} is not among the tasks")
        seen[task_id] = seen.get(task_id, -1) + 1
        sample = pred.get("sample")
        rows.append({"task_id": task_id, "sample": seen[task_id] if sample is None else int(sample),
                     "completion": pred["completion"]})
    reports = (verifier or get_verifier()).verify_many([r["completion"] for r in rows],
                                                       hidden=[by_id[r["task_id"]].hidden_tests() for r in rows])
    return build_pairs([{**r, "report": rep} for r, rep in zip(rows, reports, strict=True)], tasks, rule, weights,
                       answer_format)


def write_pairs(pairs: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write pairs as JSON lines (what ``train.py --dpo-pairs`` reads)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(dict(p), ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    return path


def read_pairs(path: str | Path, flag: str = "--dpo-pairs") -> list[dict[str, Any]]:
    """Pairs from a ``.jsonl`` (``write_pairs``) or ``.parquet`` file with ``prompt``, ``chosen`` and ``rejected``
    columns; a missing file, a missing column or no pairs is a ``ValueError`` naming ``flag``."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{flag} {path}: no such file (write one with rust_rewards.data.dpo_pairs.write_pairs)")
    if path.suffix == ".parquet":
        import pandas as pd

        rows = [{k: _plain(v) for k, v in r.items()} for r in pd.read_parquet(path).to_dict("records")]
    else:
        lines = path.read_text(encoding="utf-8").splitlines()
        try:
            rows = [json.loads(line) for line in lines if line.strip()]
        except json.JSONDecodeError as e:
            raise ValueError(f"{flag} {path}: not JSON lines ({e})") from None
    if not rows:
        raise ValueError(f"{flag} {path}: no preference pairs in it (a rule that is too strict, or completions "
                         "that all scored alike?)")
    missing = [c for c in PAIR_COLUMNS if c not in rows[0]]
    if missing:
        raise ValueError(f"{flag} {path}: rows lack {missing}; expected TRL's preference columns {PAIR_COLUMNS}")
    return rows


def _plain(value: Any) -> Any:
    """numpy arrays of message dicts (as pandas reads parquet lists) as plain lists."""
    if hasattr(value, "tolist") and not isinstance(value, str):
        return [dict(m) for m in value.tolist()] if len(value) and isinstance(value[0], Mapping) else value.tolist()
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rust_rewards.data.dpo_pairs``: pairs from a predictions file (parquet/jsonl) for ``train.py --stage
    dpo --dpo-pairs OUT``."""
    import argparse

    import pandas as pd

    from rust_rewards.data.importers import load_tasks

    parser = argparse.ArgumentParser(prog="python -m rust_rewards.data.dpo_pairs", description=main.__doc__)
    parser.add_argument("--tasks", required=True, help="task file the predictions answer (jsonl/parquet)")
    parser.add_argument("--predictions", required=True, help="parquet/jsonl: task_id, completion (+ sample)")
    parser.add_argument("--out", required=True, help="pairs .jsonl to write")
    rule = PairRule()
    parser.add_argument("--min-margin", type=float, default=rule.min_margin)
    parser.add_argument("--keep-format-only", action="store_true", help="keep pairs that differ only in format")
    parser.add_argument("--max-pairs-per-prompt", type=int, default=rule.max_pairs_per_prompt)
    parser.add_argument("--rewards", default="", help="recipe ranking the samples (default: the one for their "
                        "answer format: correctness for solution, published for solution+tests)")
    args = parser.parse_args(argv)
    path = Path(args.predictions)
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_json(path, lines=True)
    formats = set(frame["answer_format"]) if "answer_format" in frame.columns else {"solution+tests"}
    if len(formats) != 1 or not formats <= set(ANSWER_FORMATS):
        parser.error(f"--predictions {path}: expected one answer format of {ANSWER_FORMATS}, found {sorted(formats)}")
    answer_format = formats.pop()
    recipe = args.rewards or next(r.name for r in RECIPES.values() if r.answer_format == answer_format)
    try:
        weights = resolve_weights([recipe])
    except ValueError as err:
        parser.error(str(err))
    pairs = pairs_from_predictions(frame.to_dict("records"), list(load_tasks(args.tasks)),
                                   PairRule(args.min_margin, not args.keep_format_only, args.max_pairs_per_prompt),
                                   weights, answer_format=answer_format)
    write_pairs(pairs, args.out)
    print(f"{len(pairs)} pairs of {len({p['task_id'] for p in pairs})} prompts -> {args.out}")
    return 0 if pairs else 1


if __name__ == "__main__":
    raise SystemExit(main())
