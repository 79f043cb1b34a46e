"""A tiny random-init Qwen2 model and tokenizer built offline, for tests and CPU smoke runs.

Nothing is downloaded: the tokenizer is a byte-level BPE trained on a Rust + English corpus generated
here, and the model is a randomly initialised ``Qwen2ForCausalLM``. ``qwen_shape_config`` gives the
exact shape of a real Qwen2.5-Coder model (random weights) for GPU benchmarks without the hub.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from string import Template

from rust_rewards.prompts import SYSTEM_PROMPT

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Qwen's special tokens: pad/document end, turn start, turn end (the chat eos)."""

QWEN2_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""The pre-tokenizer split pattern of Qwen2's tokenizer.json."""

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if loop.first and message['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""Qwen2.5's chat layout without the tool-calling branches."""

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
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def _params(hidden_size: int, num_layers: int, vocab_size: int, seed: int) -> dict[str, int]:
    return {"hidden_size": hidden_size, "num_layers": num_layers, "vocab_size": vocab_size, "seed": seed}


def _is_complete(out_dir: Path, params: dict[str, int]) -> bool:
    marker = out_dir / MARKER
    try:
        return json.loads(marker.read_text()) == params
    except (OSError, ValueError):
        return False


def build_tiny_model(
    out_dir: str | os.PathLike[str],
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    vocab_size: int = 4096,
    seed: int = 0,
) -> Path:
    """Build (or reuse) a random-init Qwen2 causal LM and its tokenizer in ``out_dir``.

    The result loads with ``AutoModelForCausalLM.from_pretrained(out_dir)`` and
    ``AutoTokenizer.from_pretrained(out_dir)``. A complete build with the same parameters is
    reused; otherwise the model is built in a temporary sibling directory and moved into place.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    params = _params(hidden_size, num_layers, vocab_size, seed)
    if _is_complete(out, params):
        return out
    if hidden_size % 8:
        raise ValueError(f"hidden_size must be a multiple of 8 (4 heads of even size), got {hidden_size}")
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise FileExistsError(f"{out} is not empty and holds no {MARKER}: refusing to overwrite it")

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
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
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
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
        shutil.rmtree(tmp, ignore_errors=True)
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
