"""A tiny Qwen2 model and tokenizer built offline, for tests and CPU smoke runs.

Nothing is downloaded: the tokenizer is a byte-level BPE trained on a Rust + English corpus generated
here, and the model is a randomly initialised ``Qwen2ForCausalLM`` given a short supervised warm start
(``WarmStart``) on the references of the easy tier's first ``TINY_TASKS`` tasks (the tiny preset's training set)
and a few built-in exemplars, so that it answers those prompts with a ```rust block that is sometimes right, sometimes
wrong and sometimes does not build: the groups of the main job see rewards that differ. ``qwen_shape_config`` gives
the exact shape of a real Qwen2.5-Coder model (random weights) for GPU benchmarks without the hub.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import random
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from string import Template
from typing import Any

from rust_rewards.data.bundled import EASY_TASKS
from rust_rewards.data.importers import load_file
from rust_rewards.prompts import SYSTEM_PROMPT, chat_messages
from rust_rewards.tasks import Task
from rust_rewards.train.progress import ProgressLine

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Qwen's special tokens: pad/document end, turn start, turn end (the chat eos)."""

QWEN2_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""The pre-tokenizer split pattern of Qwen2's tokenizer.json."""

def chat_template() -> str:
    """Qwen2.5's chat template as TRL ships it (so TRL recognises it and parses its tool calls); without tools it
    renders exactly the layout the warm start was designed on. Read from TRL's package files without importing
    TRL."""
    spec = importlib.util.find_spec("trl")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("trl is not installed")
    return (Path(spec.submodule_search_locations[0]) / "chat_templates" / "qwen2_5.jinja").read_text()

MARKER = "tiny_model.json"


QWEN_SHAPES: dict[str, dict[str, int]] = {
    "Qwen/Qwen2.5-Coder-1.5B-Instruct": dict(
        hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
        num_attention_heads=12, num_key_value_heads=2,
    ),
    "Qwen/Qwen2.5-Coder-0.5B-Instruct": dict(
        hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2,
    ),
}
"""Published config.json shapes (vocab, rope and tying are shared, see ``qwen_shape_config``)."""

_NAMES = ("sum", "count", "value", "items", "total", "index", "result", "left", "right", "node", "word",
          "text", "key", "map", "list", "score", "grid", "row", "col", "width", "height", "stack",
          "queue", "buffer", "name", "price", "point", "edge", "graph", "path", "cache", "token")
_VERBS = ("compute", "find", "parse", "count", "merge", "sort", "reverse", "filter", "sum", "check",
          "split", "build", "encode", "decode", "max", "min", "rotate", "flatten", "normalize", "is_valid")
_TYPES = ("i32", "i64", "u32", "u64", "usize", "f64", "bool", "char", "String", "&str", "Vec<i32>",
          "&[i32]", "Option<i32>", "Vec<String>", "HashMap<String, usize>", "Result<i64, String>")
_ENGLISH = (
    "Write a function that returns the number of distinct elements in a slice.",
    "Implement a stack with push, pop and peek operations, and handle the empty case.",
    "Given a string, return true if it is a palindrome, ignoring case and punctuation.",
    "Parse a comma separated list of integers and report an error for invalid input.",
    "Return the longest common prefix of a list of words, or an empty string if there is none.",
    "Compute the shortest path in a weighted graph using Dijkstra's algorithm.",
    "The function should not panic on empty input; return None instead.",
    "Merge two sorted vectors into one sorted vector without allocating more than needed.",
    "Count how many times each word appears in the text and return the counts in a map.",
    "Use only the standard library. Include unit tests that check edge cases.",
)


_SYLLABLES = ("ar", "be", "ca", "do", "el", "fi", "go", "ha", "in", "ju", "ke", "lo", "ma", "ne", "or",
              "pu", "qu", "ri", "st", "ta", "un", "ve", "wi", "xy", "ze", "th", "ch", "sh", "er", "ing")


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4)))


_BODIES = (
    """    let mut $noun = 0;
    for x in input.iter() {
        $noun += *x;
    }
    $noun
""",
    """    input.iter().filter(|x| **x > $a).map(|x| x * $b).sum()
""",
    """    match input {
        Some(v) if v > $a => v - $b,
        Some(v) => v,
        None => 0,
    }
""",
    """    let mut out = Vec::with_capacity(input.len());
    for (i, c) in input.chars().enumerate() {
        if i % $a == 0 {
            out.push(c.to_ascii_uppercase());
        }
    }
    out.into_iter().collect()
""",
    """    if input.is_empty() {
        return Err(String::from("empty input"));
    }
    input.trim().parse::<i64>().map_err(|e| e.to_string())
""",
    """    let mut $noun: HashMap<String, usize> = HashMap::new();
    for w in input.split_whitespace() {
        *$noun.entry(w.to_string()).or_insert(0) += 1;
    }
    $noun
""",
)
_EXTRAS = (
    """#[derive(Debug, Clone, PartialEq)]
pub struct $Struct {
    pub $noun: $ret,
    pub len: usize,
}

""",
    """pub enum $Struct {
    Empty,
    One($arg),
    Many(Vec<$arg>),
}

""",
    """impl $Struct {
    pub fn new() -> Self {
        Self::default()
    }
}

""",
    "",
)
_SNIPPET = Template("""use std::collections::HashMap;

$extra/// $doc
pub fn $fn(input: $arg) -> $ret {
$body}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_$fn() {
        assert_eq!($fn($a), $b);
        assert!($fn(vec![$a, $b]).is_empty());
        assert_ne!($fn("$noun"), None);
    }
}
""")


def _rust_snippet(rng: random.Random) -> str:
    """One plausible Rust item with a test module (varied names, types and bodies)."""
    fields = {
        "noun": rng.choice((*_NAMES, _word(rng))),
        "Struct": rng.choice(_NAMES).capitalize(),
        "arg": rng.choice(_TYPES),
        "ret": rng.choice(_TYPES),
        "a": str(rng.randint(1, 99)),
        "b": str(rng.randint(0, 99)),
        "doc": rng.choice(_ENGLISH),
    }
    fields["fn"] = f"{rng.choice(_VERBS)}_{fields['noun']}"
    fields["body"] = Template(rng.choice(_BODIES)).substitute(fields)
    fields["extra"] = Template(rng.choice(_EXTRAS)).substitute(fields)
    return _SNIPPET.substitute(fields)


def tokenizer_corpus(n_snippets: int = 3000) -> Iterator[str]:
    """The generated training text: the system prompt, English task phrasing and Rust snippets."""
    rng = random.Random(1234)
    for _ in range(20):
        yield SYSTEM_PROMPT
    for _ in range(50):
        yield " ".join(rng.sample(_ENGLISH, k=4))
    for _ in range(2000):
        yield " ".join(_word(rng) for _ in range(12))
    for _ in range(n_snippets):
        yield f"```rust\n{_rust_snippet(rng)}```"


def train_tokenizer(vocab_size: int):
    """A byte-level BPE with Qwen2's pre-tokenization, wrapped for ``transformers``."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(tokenizer_corpus(), trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        model_max_length=32768,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    wrapped.chat_template = chat_template()
    return wrapped


@dataclass(frozen=True)
class Exemplar:
    """A short program that compiles, passes clippy and passes its one test, with prompts asking for it."""

    name: str
    code: str
    assertion: str
    prompts: tuple[str, ...]


BUILTIN_EXEMPLARS = (
    Exemplar("add", "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}", "assert_eq!(add(2, 3), 5);",
             ("Write `pub fn add(a: i32, b: i32) -> i32` that returns the sum of a and b.", "Add two numbers.")),
    Exemplar("square", "pub fn square(x: i64) -> i64 {\n    x * x\n}", "assert_eq!(square(-4), 16);",
             ("Write `pub fn square(x: i64) -> i64` that returns x squared.", "Square a number.")),
    Exemplar("is_upper", "pub fn is_upper(c: char) -> bool {\n    c.is_ascii_uppercase()\n}", "assert!(is_upper('Q'));",
             ("Write `pub fn is_upper(c: char) -> bool`.", "Check whether a letter is upper case.")),
    Exemplar("max_of", "pub fn max_of(v: &[i32]) -> Option<i32> {\n    v.iter().copied().max()\n}",
             "assert_eq!(max_of(&[1, 5, 3]), Some(5));",
             ("Write `pub fn max_of(v: &[i32]) -> Option<i32>` that returns the largest element.",
              "Find the maximum of a slice.")),
    Exemplar("reverse", "pub fn reverse(s: &str) -> String {\n    s.chars().rev().collect()\n}",
             'assert_eq!(reverse("abc"), "cba");',
             ("Write `pub fn reverse(s: &str) -> String`.", "Reverse a string.")),
    Exemplar("count_vowels",
             'pub fn count_vowels(s: &str) -> usize {\n    s.chars().filter(|c| "aeiou".contains(*c)).count()\n}',
             'assert_eq!(count_vowels("rust"), 1);',
             ("Write `pub fn count_vowels(s: &str) -> usize`.", "Count the vowels in a string.")),
)
"""Built-in warm-start answers, used with or without the starter tasks."""

TINY_TASKS = 12
"""The easy tier's first tasks the tiny model is warm-started on and the tiny preset trains on: a 0.4M model recalls
12 answers in part (on 8 samples at temperature 1.0 every group's rewards differed, 50 of 96 answers passed), where
the 56 of the whole tier left it writing code that never built."""

MAX_EXEMPLAR_CHARS = 330
"""A starter task's reference solution becomes a warm-start answer when the whole answer fits in this many
characters (about 110 tokens of the tiny tokenizer: complete within a 128-token completion)."""

_FIRST_FN = re.compile(r"^pub fn (\w+)", re.MULTILINE)


@dataclass(frozen=True)
class WarmStart:
    """The supervised warm start: next-token loss on (chat prompt -> short ```rust answer) pairs.

    The pairs are ``warm_start_pairs``': the built-in exemplars and the starter tasks' own references. Loss is on the
    answer tokens only; AdamW with linear warmup then cosine decay. ``threads`` caps torch's CPU threads during the
    warm start (restored afterwards); the weights are the same from build to build for one thread count, not across
    counts (400 steps take 27 s on 2 threads of a 2-core AMD EPYC).
    """

    steps: int = 400
    batch_size: int = 8
    lr: float = 1e-2
    warmup_steps: int = 20
    threads: int = 2
    tool_calls: float = 0.0
    """Share of the pairs also taught in the feedback-turn format (``tool_pairs``); 0 for the default model."""


def answer_block(code: str, name: str | None = None, assertion: str | None = None) -> str:
    """A fenced ```rust answer: the solution, then (with an assertion) a one-test ``mod tests``."""
    code = code.strip("\n")
    if assertion is None:
        return f"```rust\n{code}\n```"
    tests = (f"#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    #[test]\n    fn test_{name}() {{\n"
             f"        {assertion}\n    }}\n}}")
    return f"```rust\n{code}\n\n{tests}\n```"


def _task_exemplar(task: Task) -> str | None:
    """The task's reference solution with its first one-line assertion as a test, if short enough."""
    match = _FIRST_FN.search(task.reference_code)
    if task.test_shape not in ("unit", "main") or match is None:
        return None
    name = match.group(1)
    assertions = [line.strip() for line in task.reference_tests.splitlines()
                  if line.strip().startswith("assert") and line.strip().endswith(";") and f"{name}(" in line]
    if not assertions:
        return None
    answer = answer_block(task.reference_code, name, assertions[0])
    return answer if len(answer) <= MAX_EXEMPLAR_CHARS else None


def warm_start_pairs(tasks_path: str | os.PathLike[str] | None = EASY_TASKS, seed: int = 0,
                     limit: int | None = TINY_TASKS) -> list[tuple[str, str]]:
    """The (task prompt, answer) pairs of the warm start.

    Answers: each built-in exemplar with and without its test module, and the reference of each of the first
    ``limit`` tasks (None: all) of ``tasks_path`` that fits ``MAX_EXEMPLAR_CHARS`` (with one of its own assertions as
    a test).
    Prompts: the exemplars' own prompts (also lengthened with English filler, so long prompts are seen), and each of
    those tasks' prompts with its own answer, or a seeded random exemplar when its reference is too long.
    ``tasks_path=None``, or the default file missing, leaves the built-in pairs only; any other task file must exist.
    """
    rng = random.Random(seed)
    absent = tasks_path is None or Path(tasks_path) == EASY_TASKS and not EASY_TASKS.is_file()
    tasks = [] if absent else load_file(tasks_path)[:limit]
    pairs: list[tuple[str, str]] = []
    for ex in BUILTIN_EXEMPLARS:
        filler = " ".join(rng.sample(_ENGLISH, k=6))
        for prompt in (*ex.prompts, f"{ex.prompts[0]} {filler}"):
            pairs += [(prompt, answer_block(ex.code, ex.name, ex.assertion)), (prompt, answer_block(ex.code))]
    answers = [answer for _, answer in pairs]
    own = {t.task_id: a for t in tasks if (a := _task_exemplar(t)) is not None}
    pairs += [(t.prompt, own.get(t.task_id) or rng.choice(answers)) for t in tasks]
    return pairs


TINY_DRAFT = "pub fn draft() {}"
"""The one draft the tiny model learns to send to ``cargo_check``: short, unlike any answer, so that a 0.4M-parameter
model emits a well-formed tool call; it exercises the mechanics, not the model's use of feedback."""


def tool_pairs(pairs: list[tuple[str, str]], share: float, seed: int = 0) -> list[tuple[list[dict], str]]:
    """Feedback-turn pairs: chat messages rendered with the ``cargo_check`` tool -> answer, for the built-in
    exemplars' prompts and a seeded ``share`` of the other prompts (each with a random built-in exemplar).

    The first turn calls the tool with ``TINY_DRAFT``; after the tool's real answer for that draft ("no #[test]
    function found") the model answers with the exemplar's code and its test. The system prompt is the
    feedback-turn one.
    """
    from rust_rewards.prompts import FEEDBACK_INSTRUCTIONS, SYSTEM_PROMPT
    from rust_rewards.report import Report
    from rust_rewards.rewards.cargo_tool import TOOL_NAME, tool_answer

    rng = random.Random(seed + 1)
    feedback = tool_answer(Report(has_code=True, build_ok=True, clippy_ok=True))
    builtin = {prompt: ex for ex in BUILTIN_EXEMPLARS for prompt in ex.prompts}
    prompts = list(dict.fromkeys([*builtin, *(p for p, _ in pairs if p not in builtin and rng.random() < share)]))
    out: list[tuple[list[dict], str]] = []
    for prompt in prompts:
        ex = builtin.get(prompt) or rng.choice(BUILTIN_EXEMPLARS)
        messages = chat_messages(prompt, SYSTEM_PROMPT + FEEDBACK_INSTRUCTIONS)
        call = {"type": "function", "function": {"name": TOOL_NAME, "arguments": {"code": TINY_DRAFT}}}
        out.append((messages, f"<tool_call>\n{json.dumps(call['function'])}\n</tool_call>"))
        out.append(([*messages, {"role": "assistant", "content": "", "tool_calls": [call]},
                     {"role": "tool", "name": TOOL_NAME, "content": feedback}],
                    answer_block(ex.code, ex.name, ex.assertion)))
    return out


def _corpus_hash(pairs: list) -> str:
    return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()[:16]


def _length_batches(lengths: list[int], batch_size: int, rng: random.Random) -> Iterator[list[int]]:
    """Endless batches of indices: every epoch, items sorted by length (ties shuffled) are cut into
    batches, which are served in random order (little padding, every item once per epoch)."""
    while True:
        order = sorted(rng.sample(range(len(lengths)), len(lengths)), key=lengths.__getitem__)
        batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
        rng.shuffle(batches)
        yield from batches


def _batch(tokenized: list[tuple[list[int], list[int]]], pad_id: int):
    """Left-padded prompt prefixes and right-padded (last prompt token + answer) tails, with labels."""
    import torch

    n = len(tokenized)
    width = max(len(p) for p, _ in tokenized) - 1
    length = max(len(a) for _, a in tokenized) + 1
    prefix = torch.full((n, width), pad_id)
    tail = torch.full((n, length), pad_id)
    mask = torch.zeros((n, width + length), dtype=torch.long)
    labels = torch.full((n, length), -100)
    for i, (prompt, answer) in enumerate(tokenized):
        prefix[i, width - len(prompt) + 1:] = torch.tensor(prompt[:-1])
        tail[i, :len(answer) + 1] = torch.tensor([prompt[-1], *answer])
        mask[i, width - len(prompt) + 1:width + len(answer) + 1] = 1
        labels[i, :len(answer)] = torch.tensor(answer)
    return prefix, tail, mask, labels


def train_warm_start(model, tokenizer, pairs: list[tuple[str, str]], config: WarmStart, seed: int,
                     tools: list[tuple[list[dict], str]] = (),
                     on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """Train ``model`` in place on ``pairs`` (and the feedback-turn ``tools`` pairs, rendered with the
    ``cargo_check`` tool); return the loss of every step, also given to ``on_step(step, loss)`` as it is done.

    Only the answer tokens carry loss, and the prompt prefix runs without gradient (its keys and values
    come from a no-grad pass): most tokens are prompt, so this roughly halves the cost of a step.
    """
    import torch
    from transformers import DynamicCache

    from rust_rewards.sampling.decoding import cache_kwargs

    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    tokenized = [
        (tokenizer.apply_chat_template(chat_messages(prompt), add_generation_prompt=True, tokenize=True,
                                       return_dict=True)["input_ids"],
         tokenizer(answer, add_special_tokens=False).input_ids + [eos])
        for prompt, answer in pairs
    ]
    if tools:
        from rust_rewards.rewards.cargo_tool import cargo_check

        tokenized += [
            (tokenizer.apply_chat_template(messages, tools=[cargo_check], add_generation_prompt=True, tokenize=True,
                                           return_dict=True)["input_ids"],
             tokenizer(answer, add_special_tokens=False).input_ids + [eos])
            for messages, answer in tools
        ]
    batches = _length_batches([len(p) for p, _ in tokenized], config.batch_size, random.Random(seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)

    def schedule(step: int) -> float:
        return min(1.0, (step + 1) / config.warmup_steps) * 0.5 * (1 + math.cos(math.pi * step / config.steps))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    losses: list[float] = []
    model.train()
    for _ in range(config.steps):
        prefix, tail, mask, labels = _batch([tokenized[i] for i in next(batches)], tokenizer.pad_token_id)
        cache = DynamicCache()
        with torch.no_grad():
            model.model(input_ids=prefix, attention_mask=mask[:, :prefix.shape[1]], use_cache=True,
                        **cache_kwargs(cache))
        hidden = model.model(input_ids=tail, attention_mask=mask, **cache_kwargs(cache)).last_hidden_state
        keep = labels != -100
        loss = torch.nn.functional.cross_entropy(model.lm_head(hidden[keep]), labels[keep])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if on_step is not None:
            on_step(len(losses), losses[-1])
    model.eval()
    return losses


def _params(hidden_size: int, num_layers: int, vocab_size: int, seed: int,
            warm_start: WarmStart | None, pairs: list[tuple[str, str]],
            tools: list[tuple[list[dict], str]]) -> dict[str, Any]:
    """The marker's content: the shape, the seed and the warm start with a hash of its corpus (the feedback-turn
    fields only when it has any, so that models built before they existed stay valid)."""
    warm = None if warm_start is None else {**asdict(warm_start), "corpus": _corpus_hash(pairs), "pairs": len(pairs)}
    if warm is not None and not warm_start.tool_calls:
        del warm["tool_calls"]
    elif warm is not None:
        warm |= {"tool_corpus": _corpus_hash(tools), "tool_pairs": len(tools)}
    return {"hidden_size": hidden_size, "num_layers": num_layers, "vocab_size": vocab_size, "seed": seed,
            "warm_start": warm}


def _is_complete(out_dir: Path, params: dict[str, Any]) -> bool:
    marker = out_dir / MARKER
    try:
        return json.loads(marker.read_text()) == params
    except (OSError, ValueError):
        return False


PROGRESS_LINES = 8
"""Warm-start steps a build reports (evenly spaced, the last one included), between its first and last line; a
slower build also speaks at least every ``progress.EVERY`` seconds."""


def warm_start_reporter(progress: ProgressLine) -> Callable[[int, float], None]:
    """``on_step`` for ``train_warm_start``: a line every ``steps / PROGRESS_LINES`` steps (and when one is due)."""
    every = max(1, math.ceil(progress.total / PROGRESS_LINES))

    def report(step: int, loss: float) -> None:
        progress.update(step, f"loss {loss:.2f}", say=True if step % every == 0 or step == progress.total else None)

    return report


def build_tiny_model(
    out_dir: str | os.PathLike[str],
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    vocab_size: int = 4096,
    seed: int = 0,
    warm_start: WarmStart | None = WarmStart(),
    tasks_path: str | os.PathLike[str] | None = EASY_TASKS,
    task_limit: int | None = TINY_TASKS,
) -> Path:
    """Build (or reuse) a tiny Qwen2 causal LM and its tokenizer in ``out_dir``.

    ``warm_start`` (None: keep the random init) runs on ``warm_start_pairs(tasks_path, seed, task_limit)``.
    The result loads with ``AutoModelForCausalLM.from_pretrained(out_dir)`` and
    ``AutoTokenizer.from_pretrained(out_dir)``. A complete build with the same parameters and warm-start
    corpus is reused; otherwise the model is built in a temporary sibling directory and moved into place.
    Deterministic for a seed on one machine; torch's global RNG and thread count are left as found. A build says
    what it does in a few lines (``PROGRESS_LINES`` of the warm start); a reuse says nothing.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    pairs = warm_start_pairs(tasks_path, seed, task_limit) if warm_start is not None else []
    tools = tool_pairs(pairs, warm_start.tool_calls, seed) if warm_start is not None and warm_start.tool_calls else []
    params = _params(hidden_size, num_layers, vocab_size, seed, warm_start, pairs, tools)
    if _is_complete(out, params):
        return out
    if hidden_size % 8:
        raise ValueError(f"hidden_size must be a multiple of 8 (4 heads of even size), got {hidden_size}")
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise FileExistsError(f"{out} is not empty and holds no {MARKER}: refusing to overwrite it")

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    threads = torch.get_num_threads()
    steps = warm_start.steps if warm_start is not None else 0
    print(f"building the tiny model in {out} (once; up to a few minutes on CPU): tokenizer, then {steps} warm-start "
          "steps", flush=True)
    progress = ProgressLine(f"building the tiny model in {out}, warm start", steps, "steps", note="tokenizer")
    try:
        progress.start()
        tokenizer = train_tokenizer(vocab_size)
        ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
        config = Qwen2Config(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            intermediate_size=hidden_size * 4,
            num_hidden_layers=num_layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32768,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
            bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"],
            pad_token_id=ids["<|endoftext|>"],
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Qwen2ForCausalLM(config)
            if warm_start is not None:
                torch.set_num_threads(max(1, min(warm_start.threads, os.cpu_count() or 1)))
                train_warm_start(model, tokenizer, pairs, warm_start, seed, tools, warm_start_reporter(progress))
        model.generation_config = GenerationConfig(
            bos_token_id=ids["<|endoftext|>"],
            eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
            pad_token_id=ids["<|endoftext|>"],
        )
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / MARKER).write_text(json.dumps(params))
        tmp.chmod(0o755)
        if out.exists() and not _is_complete(out, params):
            shutil.rmtree(out)
        try:
            os.replace(tmp, out)
        except OSError:
            if not _is_complete(out, params):
                raise
    finally:
        progress.stop()
        torch.set_num_threads(threads)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"tiny model ready in {out}", flush=True)
    return out


def qwen_shape_config(name: str = "Qwen/Qwen2.5-Coder-1.5B-Instruct"):
    """A ``Qwen2Config`` with the exact shape of a published Qwen2.5-Coder model, built locally.

    For GPU benchmarks with random weights (``Qwen2ForCausalLM(qwen_shape_config())``); no download.
    """
    from transformers import Qwen2Config

    if name not in QWEN_SHAPES:
        raise ValueError(f"unknown model {name!r}; known shapes: {sorted(QWEN_SHAPES)}")
    return Qwen2Config(
        **QWEN_SHAPES[name],
        vocab_size=151936,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        rms_norm_eps=1e-6,
        hidden_act="silu",
        use_sliding_window=False,
        bos_token_id=151643,
        eos_token_id=151645,
        dtype="bfloat16",
    )
