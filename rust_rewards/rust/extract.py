"""Pull the Rust code out of a model completion.

Rule: the code is the concatenation, in order, of every fenced block tagged ``rust`` or ``rs`` (any case),
separated by blank lines; models often put the solution and its tests in separate blocks. Prose outside
fences and untagged or other-language blocks are never compiled. A final fence left open by a truncated
generation counts up to the end of the text. A completion with no Rust block has no code.
"""

from __future__ import annotations

import re
from typing import Any

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([A-Za-z0-9_+-]*)[^\n]*$", re.MULTILINE)
_RUST_TAGS = frozenset({"rust", "rs"})


def completion_text(completion: Any) -> str:
    """The answer of a completion: a plain string, or the last assistant turn of TRL's conversational message list
    (with tool calls the list also holds the drafts sent to the tool and the tool's answers: only the final
    answer is scored).

    >>> completion_text([{"role": "assistant", "content": "hi"}])
    'hi'
    >>> completion_text([{"role": "assistant", "content": "", "tool_calls": [{}]}, {"role": "tool", "content": "ok"},
    ...                  {"role": "assistant", "content": "final"}])
    'final'
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, (list, tuple)):
        turns = [m for m in completion if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
        return completion_text(turns[-1]) if turns else ""
    return str(completion)


def _blocks(text: str) -> list[tuple[str, int, int, bool]]:
    """Each fenced block of ``text``: (tag, body start, body end, closed); a final open fence runs to the end."""
    blocks: list[tuple[str, int, int, bool]] = []
    pos = 0
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            return blocks
        fence, tag = opening.group(1), opening.group(2).lower()
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        end = closing.search(text, opening.end())
        blocks.append((tag, opening.end() + 1, end.start() if end else len(text), end is not None))
        if end is None:
            return blocks
        pos = end.end()


def rust_block_closed(completion: Any) -> bool:
    """Whether a completion holds a closed ```rust block: where the answer's code ends, so generation may stop
    there (a model that never emits its end token would write on to the length limit).

    >>> rust_block_closed("Here:\\n```rust\\nfn a() {}\\n```"), rust_block_closed("```rust\\nfn a() {}\\n``")
    (True, False)
    >>> rust_block_closed("```text\\nhi\\n```\\n```rust\\nfn a() {}\\n")
    False
    """
    return any(tag in _RUST_TAGS and closed for tag, _, _, closed in _blocks(completion_text(completion)))


def extract_rust(completion: Any) -> str:
    """The Rust code in a completion ("" when there is no ```rust block).

    >>> extract_rust("Here:\\n```rust\\nfn a() {}\\n```\\nand tests\\n```rs\\nfn b() {}\\n```")
    'fn a() {}\\n\\nfn b() {}'
    >>> extract_rust("fn a() {}")
    ''
    """
    text = completion_text(completion)
    blocks = [text[start:end].strip("\n") for tag, start, end, _ in _blocks(text) if tag in _RUST_TAGS]
    return "\n\n".join(b for b in blocks if b.strip())
