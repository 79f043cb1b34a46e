"""Sample completions for tasks with the training chat layout, resumably (HF transformers or vLLM).

Work is a list of (task_id, sample) pairs, and with repair rounds (task_id, sample, round) triples. Finished
chunks are written to ``<out>.parts/`` as they complete; a rerun with the same output path skips every row
already there (or already in ``<out>``) and the final parquet is written atomically, after which the parts
folder is removed.

Repair rounds (``repair_rounds`` > 0): after round r-1 is complete, its answers are verified with the task's
hidden tests (the report eval computes); an answer that fails a check the model may see gets round r, generated
from the original chat + that answer + a user turn holding ``feedback_message(report)``; an answer that passes
them is carried into round r unchanged (``carried``). Every (task_id, sample) thus has one row per round 0..N,
and round N holds the final answer after up to N repairs.
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from rust_rewards.atomic import write_parquet_atomic
from rust_rewards.cpus import keep_freed_memory
from rust_rewards.eval.decoding import DEFAULT_ENGINE, end_index, fence_stop, sample_ids
from rust_rewards.models.gguf import resolve_model
from rust_rewards.prompts import SYSTEM_PROMPT, asks_for_tests, chat_messages, render_prompt, system_prompt
from rust_rewards.report import Report
from rust_rewards.rewards.feedback import DEFAULT_MAX_TOKENS, feedback_message
from rust_rewards.tasks import Task
from rust_rewards.verify.verifier import Verifier, get_verifier

BACKENDS = ("hf", "vllm")
DEFAULT_BATCH_SIZE = 64
"""Sequences the hf backend decodes together (``benchmarks/generation.py``)."""
DEFAULT_CHUNK_SIZE = 64
"""Completions per generation call and per chunk written to disk (one full batch)."""

RUN_COLUMNS = ("model", "base_model", "adapter", "backend", "answer_format", "temperature", "top_p",
               "max_new_tokens", "greedy", "seed")
"""Columns that must match between a resumed run and the rows already written."""

PREDICTION_COLUMNS = ("task_id", "sample", "completion", "completion_tokens", "truncated", *RUN_COLUMNS,
                      "generated_at", "gen_seconds")

LIBRARY_WARNINGS = (
    (FutureWarning, r"`(is_gradient_checkpointing|gradient_checkpointing_enable|gradient_checkpointing_disable)` is "
     r"deprecated and will be removed in v6"),
)
"""Library warnings a user cannot act on: peft (``PeftModel``, ``prepare_model_for_kbit_training``) and TRL (around
each generation) call transformers 5's deprecated gradient-checkpointing aliases themselves."""


def ignore_library_warnings() -> None:
    """Ignore exactly ``LIBRARY_WARNINGS`` in this process (at the start of a training or an inference run)."""
    for category, message in LIBRARY_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


ROUND_DEFAULTS: dict[str, Any] = {"round": 0, "feedback": "", "carried": False}
"""Columns written only with repair rounds, and their value for a row without them (a first answer):
``round`` (0 = the first answer), ``feedback`` (the user turn this answer replies to, "" in round 0 and when
carried) and ``carried`` (copied unchanged from round - 1, which passed every check the model may see)."""


def prediction_columns(repair_rounds: int = 0) -> list[str]:
    """The output's columns: ``PREDICTION_COLUMNS``, plus ``round`` after ``sample`` and ``feedback, carried``
    at the end when ``repair_rounds`` > 0."""
    if not repair_rounds:
        return list(PREDICTION_COLUMNS)
    return ["task_id", "sample", "round", *PREDICTION_COLUMNS[2:], "feedback", "carried"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample: ``n`` completions per task; ``greedy`` ignores temperature and top_p."""

    n: int = 1
    temperature: float = 0.2
    top_p: float = 0.9
    max_new_tokens: int = 512
    greedy: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"--n must be >= 1, got {self.n}")
        if self.max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}")
        if self.greedy and self.n > 1:
            raise ValueError(f"--greedy gives --n {self.n} identical samples: use --n 1 with --greedy")
        if not self.greedy and (self.temperature <= 0 or not 0 < self.top_p <= 1):
            raise ValueError(
                f"sampling needs --temperature > 0 and --top-p in (0, 1] (got {self.temperature}, {self.top_p}); "
                "use --greedy for deterministic decoding"
            )


@dataclass(frozen=True)
class Generation:
    """One sampled completion: its text, generated token count, and whether it hit max_new_tokens."""

    text: str
    tokens: int
    truncated: bool


class Generator(Protocol):
    """A backend: renders chat prompts and samples one completion per rendered prompt; ``tokenizer`` is the
    model's Hugging Face tokenizer (chat template, token counts)."""

    backend: str
    tokenizer: Any
    system: str

    def render(self, task_prompt: str, repairs: Sequence[tuple[str, str]] = ()) -> str: ...

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]: ...


def render_chat(
    tokenizer: Any, task_prompt: str, system_prompt: str = SYSTEM_PROMPT, repairs: Sequence[tuple[str, str]] = ()
) -> str:
    """The exact text the model sees: training's system prompt + task (+ repair turns: previous answer,
    feedback), through the chat template (a model without one: the plain completion prompt, ``render_prompt``)."""
    return render_prompt(tokenizer, chat_messages(task_prompt, system_prompt, repairs))


def token_counter(tokenizer: Any) -> Callable[[str], int]:
    """Count tokens of a text as ``tokenizer`` encodes it (no special tokens added)."""
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def display_name(model: str, adapter: str | None) -> str:
    """Default model label: the base model's last path part, plus the adapter's last two parts."""
    base = Path(model.rstrip("/")).name or model
    if not adapter:
        return base
    return f"{base}+{'/'.join(Path(adapter).resolve().parts[-2:])}"


def decode_generation(tokenizer: Any, ids: Sequence[int], eos_ids: set[int], max_new_tokens: int) -> Generation:
    """One sampled completion from its new token ids: kept up to and including the first end-of-sequence token,
    decoded without special tokens; truncated when it has no end and reached ``max_new_tokens``."""
    ids = list(ids)
    end = end_index(ids, eos_ids)
    kept = ids if end is None else ids[: end + 1]
    return Generation(text=tokenizer.decode(kept, skip_special_tokens=True), tokens=len(kept),
                      truncated=end is None and len(ids) >= max_new_tokens)


class HFGenerator:
    """transformers on a model in memory, by one of ``rust_rewards.eval.decoding``'s engines (default ``grouped``:
    the samples of a prompt share its prefill, finished sequences leave the batch); optional PEFT LoRA adapter
    (merged or not).

    Sampling matches TRL's GRPO defaults (no top-k, repetition penalty 1.0), whatever the model's own
    generation config says. ``stop_at_fence`` (one of ``decoding.FENCE_STOPS``): whether answers end at the closing
    fence of their ```rust block (``auto``: for a model without a chat template).
    """

    backend = "hf"
    system = SYSTEM_PROMPT
    """The system prompt of the answer format asked for (``make_generator(answer_format=...)``)."""

    def __init__(
        self,
        model: str,
        adapter: str | None = None,
        *,
        merge: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str | None = None,
        seed: int = 0,
        engine: str = DEFAULT_ENGINE,
        stop_at_fence: str = "auto",
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cpu":
            keep_freed_memory()  # same tokens, faster sampling (benchmarks/cpu_generation.py)
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        net = AutoModelForCausalLM.from_pretrained(model, dtype=dtype)
        if adapter:
            from peft import PeftModel

            net = PeftModel.from_pretrained(net, adapter)
            if merge:
                net = net.merge_and_unload()
        self.model = net.to(self.device).eval()
        self.batch_size = batch_size
        self.engine = engine
        self.stop = fence_stop(self.tokenizer, stop_at_fence)
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None} or {self.tokenizer.eos_token_id}
        torch.manual_seed(seed)

    def render(self, task_prompt: str, repairs: Sequence[tuple[str, str]] = ()) -> str:
        return render_chat(self.tokenizer, task_prompt, self.system, repairs)

    def generation_config(self, params: SamplingParams) -> Any:
        """``params`` as a transformers ``GenerationConfig`` (TRL's sampling: no top-k, no repetition penalty)."""
        from transformers import GenerationConfig

        sampling = ({"do_sample": False} if params.greedy
                    else {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": 0})
        return GenerationConfig(max_new_tokens=params.max_new_tokens, pad_token_id=self.tokenizer.pad_token_id,
                                eos_token_id=sorted(self.eos_ids), repetition_penalty=1.0, **sampling)

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]:
        """One completion per prompt, in order."""
        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        new = sample_ids(self.model, ids, self.generation_config(params), engine=self.engine,
                         batch_size=self.batch_size, stop=self.stop)
        return [decode_generation(self.tokenizer, row, self.eos_ids, params.max_new_tokens) for row in new]


class VLLMGenerator:
    """vLLM offline engine; a LoRA adapter is served with ``LoRARequest`` (no merge needed)."""

    backend = "vllm"
    system = SYSTEM_PROMPT

    def __init__(
        self, model: str, adapter: str | None = None, *, seed: int = 0, **engine_kwargs: Any
    ) -> None:
        from vllm import LLM

        from rust_rewards.eval.vllm_engine import adapter_rank, cpu_defaults, served_rank

        self.lora = None
        if adapter:
            from vllm.lora.request import LoRARequest

            engine_kwargs.update(enable_lora=True, max_lora_rank=served_rank(adapter_rank(adapter)))
            self.lora = LoRARequest("adapter", 1, str(Path(adapter).resolve()))
        self.llm = LLM(model=model, seed=seed, **{**cpu_defaults(), **engine_kwargs})
        self.tokenizer = self.llm.get_tokenizer()

    def render(self, task_prompt: str, repairs: Sequence[tuple[str, str]] = ()) -> str:
        return render_chat(self.tokenizer, task_prompt, self.system, repairs)

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]:
        from vllm import SamplingParams as VSampling

        sampling = VSampling(
            n=1,
            temperature=0.0 if params.greedy else params.temperature,
            top_p=1.0 if params.greedy else params.top_p,
            max_tokens=params.max_new_tokens,
        )
        outputs = self.llm.generate(list(prompts), sampling, lora_request=self.lora, use_tqdm=False)
        return [
            Generation(text=o.outputs[0].text, tokens=len(o.outputs[0].token_ids),
                       truncated=o.outputs[0].finish_reason == "length")
            for o in outputs
        ]


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def make_generator(
    backend: str, model: str, adapter: str | None = None, *, merge: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE, seed: int = 0, answer_format: str = "solution+tests",
    engine: str = DEFAULT_ENGINE, engine_kwargs: dict[str, Any] | None = None, stop_at_fence: str = "auto",
) -> Generator:
    """Build a backend by name: ``hf`` (always available) or ``vllm`` (needs the package; on CPU vLLM's CPU build),
    prompting for ``answer_format``. A ``.gguf`` ``model`` is read from its converted local folder
    (``rust_rewards.models.gguf``); ``engine_kwargs`` go to vLLM's ``LLM`` (such as ``dtype``); ``stop_at_fence``:
    ``HFGenerator``'s."""
    system = system_prompt(answer_format)
    model = resolve_model(model)
    generator: Generator
    if backend == "hf":
        generator = HFGenerator(model, adapter, merge=merge, batch_size=batch_size, seed=seed, engine=engine,
                                stop_at_fence=stop_at_fence)
    elif backend == "vllm":
        if not vllm_available():
            raise RuntimeError("backend 'vllm' requested but the vllm package is not installed")
        if merge:
            raise ValueError("--merge applies to the hf backend; vLLM serves the LoRA adapter directly")
        generator = VLLMGenerator(model, adapter, seed=seed, **(engine_kwargs or {}))
    else:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    generator.system = system
    return generator


def parts_dir(out: str | Path) -> Path:
    """Where finished chunks of ``out`` wait until the final file is written."""
    out = Path(out)
    return out.with_name(out.name + ".parts")


def read_done(out: str | Path) -> pd.DataFrame:
    """Rows already generated for ``out``: the final file (if any) plus every finished chunk.

    When any row has a ``round``, rows without one (written by a run without repair rounds) are round 0.
    """
    out = Path(out)
    frames = [pd.read_parquet(out)] if out.exists() else []
    frames += [pd.read_parquet(p) for p in sorted(parts_dir(out).glob("chunk_*.parquet"))]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=list(PREDICTION_COLUMNS))
    done = pd.concat(frames, ignore_index=True)
    if "round" in done.columns:
        for column, default in ROUND_DEFAULTS.items():
            done[column] = done[column].fillna(default).astype(type(default))
    return done.drop_duplicates(_row_key(done), keep="first")


def _row_key(rows: pd.DataFrame) -> list[str]:
    return ["task_id", "sample", "round"] if "round" in rows.columns else ["task_id", "sample"]


def check_compatible(done: pd.DataFrame, run: dict[str, Any], out: str | Path) -> None:
    """Refuse to resume into an output written with another model, adapter or sampling setup."""
    for column, value in run.items():
        if done.empty or column not in done.columns:
            continue
        seen = {None if pd.isna(v) else v for v in done[column].unique()}
        if seen != {value}:
            raise ValueError(
                f"{out} already holds rows with {column}={sorted(map(str, seen))}, this run has {value!r}:"
                " choose another --out or delete the old file to start over"
            )


def run_columns(
    params: SamplingParams, *, model: str, base_model: str, adapter: str | None, backend: str,
    answer_format: str = "solution+tests",
) -> dict[str, Any]:
    """The per-run values written on every row (and checked on resume)."""
    sampling = {k: v for k, v in asdict(params).items() if k in RUN_COLUMNS}
    return {"model": model, "base_model": base_model, "adapter": adapter or "", "backend": backend,
            "answer_format": answer_format, **sampling}


def generate_predictions(
    tasks: Sequence[Task],
    generator: Generator,
    params: SamplingParams,
    out: str | Path,
    *,
    model: str,
    base_model: str,
    adapter: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: Callable[[int, int], None] | None = None,
    repair_rounds: int = 0,
    feedback_tokens: int = DEFAULT_MAX_TOKENS,
    verifier: Verifier | None = None,
    answer_format: str = "solution+tests",
) -> pd.DataFrame:
    """Generate ``params.n`` completions per task into ``out`` (parquet) and return every row.

    Resumable: rows already in ``out`` or its parts folder are skipped. ``progress(done, total)`` is called
    after each chunk, counted in generated completions of this run (the total grows as repair rounds find
    answers to repair). ``repair_rounds`` > 0 adds rounds 1..N (see the module docstring), with feedback of at
    most ``feedback_tokens`` tokens of the generator's tokenizer, scored by ``verifier`` (default: the shared one);
    ``answer_format`` (the generator's prompt asks for it) is written on every row, and with ``solution`` the repair
    feedback does not ask for tests.
    """
    if repair_rounds < 0:
        raise ValueError(f"repair_rounds must be >= 0, got {repair_rounds}")
    out = Path(out)
    run = run_columns(params, model=model, base_model=base_model, adapter=adapter, backend=generator.backend,
                      answer_format=answer_format)
    done = read_done(out)
    check_compatible(done, run, out)
    last = int(done["round"].max()) if "round" in done.columns else 0
    if last > repair_rounds:
        raise ValueError(f"{out} already holds repair rounds up to {last}, this run asks for {repair_rounds}:"
                         f" pass --repair-rounds {last} or choose another --out")
    writer = _ChunkWriter(parts_dir(out), repair_rounds, progress)
    have = set(zip(done["task_id"].astype(str), done["sample"].astype(int), strict=True))
    pending = [(t, s, ()) for t in tasks for s in range(params.n) if (t.task_id, s) not in have]
    writer.generate(generator, params, pending, {"round": 0}, run, chunk_size)
    if repair_rounds:
        count = token_counter(generator.tokenizer)
        verifier = verifier or get_verifier()
        for number in range(1, repair_rounds + 1):
            pending = _repairs(tasks, params.n, read_done(out), number, writer, verifier,
                               lambda report: feedback_message(report, feedback_tokens, count,
                                                               tests_asked=asks_for_tests(answer_format)))
            writer.generate(generator, params, pending, {"round": number}, run, chunk_size)
    result = read_done(out)
    order = {t.task_id: i for i, t in enumerate(tasks)}
    result = result.assign(_order=result["task_id"].map(order).fillna(len(order)))
    result = result.sort_values(["_order", *_row_key(result)], kind="stable").drop(columns="_order")
    result = result.reset_index(drop=True)[prediction_columns(repair_rounds)]
    result["sample"] = result["sample"].astype(int)
    write_parquet_atomic(result, out)
    shutil.rmtree(writer.parts, ignore_errors=True)
    return result


Pending = list[tuple[Task, int, tuple[tuple[str, str], ...]]]
"""(task, sample, repair turns) still to generate; the turns are (previous answer, feedback) pairs."""


class _ChunkWriter:
    """Writes finished rows as numbered chunks in the parts folder and reports generation progress."""

    def __init__(self, parts: Path, repair_rounds: int,
                 progress: Callable[[int, int], None] | None) -> None:
        self.parts = parts
        self.number = len(list(parts.glob("chunk_*.parquet"))) if parts.exists() else 0
        self.columns = prediction_columns(repair_rounds)
        self.progress = progress
        self.done = self.total = 0

    def write(self, rows: list[dict[str, Any]]) -> None:
        rows = [{**ROUND_DEFAULTS, **row} for row in rows]
        write_parquet_atomic(pd.DataFrame(rows, columns=self.columns), self.parts / f"chunk_{self.number:05d}.parquet")
        self.number += 1

    def generate(self, generator: Generator, params: SamplingParams, pending: Pending, extra: dict[str, Any],
                 run: dict[str, Any], chunk_size: int) -> None:
        """Generate ``pending`` chunk by chunk; each row gets ``extra`` (its round) and its feedback turn."""
        self.total += len(pending)
        if self.progress:
            self.progress(self.done, self.total)
        rendered: dict[str, str] = {}
        for start in range(0, len(pending), chunk_size):
            chunk = pending[start : start + chunk_size]
            prompts = [rendered.setdefault(t.task_id, generator.render(t.prompt)) if not turns
                       else generator.render(t.prompt, turns) for t, _, turns in chunk]
            began = time.perf_counter()
            gens = generator.generate(prompts, params)
            seconds = (time.perf_counter() - began) / len(chunk)
            stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            self.write([
                {"task_id": t.task_id, "sample": s, **extra, "completion": g.text, "completion_tokens": g.tokens,
                 "truncated": g.truncated, **run, "generated_at": stamp, "gen_seconds": round(seconds, 4),
                 "feedback": turns[-1][1] if turns else ""}
                for (t, s, turns), g in zip(chunk, gens, strict=True)
            ])
            self.done += len(chunk)
            if self.progress:
                self.progress(self.done, self.total)


def _repairs(tasks: Sequence[Task], n: int, done: pd.DataFrame, number: int, writer: _ChunkWriter,
             verifier: Verifier, feedback: Callable[[Report], str | None]) -> Pending:
    """Round ``number``'s work: verify round ``number - 1``'s answers still without a successor; write the ones
    that pass every visible check as carried rows; return the others with their feedback turn."""
    done = done if "round" in done.columns else done.assign(**ROUND_DEFAULTS)
    by_id = {t.task_id: t for t in tasks}
    wanted = {(t.task_id, s) for t in tasks for s in range(n)}
    have = set(zip(done.loc[done["round"] == number, "task_id"], done.loc[done["round"] == number, "sample"],
                   strict=True))
    previous = [row for row in done[done["round"] == number - 1].to_dict("records")
                if (row["task_id"], row["sample"]) in wanted and (row["task_id"], row["sample"]) not in have]
    reports = verifier.verify_many([row["completion"] for row in previous],
                                   hidden=[by_id[row["task_id"]].hidden_tests() for row in previous])
    carried: list[dict[str, Any]] = []
    pending: Pending = []
    for row, report in zip(previous, reports, strict=True):
        message = feedback(report)
        if message is None:
            carried.append({**row, "round": number, "feedback": "", "carried": True, "gen_seconds": 0.0})
        else:
            pending.append((by_id[row["task_id"]], int(row["sample"]), ((row["completion"], message),)))
    if carried:
        writer.write(carried)
    return pending
