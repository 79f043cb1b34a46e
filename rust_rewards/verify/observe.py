"""What hidden tests' assertions compare, written out of the test process and judged outside it.

A test process runs the model's code, which can write any memory of it (safe Rust has soundness holes): a sealed
test's pass can be forged by skipping the assertion that fails. So each assertion of the hidden tests also writes
what it compares, ``Debug``-printed, to the process's stdout before it compares (``observe_assertions``): both sides
of ``assert_eq!`` and ``assert_ne!``, the condition of ``assert!``. The verifier runs the same tests against the
task's reference in a process of its own (three times: only tests whose notes agree between runs are judged this
way) and a hidden test passes only when its process passed it *and* its notes equal the reference's
(``harness.run_tests``). A forged pass then needs a note stream holding the right values: the values an assertion
compares leave the process before the comparison can be skipped, and the expected ones are not the model's to know.

Not judged this way (the sealed verdict alone): tasks without a reference, tests whose notes differ between the
reference's own runs (time, randomness), tasks whose tests or reference use ``HashMap``/``HashSet`` (their
``Debug`` order differs from process to process), and values without ``Debug`` (noted as empty: their order is
still compared). A note of ``assert!`` is the condition's value only: a forgery that makes a condition true
is caught only where another assertion notes the value it came from.
"""

from __future__ import annotations

import re
import secrets

from rust_rewards.rust.lexer import tokenize

_RENAMED = {"assert": "__rr_assert", "assert_eq": "__rr_assert_eq", "assert_ne": "__rr_assert_ne"}

_PREAMBLE = (
    "macro_rules! __rr_note {{ ($v:expr) => {{{{ "
    "struct __RrN<'a, T: ?Sized>(&'a T); "
    "trait __RrD {{ fn __rr_text(&self) -> ::std::string::String; }} "
    "impl<T: ::core::fmt::Debug + ?Sized> __RrD for __RrN<'_, T> {{ "
    "fn __rr_text(&self) -> ::std::string::String {{ ::std::format!(\"{{:?}}\", self.0) }} }} "
    "trait __RrO {{ fn __rr_text(&self) -> ::std::string::String; }} "
    "impl<T: ?Sized> __RrO for &__RrN<'_, T> {{ "
    "fn __rr_text(&self) -> ::std::string::String {{ ::std::string::String::new() }} }} "
    "let mut __rr_v: ::std::vec::Vec<u8> = ::std::string::ToString::to_string(&{tag}u128).into_bytes(); "
    "__rr_v.insert(0, 10); __rr_v.push(58); "
    "for __rr_b in (&__RrN($v)).__rr_text().bytes() {{ "
    "__rr_v.push(b\"0123456789abcdef\"[(__rr_b >> 4) as usize]); "
    "__rr_v.push(b\"0123456789abcdef\"[(__rr_b & 15) as usize]); }} "
    "__rr_v.push(10); let _ = ::std::io::Write::write_all(&mut ::std::io::stdout(), &__rr_v); }}}} }} "
    "macro_rules! __rr_assert {{ ($c:expr $(,)?) => {{{{ let __rr_c: bool = $c; __rr_note!(&__rr_c); "
    "::core::assert!(__rr_c); }}}}; ($c:expr, $($a:tt)+) => {{{{ let __rr_c: bool = $c; __rr_note!(&__rr_c); "
    "::core::assert!(__rr_c, $($a)+); }}}}; }} "
    + " ".join(
        f"macro_rules! __rr_{name} {{{{ ($l:expr, $r:expr $(,)?) => {{{{ match (&$l, &$r) {{{{ (__rr_l, __rr_r) => "
        f"{{{{ __rr_note!(__rr_l); __rr_note!(__rr_r); ::core::{name}!(__rr_l, __rr_r); }}}} }}}} }}}}; "
        f"($l:expr, $r:expr, $($a:tt)+) => {{{{ match (&$l, &$r) {{{{ (__rr_l, __rr_r) => "
        f"{{{{ __rr_note!(__rr_l); __rr_note!(__rr_r); ::core::{name}!(__rr_l, __rr_r, $($a)+); }}}} }}}} }}}}; }}}}"
        for name in ("assert_eq", "assert_ne"))
    + " "
)
"""One line: the note macro (``Debug`` when the value has it, else empty; hex, after a tag line start) and the three
assertion macros that note, then assert with core's own."""

_UNSTABLE = re.compile(r"\b(?:HashMap|HashSet|RandomState)\b")


def observable(tests: str, reference: str) -> bool:
    """Whether hidden ``tests`` run against ``reference`` can be judged by their notes: a reference there, and no hash
    collection whose ``Debug`` order changes from process to process."""
    return bool(reference.strip()) and not _UNSTABLE.search(tests) and not _UNSTABLE.search(reference)


def observe_assertions(source: str) -> tuple[str, str]:
    """``source`` whose ``assert!``, ``assert_eq!`` and ``assert_ne!`` calls note what they compare, with the note
    macros on its first line (after any inner attributes; line numbers stay), and the notes' tag.

    >>> code, tag = observe_assertions("#[test]\\nfn t() { assert_eq!(f(), 2); core::assert!(true); }")
    >>> code.splitlines()[1], tag in code.splitlines()[0]
    ('fn t() { __rr_assert_eq!(f(), 2); core::assert!(true); }', True)
    """
    tag = str(secrets.randbits(128) | 1 << 127)
    tokens = tokenize(source)
    at = 0
    while at + 1 < len(tokens) and tokens[at].text == "#" and tokens[at + 1].text == "!":
        depth, j = 0, at + 2
        while j < len(tokens):
            depth += tokens[j].text == "["
            depth -= tokens[j].text == "]"
            if depth == 0:
                break
            j += 1
        at = j + 1
    insert = tokens[at].start if at < len(tokens) else len(source)
    edits = [(tok.start, tok.end, _RENAMED[tok.text]) for i, tok in enumerate(tokens[:-1])
             if tok.kind == "ident" and tok.text in _RENAMED and tokens[i + 1].text == "!"
             and (i == 0 or tokens[i - 1].text != "::")]
    for start, end, name in reversed(edits):
        source = source[:start] + name + source[end:]
    return source[:insert] + _PREAMBLE.format(tag=tag) + source[insert:], tag


def notes_in(stdout: str, tag: str) -> tuple[str, ...]:
    """The notes tagged ``tag`` in a test process's stdout, in order (hex, as written).

    >>> notes_in("x\\n7:74727565\\n\\n7:\\ny", "7")
    ('74727565', '')
    """
    return tuple(re.findall(rf"(?<=\n){re.escape(tag)}:([0-9a-f]*)(?=\n)", stdout)) if tag else ()


def without_notes(stdout: str, tag: str) -> str:
    """``stdout`` with the notes tagged ``tag`` removed (what the model may be shown of its tests' output)."""
    return re.sub(rf"\n{re.escape(tag)}:[0-9a-f]*(?=\n)", "", stdout) if tag else stdout
