"""What hidden tests' assertions compare, written out of the test process as std values and judged outside it.

A test process runs the model's code, which can write any memory of it (safe Rust has soundness holes): a sealed
test's pass can be forged by skipping the assertion that fails. So each assertion of the hidden tests also writes
what it compares to the process's stdout before it compares (``observe_assertions``): both sides of ``assert_eq!``
(and of an ``assert!`` whose condition is one ``==``), whether the two sides of ``assert_ne!`` (or one ``!=``)
differ, the condition of ``assert!``. The verifier runs the same tests against the task's reference in a process of
its own (three times) and a hidden test passes only when its process passed it *and* its notes equal the
reference's (``harness.run_tests``).

**Notes are std values, printed by our code.** A value is noted through a trait of the verifier's (``NOTE_MODULE``)
implemented only for std types (numbers, ``bool``, ``char``, strings, ``Option``, ``Result``, tuples, sequences,
maps, sets, ``Box``/``Rc``/``Arc``/``Cow``, ranges, ``Ordering``, ``Duration`` and a few std errors), so that two
values equal by ``==`` get the same note: ``-0.0`` is noted as ``0.0``, maps and sets in the sorted order of their
entries' notes, a ``Vec``, a slice and an array alike, ``String`` and ``&str`` alike. Private field names, field
order and ``Debug`` impls of the solution's types never reach a note: a value of a type the solution defines (or
of a raw pointer, a closure) is noted as ``OPAQUE``, and the comparison of such values is the seal's word alone.
The shipped task sets compare only std values (``python -m rust_rewards notes`` counts them; the task checks keep
it so). A note of ``assert!`` is the condition's value only.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from rust_rewards.rust.lexer import _bracket_pairs, comma_ranges, tokenize

OPAQUE = "x"
"""The note of a value that is not a std value (a type of the solution's, a pointer): not hex, so no value's note."""

_RENAMED = {"assert": "__rr_assert", "assert_eq": "__rr_assert_eq", "assert_ne": "__rr_assert_ne"}
_SPLIT = {"==": "__rr_assert_eq", "!=": "__rr_assert_ne"}
"""``assert!(a == b)`` and ``assert!(a != b)`` note as ``assert_eq!`` and ``assert_ne!`` do."""
_NOT_SPLIT = frozenset({"&&", "||", "..", "..=", "=", "|", "if", "match", "let", "return", "break", "move", "as"})
"""Tokens at a condition's top level that make it more than one comparison (or leave its reading unsure)."""

_NOTE_RUST = r"""
#[allow(dead_code, unused_imports, unused_macros, non_camel_case_types, clippy::all)]
mod __MODULE__ {
    use ::std::fmt::Write as _;
    use ::std::option::Option;
    use ::std::string::String;
    use ::std::vec::Vec;
    pub trait N { #[inline] fn n(&self, o: &mut String); }
    pub struct W<'a, T: ?Sized>(pub &'a T);
    pub trait S { fn t(&self) -> Option<String>; }
    impl<T: N + ?Sized> S for W<'_, T> {
        fn t(&self) -> Option<String> { let mut o = String::new(); self.0.n(&mut o); Option::Some(o) }
    }
    pub trait O { fn t(&self) -> Option<String>; }
    impl<T: ?Sized> O for &W<'_, T> { fn t(&self) -> Option<String> { Option::None } }
    pub fn put(t: Option<String>) {
        let mut v: Vec<u8> = ::std::string::ToString::to_string(&__TAG__u128).into_bytes();
        v.insert(0, 10); v.push(58);
        match t {
            Option::Some(s) => for b in s.bytes() {
                v.push(b"0123456789abcdef"[(b >> 4) as usize]); v.push(b"0123456789abcdef"[(b & 15) as usize]);
            },
            Option::None => v.push(b'__OPAQUE__'),
        }
        v.push(10); let _ = ::std::io::Write::write_all(&mut ::std::io::stdout(), &v);
    }
    fn one<T: N + ?Sized>(x: &T) -> String { let mut o = String::new(); x.n(&mut o); o }
    fn seq<'a, T: N + 'a>(o: &mut String, it: impl Iterator<Item = &'a T>) {
        o.push('['); for x in it { x.n(o); } o.push(']');
    }
    fn set(o: &mut String, mut v: Vec<String>) {
        v.sort(); o.push('{'); for x in v { o.push_str(&x); } o.push('}');
    }
    macro_rules! shown { ($p:literal; $($t:ty),*) => { $(impl N for $t {
        #[inline] fn n(&self, o: &mut String) { let _ = ::std::write!(o, ::std::concat!($p, "{};"), self); }
    })* } }
    shown!("i"; i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);
    shown!("b"; bool);
    impl N for char { #[inline] fn n(&self, o: &mut String) { let _ = ::std::write!(o, "c{};", *self as u32); } }
    macro_rules! float { ($($t:ty),*) => { $(impl N for $t {
        #[inline] fn n(&self, o: &mut String) {
            let v = if *self == 0.0 { 0.0 } else { *self }; let _ = ::std::write!(o, "f{:?};", v);
        }
    })* } }
    float!(f32, f64);
    impl N for str {
        #[inline] fn n(&self, o: &mut String) { let _ = ::std::write!(o, "s{}:", self.len()); o.push_str(self); }
    }
    impl N for String { #[inline] fn n(&self, o: &mut String) { self.as_str().n(o) } }
    impl N for () { #[inline] fn n(&self, o: &mut String) { o.push_str("();"); } }
    macro_rules! deref { ($($t:ty),*) => { $(impl<T: N + ?Sized> N for $t {
        #[inline] fn n(&self, o: &mut String) { (**self).n(o) }
    })* } }
    deref!(&T, &mut T, ::std::boxed::Box<T>, ::std::rc::Rc<T>, ::std::sync::Arc<T>);
    impl<B: N + ::std::borrow::ToOwned + ?Sized> N for ::std::borrow::Cow<'_, B> {
        #[inline] fn n(&self, o: &mut String) { (**self).n(o) }
    }
    macro_rules! sequence { ($($t:ty),*) => { $(impl<T: N> N for $t {
        #[inline] fn n(&self, o: &mut String) { seq(o, self.iter()) }
    })* } }
    sequence!([T], Vec<T>, ::std::collections::VecDeque<T>, ::std::collections::LinkedList<T>);
    impl<T: N, const K: usize> N for [T; K] { #[inline] fn n(&self, o: &mut String) { seq(o, self.iter()) } }
    impl<T: N, H> N for ::std::collections::HashSet<T, H> {
        #[inline] fn n(&self, o: &mut String) { set(o, self.iter().map(one).collect()) }
    }
    impl<T: N> N for ::std::collections::BTreeSet<T> {
        #[inline] fn n(&self, o: &mut String) { set(o, self.iter().map(one).collect()) }
    }
    impl<K: N, V: N, H> N for ::std::collections::HashMap<K, V, H> {
        #[inline] fn n(&self, o: &mut String) { set(o, self.iter().map(|e| one(&e)).collect()) }
    }
    impl<K: N, V: N> N for ::std::collections::BTreeMap<K, V> {
        #[inline] fn n(&self, o: &mut String) { set(o, self.iter().map(|e| one(&e)).collect()) }
    }
    impl<T: N> N for Option<T> {
        #[inline] fn n(&self, o: &mut String) {
            match self { Option::Some(x) => { o.push('S'); x.n(o) } Option::None => o.push_str("N;") }
        }
    }
    impl<T: N, E: N> N for ::std::result::Result<T, E> {
        #[inline] fn n(&self, o: &mut String) {
            match self {
                ::std::result::Result::Ok(x) => { o.push('O'); x.n(o) }
                ::std::result::Result::Err(e) => { o.push('E'); e.n(o) }
            }
        }
    }
    macro_rules! tuple { ($(($($t:ident $i:tt),+))*) => { $(impl<$($t: N),+> N for ($($t,)+) {
        #[inline] fn n(&self, o: &mut String) { o.push('('); $(self.$i.n(o);)+ o.push(')'); }
    })* } }
    tuple!((A 0) (A 0, B 1) (A 0, B 1, C 2) (A 0, B 1, C 2, D 3) (A 0, B 1, C 2, D 3, E 4)
           (A 0, B 1, C 2, D 3, E 4, F 5) (A 0, B 1, C 2, D 3, E 4, F 5, G 6)
           (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7));
    impl<T: N> N for ::std::ops::Range<T> {
        #[inline] fn n(&self, o: &mut String) { o.push('r'); self.start.n(o); self.end.n(o); }
    }
    impl<T: N + PartialOrd> N for ::std::ops::RangeInclusive<T> {
        #[inline] fn n(&self, o: &mut String) {
            o.push('R'); self.start().n(o); self.end().n(o); o.push_str(if self.is_empty() { "1;" } else { "0;" });
        }
    }
    impl<T: N> N for ::std::cmp::Reverse<T> { #[inline] fn n(&self, o: &mut String) { self.0.n(o) } }
    impl<T: N> N for ::std::num::Wrapping<T> { #[inline] fn n(&self, o: &mut String) { self.0.n(o) } }
    impl N for ::std::time::Duration {
        #[inline] fn n(&self, o: &mut String) { let _ = ::std::write!(o, "d{};", self.as_nanos()); }
    }
    macro_rules! debug { ($($t:ty),*) => { $(impl N for $t {
        #[inline] fn n(&self, o: &mut String) { let _ = ::std::write!(o, "e{:?};", self); }
    })* } }
    debug!(::std::cmp::Ordering, ::std::num::ParseIntError, ::std::num::ParseFloatError,
           ::std::num::TryFromIntError, ::std::num::IntErrorKind, ::std::char::ParseCharError,
           ::std::str::ParseBoolError, ::std::string::FromUtf8Error, ::std::str::Utf8Error,
           ::std::char::CharTryFromError, ::std::fmt::Error);
}
#[allow(unused_imports)] use self::__MODULE__::{S as _, O as _};
macro_rules! __rr_put { ($t:expr) => { __MODULE__::put($t) } }
macro_rules! __rr_typed { ($l:expr, $r:expr) => { if false { let _ = *$l == *$r; } } }
macro_rules! __rr_note { ($v:expr) => { __rr_put!((&__MODULE__::W($v)).t()) } }
macro_rules! __rr_differ { ($l:expr, $r:expr) => { __rr_put!(
    match ((&__MODULE__::W($l)).t(), (&__MODULE__::W($r)).t()) {
        (::std::option::Option::Some(_), ::std::option::Option::Some(_)) => ::std::option::Option::Some(
            ::std::string::ToString::to_string(if *$l != *$r { "b1;" } else { "b0;" })),
        _ => ::std::option::Option::None,
    }) } }
macro_rules! __rr_assert {
    ($c:expr $(,)?) => {{ let __rr_c: bool = $c; __rr_note!(&__rr_c);
        ::core::assert!(__rr_c, "assertion failed: {}", ::core::stringify!($c)); }};
    ($c:expr, $($a:tt)+) => {{ let __rr_c: bool = $c; __rr_note!(&__rr_c); ::core::assert!(__rr_c, $($a)+); }};
}
macro_rules! __rr_assert_eq {
    ($l:expr, $r:expr $(,)?) => {{ match (&$l, &$r) { (__rr_l, __rr_r) => { __rr_typed!(__rr_l, __rr_r);
        __rr_note!(__rr_l); __rr_note!(__rr_r); ::core::assert_eq!(__rr_l, __rr_r); } } }};
    ($l:expr, $r:expr, $($a:tt)+) => {{ match (&$l, &$r) { (__rr_l, __rr_r) => { __rr_typed!(__rr_l, __rr_r);
        __rr_note!(__rr_l); __rr_note!(__rr_r); ::core::assert_eq!(__rr_l, __rr_r, $($a)+); } } }};
}
macro_rules! __rr_assert_ne {
    ($l:expr, $r:expr $(,)?) => {{ match (&$l, &$r) { (__rr_l, __rr_r) => { __rr_typed!(__rr_l, __rr_r);
        __rr_differ!(__rr_l, __rr_r); ::core::assert_ne!(__rr_l, __rr_r); } } }};
    ($l:expr, $r:expr, $($a:tt)+) => {{ match (&$l, &$r) { (__rr_l, __rr_r) => { __rr_typed!(__rr_l, __rr_r);
        __rr_differ!(__rr_l, __rr_r); ::core::assert_ne!(__rr_l, __rr_r, $($a)+); } } }};
}
"""
"""The note module (``NOTE_MODULE``: the note trait ``N``, implemented for std types only, and the probe that picks
it where a value's type has it), the macro that writes one note (hex of the note, or ``OPAQUE``, after a tag line
start) and the assertion macros that note, then assert with core's own. Written on one line."""

NOTE_MODULE = "__rr_n___TAG__"
"""The note module's name, one per hidden test source (it holds the tag)."""

_USE_IN_CHILD = ("#[allow(unused_imports)] use super::__MODULE__; "
                 "#[allow(unused_imports)] use self::__MODULE__::{S as _, O as _};")
"""What every inline module of the hidden tests starts with: the note module and its probe traits in scope."""


def _one_line(rust: str, tag: str) -> str:
    module = NOTE_MODULE.replace("__TAG__", tag)
    return " ".join(rust.split()).replace("__MODULE__", module).replace("__TAG__", tag).replace(
        "__OPAQUE__", OPAQUE) + " "


def observable(reference: str) -> bool:
    """Whether a task's hidden tests can be judged by their notes: there is a ``reference`` to run them against
    (hash collections or not: their notes are sorted)."""
    return bool(reference.strip())


def observe_assertions(source: str) -> tuple[str, str]:
    """``source`` whose ``assert!``, ``assert_eq!`` and ``assert_ne!`` calls note what they compare, with the note
    module and macros on its first line (after any inner attributes; line numbers stay), every inline module
    importing the note module, and the notes' tag.

    >>> code, tag = observe_assertions("#[test]\\nfn t() { assert_eq!(f(), 2); core::assert!(true); }")
    >>> code.splitlines()[1], tag in code.splitlines()[0]
    ('fn t() { __rr_assert_eq!(f(), 2); core::assert!(true); }', True)
    >>> observe_assertions("fn t() { assert!(a.len() == 3, 'm'); assert!(a && b == c); }")[0].split("} ")[-1]
    "fn t() { __rr_assert_eq!(a.len() , 3, 'm'); __rr_assert!(a && b == c); }"
    """
    tag = str(secrets.randbits(128) | 1 << 127)
    tokens = tokenize(source)
    pairs = _bracket_pairs(tokens)
    at = 0
    while at + 1 < len(tokens) and tokens[at].text == "#" and tokens[at + 1].text == "!":
        at = pairs[at + 2] + 1 if at + 2 < len(tokens) and tokens[at + 2].text == "[" else at + 2
    insert = tokens[at].start if at < len(tokens) else len(source)
    edits: list[tuple[int, int, str]] = []
    for i, tok in enumerate(tokens[:-1]):
        if tok.kind == "ident" and tok.text in _RENAMED and tokens[i + 1].text == "!" and (
                i == 0 or tokens[i - 1].text != "::"):
            edits += _assertion_edits(tokens, pairs, i)
        elif (tok.kind == "ident" and tok.text == "mod" and i + 2 < len(tokens) and tokens[i + 2].text == "{"
              and tokens[i + 1].kind == "ident"):
            brace = tokens[i + 2]
            edits.append((brace.end, brace.end, _one_line(_USE_IN_CHILD, tag)))
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return source[:insert] + _one_line(_NOTE_RUST, tag) + source[insert:], tag


def _assertion_edits(tokens: list, pairs: list[int], i: int) -> list[tuple[int, int, str]]:
    """The edits that make the assertion macro at ``tokens[i]`` a noting one: its new name, and for ``assert!`` of
    one top-level ``==``/``!=``, that operator turned into the comma between two sides."""
    tok = tokens[i]
    name = _RENAMED[tok.text]
    rename = [(tok.start, tok.end, name)]
    if tok.text != "assert" or i + 2 >= len(tokens) or tokens[i + 2].text not in "([{":
        return rename
    parts = comma_ranges(tokens, pairs, i + 3, pairs[i + 2])
    if not parts or _turbofish_comma(tokens, *parts[0]):
        return rename
    lo, hi = parts[0]
    ops, j = [], lo
    while j < hi:
        t = tokens[j]
        if t.kind == "punct" and t.text in "([{":
            j = pairs[j] + 1
            continue
        if t.text in _NOT_SPLIT or (t.text == "<" and j > lo and tokens[j - 1].text != "::"):
            return rename
        if t.kind == "punct" and t.text in _SPLIT:
            ops.append(j)
        j += 1
    if len(ops) != 1 or ops[0] in (lo, hi - 1):
        return rename
    op = tokens[ops[0]]
    return [(tok.start, tok.end, _SPLIT[op.text]), (op.start, op.end, ",")]


def _turbofish_comma(tokens: list, start: int, end: int) -> bool:
    """Whether the first comma-separated part ends inside a turbofish's ``<...>`` (then it is no whole argument)."""
    depth = 0
    for j in range(start, end):
        if tokens[j].text == "<" and j and tokens[j - 1].text == "::":
            depth += 1
        elif tokens[j].text == ">" and depth:
            depth -= 1
    return depth > 0


@dataclass(frozen=True)
class ReferenceNotes:
    """What a task's hidden tests noted with its reference as the solution (``observe``), over ``NOTE_RUNS`` runs."""

    notes: dict[str, tuple[str, ...]]
    """Per hidden test (``harness.observation_key``) that passed every run with the same notes: those notes. A
    completion passes such a test only with the same notes; any other test is judged by its seal alone."""
    tests: int
    """The task's hidden tests."""
    broken: str = ""
    """Why the reference's own run failed (it did not build, or failed a hidden test): then no completion passes a
    hidden test of the task (the reason goes in ``TestCounts.failures``)."""
    lints: tuple[str, ...] = ()
    """Clippy's findings on the reference in that run (``Report.clippy_warnings``; none for a shipped task)."""

    @property
    def judged(self) -> int:
        """Hidden tests judged by std values: noted alike in every run, at least one note, none ``OPAQUE``."""
        return sum(bool(notes) and OPAQUE not in notes for notes in self.notes.values())

    @property
    def opaque(self) -> int:
        """Hidden tests noted alike, with a value that is not a std value (its comparison is the seal's word)."""
        return sum(OPAQUE in notes for notes in self.notes.values())

    @property
    def silent(self) -> int:
        """Hidden tests that noted nothing (no assertion ran before they ended: the seal's word alone)."""
        return sum(not notes for notes in self.notes.values())

    @property
    def unstable(self) -> int:
        """Hidden tests whose notes differ between the reference's own runs (judged by their seal alone)."""
        return 0 if self.broken else self.tests - len(self.notes)


def notes_in(stdout: str, tag: str) -> tuple[str, ...]:
    """The notes tagged ``tag`` in a test process's stdout, in order (hex, as written).

    >>> notes_in("x\\n7:74727565\\n\\n7:\\n7:x\\ny", "7")
    ('74727565', '', 'x')
    """
    return tuple(re.findall(rf"(?<=\n){re.escape(tag)}:([0-9a-f]*|{OPAQUE})(?=\n)", stdout)) if tag else ()


def without_notes(stdout: str, tag: str) -> str:
    """``stdout`` with the notes tagged ``tag`` removed (what the model may be shown of its tests' output)."""
    return re.sub(rf"\n{re.escape(tag)}:(?:[0-9a-f]*|{OPAQUE})(?=\n)", "", stdout) if tag else stdout
