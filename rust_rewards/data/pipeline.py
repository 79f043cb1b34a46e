"""The processing pipeline of process_data.py: load a task set, drop exact and near-duplicate prompts, check every
reference solution against its reference tests, drop prompts over the token budget, split train/eval
deterministically, and write ``train.parquet``, ``eval.parquet`` and ``manifest.json`` (each atomically, the manifest
last, with the others' sha256).

Every stage returns a ``StageResult`` (what it kept, what it dropped and why, its parameters and statistics);
``run_pipeline`` chains them as ``ProcessParams`` says and records them all in the manifest.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from rust_rewards.atomic import write_json_atomic, write_parquet_atomic
from rust_rewards.data.importers import load_tasks
from rust_rewards.hub import hub_reachable, looks_local
from rust_rewards.layout import TASK_FILES
from rust_rewards.params import fill_params, param, unknown_flag
from rust_rewards.prompts import chat_messages, render_prompt
from rust_rewards.tasks import TASK_COLUMNS, Task
from rust_rewards.verify.verifier import BACKENDS, verifier_for

DEFAULT_SOURCE = "qwen3-rust-finetune/bundled_tasks.jsonl"
DEFAULT_TOKENIZER = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
PROCESSED_DIR = "qwen3-rust-finetune/processed"
TRAIN_FILE = "train.parquet"
EVAL_FILE = "eval.parquet"
MANIFEST_FILE = "manifest.json"
TASK_SCHEMA = pa.schema(
    [(name, pa.bool_() if name == "test_release" else pa.string()) for name in TASK_COLUMNS]
)


@dataclass
class ProcessParams:
    """Every parameter of a processing run (from the command line or the form)."""

    source: str = param(DEFAULT_SOURCE, help="tasks to process: a jsonl/parquet file (ours, MultiPL-E or Exercism "
                        "rows), a Hugging Face dataset name, or a path in the Oxen repo", group="Source",
                        files=TASK_FILES)
    oxen_repo: str = param("", help="Oxen repository the source path lives in, e.g. ox/Rust (empty: not Oxen)",
                           group="Source", advanced=True)
    split: str = param("", help="Hugging Face dataset split (empty: train)", group="Source", advanced=True)
    revision: str = param("", help="Hugging Face or Oxen revision: branch, tag or commit (empty: the latest)",
                          group="Source", advanced=True)
    out: str = param(PROCESSED_DIR, help=f"folder for {TRAIN_FILE}, {EVAL_FILE} and {MANIFEST_FILE}",
                     group="Output")
    overwrite: bool = param(False, help="replace a split already in --out that other settings made (the same "
                            "settings make the same split, rewritten without asking)", group="Output")
    eval_fraction: float = param(0.1, help="share of tasks held out for eval, in [0, 1) (0: no eval split)",
                                 group="Split", bounds=(0.0, None), step=0.01)
    seed: int = param(42, help="seed of the hash that assigns tasks to train or eval", group="Split", advanced=True)
    tokenizer: str = param(DEFAULT_TOKENIZER, help="tokenizer counting prompt tokens: hub name, local folder, or "
                           "none to skip the token budget", group="Token budget")
    max_prompt_tokens: int = param(512, help="tasks whose chat prompt (system prompt included) is longer are "
                                   "dropped", group="Token budget", bounds=(1, None))
    verify: bool = param(True, help="check each reference solution against its reference tests and drop the ones "
                         "that fail (--no-verify: keep all)", group="Verification")
    workers: int = param(0, help="cargo processes at once (0: one per usable CPU)", group="Verification",
                         advanced=True, bounds=(0, None))
    near_dup_threshold: float = param(0.9, help="prompts whose token Jaccard similarity with an earlier kept "
                                      "prompt reaches this are dropped as near duplicates, in (0, 1]",
                                      group="Deduplication", bounds=(0.0, 1.0), step=0.01)
    verifier: str = param("local", help="where cargo runs: local sandboxes, or workers of a Ray cluster",
                          group="Verification", choices=BACKENDS)
    ray_address: str = param("auto", help="the Ray cluster of `--verifier ray`: auto, local or HOST:PORT",
                             group="Verification", advanced=True)

    def __post_init__(self) -> None:
        if not 0.0 <= self.eval_fraction < 1.0:
            raise ValueError(f"--eval-fraction must be in [0, 1), got {self.eval_fraction}")
        if not 0.0 < self.near_dup_threshold <= 1.0:
            raise ValueError(f"--near-dup-threshold must be in (0, 1], got {self.near_dup_threshold}")
        if self.max_prompt_tokens <= 0:
            raise ValueError(f"--max-prompt-tokens must be positive, got {self.max_prompt_tokens}")
        if self.workers < 0:
            raise ValueError(f"--workers must be >= 0 (0 = all cores), got {self.workers}")
        if self.verifier not in BACKENDS:
            raise ValueError(f"--verifier: expected one of {BACKENDS}, got {self.verifier!r}")

    @classmethod
    def from_cli(cls, args: Mapping[str, Any]) -> ProcessParams:
        """Parameters from ``mo.cli_args()`` (``--eval-fraction 0.2``, ``--no-verify``) or form values."""
        values = {str(key).replace("-", "_"): value for key, value in args.items()}
        if values.pop("no_verify", None) is not None:
            values["verify"] = False
        names = [f.name for f in fields(cls)]
        unknown = [key for key in values if key not in names]
        if unknown:
            raise ValueError(unknown_flag(unknown[0], [*names, "no_verify"]))
        return fill_params(cls, values)


def process_command(path: str) -> str:
    """The ``process_data.py`` command that writes ``path`` when it is one of its splits (``DIR/train.parquet``,
    ``DIR/eval.parquet``), else ''.

    >>> process_command("qwen3-rust-finetune/processed/train.parquet")
    'python process_data.py --source FILE.jsonl --out qwen3-rust-finetune/processed'
    """
    out = Path(path)
    return f"python process_data.py --source FILE.jsonl --out {out.parent}" if out.name in (TRAIN_FILE, EVAL_FILE) \
        else ""


@dataclass(frozen=True)
class Dropped:
    """One task removed by a pipeline stage, and why."""

    task_id: str
    stage: str
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return f"dropped {self.task_id} ({self.stage}: {self.reason}{f'; {self.detail}' if self.detail else ''})"


DROPPED_SHOWN = 20
"""Dropped tasks the console names per stage; the manifest lists every one."""


@dataclass
class StageResult:
    """What one filtering stage kept and dropped, with its parameters and extra statistics."""

    name: str
    params: dict[str, Any]
    kept: list[Task]
    dropped: list[Dropped] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """The stage as recorded in the manifest."""
        return {"name": self.name, "params": self.params, "kept": len(self.kept),
                "dropped": len(self.dropped), **self.stats, "seconds": round(self.seconds, 3)}

    def dropped_lines(self) -> list[str]:
        """One console line per dropped task (its id and why), the first ``DROPPED_SHOWN``, then how many more."""
        more = len(self.dropped) - DROPPED_SHOWN
        return ([f"  {d}" for d in self.dropped[:DROPPED_SHOWN]]
                + ([f"  ... and {more} more ({MANIFEST_FILE} lists every dropped task)"] if more > 0 else []))


def normalise_prompt(prompt: str) -> str:
    """Lower case with runs of whitespace collapsed: the key for exact duplicates."""
    return " ".join(prompt.lower().split())


def prompt_tokens(prompt: str) -> frozenset[str]:
    """The token multiset of a normalised prompt as a set: words and punctuation marks, each tagged
    with its occurrence number (``a#1``, ``a#2``), so set Jaccard is multiset Jaccard."""
    seen: Counter[str] = Counter()
    tagged = []
    for tok in re.findall(r"\w+|[^\w\s]", normalise_prompt(prompt)):
        seen[tok] += 1
        tagged.append(f"{tok}#{seen[tok]}")
    return frozenset(tagged)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two token sets (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def dedup_tasks(tasks: list[Task], threshold: float = 0.9) -> StageResult:
    """Drop exact duplicate prompts (after normalisation), then near-duplicates: token-multiset
    Jaccard (words and punctuation) >= threshold with an earlier kept prompt.

    The first occurrence is kept. Near-duplicates are found exactly with prefix filtering: tokens are
    ordered rarest first, and two sets with Jaccard >= t must share a token among the first
    ``n - ceil(t * n) + 1`` of each, so only tasks sharing such a token are compared.
    """
    start = time.perf_counter()
    first_by_text: dict[str, str] = {}
    unique: list[Task] = []
    dropped: list[Dropped] = []
    for task in tasks:
        key = normalise_prompt(task.prompt)
        if key in first_by_text:
            dropped.append(Dropped(task.task_id, "dedup", "exact duplicate prompt",
                                   f"same prompt as {first_by_text[key]}"))
            continue
        first_by_text[key] = task.task_id
        unique.append(task)

    token_sets = [prompt_tokens(t.prompt) for t in unique]
    doc_freq = Counter(tok for toks in token_sets for tok in toks)
    index: dict[str, list[int]] = defaultdict(list)
    kept: list[Task] = []
    near = 0
    for i, (task, toks) in enumerate(zip(unique, token_sets, strict=True)):
        ordered = sorted(toks, key=lambda tok: (doc_freq[tok], tok))
        prefix = ordered[: len(ordered) - math.ceil(threshold * len(ordered) - 1e-9) + 1]
        candidates = {j for tok in prefix for j in index[tok]}
        best_j, best = -1, 0.0
        for j in sorted(candidates):
            other = token_sets[j]
            if min(len(toks), len(other)) < threshold * max(len(toks), len(other)) - 1e-9:
                continue
            score = jaccard(toks, other)
            if score >= threshold and score > best:
                best_j, best = j, score
        if best_j >= 0:
            near += 1
            dropped.append(Dropped(task.task_id, "dedup", "near-duplicate prompt",
                                   f"jaccard {best:.3f} with {unique[best_j].task_id}"))
            continue
        for tok in prefix:
            index[tok].append(i)
        kept.append(task)
    return StageResult(
        "dedup",
        {"normalisation": "lower case, whitespace collapsed",
         "near_duplicate": "jaccard of word/punctuation token multisets",
         "threshold": threshold},
        kept, dropped,
        stats={"exact_duplicates": len(tasks) - len(unique), "near_duplicates": near},
        seconds=time.perf_counter() - start,
    )


def is_verifiable(task: Task) -> bool:
    """A task can be checked when it has both a reference solution and reference tests."""
    return bool(task.reference_code.strip()) and task.hidden_tests() is not None


def failure_reason(report: Any) -> tuple[str, str]:
    """(category, detail) for a reference solution the verifier did not accept."""
    hidden = report.hidden_tests
    if report.internal_error:
        return "internal_error", report.internal_error.splitlines()[0][:200]
    if report.timed_out:
        return "timeout", "timed out in " + ", ".join(sorted(report.timed_out))
    if not report.build_ok and not report.error_codes and not report.diagnostics.strip():
        return "verifier_error", "build failed without any compiler message (sandbox or resource failure?)"
    if not report.build_ok:
        codes = ", ".join(sorted(set(report.error_codes))) or "no error code"
        return "compile_error", f"compile error ({codes})"
    if report.source.forbidden:
        return "forbidden", "forbidden: " + ", ".join(report.source.forbidden)
    if hidden is None:
        return "no_test_result", "hidden tests were not run"
    if not hidden.summary_seen:
        return "no_test_result", "hidden tests gave no result (test build failed, crash or early exit)"
    counts = f"{hidden.passed} passed, {hidden.failed} failed of {hidden.expected}"
    return "test_failure", f"hidden tests: {counts}"


def verify_tasks(tasks: list[Task], *, enabled: bool = True, workers: int = 0, backend: str = "local",
                 ray_address: str = "auto",
                 progress: Callable[[int, int], None] | bool | None = None) -> StageResult:
    """Check each reference solution against its reference tests; keep tasks that pass.

    Tasks without a reference solution or tests are kept and counted as unverifiable. ``backend="ray"``
    verifies on the Ray cluster at ``ray_address``.
    """
    start = time.perf_counter()
    params = {"enabled": enabled, "workers": workers or "all cores", "backend": backend,
              "accept": "build_ok and hidden_ok"}
    checkable = [t for t in tasks if is_verifiable(t)]
    stats: dict[str, Any] = {"unverifiable": len(tasks) - len(checkable)}
    if not enabled or not checkable:
        stats["checked"] = 0
        return StageResult("verify", params, list(tasks), stats=stats,
                           seconds=time.perf_counter() - start)
    verifier = verifier_for(workers, backend, ray_address)
    reports = verifier.verify_many(
        [t.reference_code for t in checkable],
        hidden=[t.hidden_tests() for t in checkable],
        raw_code=True,
        progress=progress if progress is not None else False,
    )
    verdicts = {t.task_id: r for t, r in zip(checkable, reports, strict=True)}
    kept: list[Task] = []
    dropped: list[Dropped] = []
    reasons: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    for task in tasks:
        report = verdicts.get(task.task_id)
        if report is None or (report.build_ok and report.hidden_ok):
            kept.append(task)
            continue
        category, detail = failure_reason(report)
        reasons[category] += 1
        codes.update(set(report.error_codes))
        dropped.append(Dropped(task.task_id, "verify", category, detail))
    stats.update(checked=len(checkable), passed=len(checkable) - len(dropped),
                 failures_by_reason=dict(reasons.most_common()), error_codes=dict(codes.most_common()),
                 verify_seconds_total=round(sum(sum(r.durations.values()) for r in reports), 3))
    return StageResult("verify", params, kept, dropped, stats, time.perf_counter() - start)


def load_tokenizer(name: str) -> tuple[Any | None, str]:
    """(tokenizer, note): ``none`` skips the check, and so does a hub tokenizer that cannot be fetched
    (with a note saying why); a local path that does not exist is an error."""
    if name.strip().lower() in ("", "none"):
        return None, "skipped: --tokenizer none"
    from transformers import AutoTokenizer

    if looks_local(name):
        local = Path(name).expanduser()
        if not local.is_dir():
            raise FileNotFoundError(f"--tokenizer {name!r}: no such tokenizer directory")
        return AutoTokenizer.from_pretrained(local), ""
    try:
        return AutoTokenizer.from_pretrained(name, local_files_only=True), ""  # in the cache: no network
    except Exception:  # noqa: BLE001 - not cached: fetch it below
        pass
    if not hub_reachable():
        return None, (f"skipped: tokenizer {name!r} is not cached and the Hugging Face Hub cannot be reached "
                      "(offline?). Pass a local tokenizer directory with --tokenizer PATH, or --tokenizer none")
    try:
        return AutoTokenizer.from_pretrained(name), ""
    except Exception as err:  # any hub or network failure: one clear message
        first = str(err).strip().splitlines()[0].rstrip(".") if str(err).strip() else type(err).__name__
        return None, (f"skipped: could not load tokenizer {name!r} (offline?): {first}. Pass a local "
                      "tokenizer directory with --tokenizer PATH, or --tokenizer none")


def count_prompt_tokens(tasks: list[Task], tokenizer: Any) -> list[int]:
    """Tokens of each task's prompt as the model sees it (``render_prompt``: the chat template with the system prompt
    and the generation prompt, or the plain completion prompt of a model without one)."""
    texts = [render_prompt(tokenizer, chat_messages(t.prompt)) for t in tasks]
    if not texts:
        return []
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def token_budget(tasks: list[Task], tokenizer: Any, max_tokens: int, *, name: str = "",
                 note: str = "") -> StageResult:
    """Drop tasks whose chat prompt is longer than ``max_tokens`` (skipped without a tokenizer)."""
    start = time.perf_counter()
    params = {"tokenizer": name, "max_prompt_tokens": max_tokens, "counts": "chat template, system prompt "
              "included, add_generation_prompt=True"}
    if tokenizer is None:
        return StageResult("token_budget", params, list(tasks), stats={"skipped": note},
                           seconds=time.perf_counter() - start)
    counts = count_prompt_tokens(tasks, tokenizer)
    kept = [t for t, n in zip(tasks, counts, strict=True) if n <= max_tokens]
    dropped = [Dropped(t.task_id, "token_budget", "prompt too long", f"{n} > {max_tokens} tokens")
               for t, n in zip(tasks, counts, strict=True) if n > max_tokens]
    stats: dict[str, Any] = {"skipped": None}
    if counts:
        ordered = sorted(counts)
        stats["prompt_tokens"] = {"min": ordered[0], "median": statistics.median(ordered),
                                  "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
                                  "max": ordered[-1]}
    return StageResult("token_budget", params, kept, dropped, stats, time.perf_counter() - start)


def eval_score(task_id: str, seed: int) -> float:
    """A uniform number in [0, 1) fixed by (seed, task_id): adding tasks never moves other tasks."""
    digest = hashlib.sha256(f"{seed}\x00{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_tasks(tasks: list[Task], eval_fraction: float, seed: int) -> tuple[list[Task], list[Task]]:
    """(train, eval): a task goes to eval when its score is below ``eval_fraction``; order is kept."""
    train = [t for t in tasks if eval_score(t.task_id, seed) >= eval_fraction]
    held_out = [t for t in tasks if eval_score(t.task_id, seed) < eval_fraction]
    return train, held_out


def tasks_table(tasks: list[Task]) -> pa.Table:
    """Canonical columns as a pyarrow table (typed even when empty)."""
    rows = [t.to_row() for t in tasks]
    return pa.Table.from_pylist(rows, schema=TASK_SCHEMA) if rows else TASK_SCHEMA.empty_table()


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_NOT_THE_SPLIT = frozenset({"out", "overwrite", "workers", "verifier", "ray_address"})
"""Settings that do not change which tasks a split holds."""


def check_overwrite(params: ProcessParams) -> None:
    """Refuse, before any work, to replace a split in ``--out`` that other settings made (``eval.parquet`` there is
    the default held-out set of inference.py and eval.py) unless ``--overwrite``; say which settings differ."""
    out = Path(params.out)
    if params.overwrite or not any((out / name).exists() for name in (TRAIN_FILE, EVAL_FILE, MANIFEST_FILE)):
        return
    try:
        before = json.loads((out / MANIFEST_FILE).read_text()).get("params", {})
    except (OSError, ValueError, AttributeError):
        before = {}
    now = asdict(params)
    changed = sorted(k for k in now if k not in _NOT_THE_SPLIT and before.get(k) != now[k])
    if changed:
        what = ", ".join(f"{k} {before.get(k)!r} -> {now[k]!r}" for k in changed) if before else "no manifest"
        raise ValueError(f"--out {out} holds a split made with other settings ({what}): add --overwrite to replace "
                         "it, or choose another --out")


def check_split(params: ProcessParams, loaded: int, train: list[Task], held_out: list[Task],
                log: Callable[[str], None]) -> None:
    """Refuse (``ValueError`` naming the flag, before anything is written) a split with nothing to train on; warn
    about an empty eval split that ``--eval-fraction`` asked for."""
    if not train and not held_out:
        raise ValueError(f"--source {params.source}: all {loaded} tasks were dropped (each named above), none is left "
                         "to train on: fix them, or keep them (--no-verify, a higher --max-prompt-tokens or "
                         "--near-dup-threshold)")
    if not train:
        raise ValueError(f"--eval-fraction {params.eval_fraction}: all {len(held_out)} tasks kept fall in the eval "
                         "split (each goes by a hash of its id), none is left to train on: lower --eval-fraction, or "
                         "add tasks")
    if not held_out and params.eval_fraction > 0:
        log(f"WARNING: --eval-fraction {params.eval_fraction}: none of the {len(train)} tasks kept falls in the eval "
            f"split (each goes by a hash of its id), so {EVAL_FILE} is empty and cannot serve as held-out tasks "
            "(train.py --eval-tasks refuses it): add tasks, raise --eval-fraction, or give --eval-fraction 0")


def write_outputs(out_dir: Path, train: list[Task], held_out: list[Task],
                  manifest: dict[str, Any]) -> dict[str, Any]:
    """Write train/eval parquet, then the manifest (with their sha256) last, each atomically."""
    out_dir = Path(out_dir)
    files: dict[str, Any] = {}
    for name, part in ((TRAIN_FILE, train), (EVAL_FILE, held_out)):
        path = write_parquet_atomic(tasks_table(part), out_dir / name)
        files[name] = {"rows": len(part), "bytes": path.stat().st_size, "sha256": sha256_file(path)}
    manifest = {**manifest, "files": files}
    write_json_atomic(manifest, out_dir / MANIFEST_FILE)
    return manifest


@dataclass
class PipelineResult:
    """Everything a run produced: the splits, every stage, and the manifest written."""

    train: list[Task]
    eval: list[Task]
    stages: list[StageResult]
    manifest: dict[str, Any]

    @property
    def dropped(self) -> list[Dropped]:
        return [d for stage in self.stages for d in stage.dropped]


def run_pipeline(params: ProcessParams, progress: Callable[[int, int], None] | bool | None = None,
                 log: Callable[[str], None] = print) -> PipelineResult:
    """Load -> validate -> dedup -> verify -> token budget -> split -> write; returns what was done."""
    check_overwrite(params)
    start = time.perf_counter()
    tasks = load_tasks(params.source, split=params.split or None, oxen_repo=params.oxen_repo or None,
                       revision=params.revision or None)
    loaded = len(tasks)
    if not loaded:
        raise ValueError(f"--source {params.source}: no tasks in it (nothing to process)")
    log(f"loaded {loaded} tasks from {params.source} (validated)")
    dedup = dedup_tasks(tasks, params.near_dup_threshold)
    log(f"dedup: kept {len(dedup.kept)}, dropped {dedup.stats['exact_duplicates']} exact and "
        f"{dedup.stats['near_duplicates']} near duplicates")
    for line in dedup.dropped_lines():
        log(line)
    verified = verify_tasks(dedup.kept, enabled=params.verify, workers=params.workers, backend=params.verifier,
                            ray_address=params.ray_address, progress=progress)
    log(f"verify: kept {len(verified.kept)}, dropped {len(verified.dropped)}, "
        f"unverifiable (kept) {verified.stats['unverifiable']}, {verified.seconds:.1f} s"
        + ("" if params.verify else " (verification disabled)"))
    if verified.stats.get("failures_by_reason"):
        log(f"verify failures by reason: {verified.stats['failures_by_reason']}; "
            f"error codes: {verified.stats['error_codes']}")
    for line in verified.dropped_lines():
        log(line)
    if verified.stats.get("failures_by_reason", {}).get("verifier_error"):
        log("WARNING: some references failed without any compiler message: the verifier itself failed "
            "(another verifier process sharing the sandbox uids, or resource limits); re-run when idle")
    tokenizer, note = load_tokenizer(params.tokenizer)
    if note and tokenizer is None and params.tokenizer.strip().lower() not in ("", "none"):
        log(f"WARNING: token budget check {note}")
    budget = token_budget(verified.kept, tokenizer, params.max_prompt_tokens, name=params.tokenizer,
                          note=note)
    log(f"token budget: kept {len(budget.kept)}, dropped {len(budget.dropped)} over "
        f"{params.max_prompt_tokens} tokens" + (f" ({note})" if tokenizer is None else ""))
    for line in budget.dropped_lines():
        log(line)
    train, held_out = split_tasks(budget.kept, params.eval_fraction, params.seed)
    check_split(params, loaded, train, held_out, log)
    stages = [dedup, verified, budget]
    manifest = {
        "source": {"source": params.source, "oxen_repo": params.oxen_repo or None,
                   "split": params.split or None, "revision": params.revision or None},
        "params": asdict(params),
        "seed": params.seed,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "counts": {"loaded": loaded, "after_dedup": len(dedup.kept), "after_verify": len(verified.kept),
                   "after_token_budget": len(budget.kept), "train": len(train), "eval": len(held_out),
                   "unverifiable": verified.stats["unverifiable"]},
        "filters": [stage.summary() for stage in stages],
        "failures_by_reason": verified.stats.get("failures_by_reason", {}),
        "compile_error_codes": verified.stats.get("error_codes", {}),
        "split": {"method": "sha256(seed, task_id) < eval_fraction", "eval_fraction": params.eval_fraction,
                  "seed": params.seed},
        "dropped": [asdict(d) for stage in stages for d in stage.dropped],
        "seconds": round(time.perf_counter() - start, 3),
    }
    manifest = write_outputs(Path(params.out), train, held_out, manifest)
    log(f"wrote {len(train)} train and {len(held_out)} eval tasks to {params.out} "
        f"in {manifest['seconds']:.1f} s")
    return PipelineResult(train, held_out, stages, manifest)
