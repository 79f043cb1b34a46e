"""The lexer every static check reads (``rust_rewards.rust.lexer``): the tokens rustc would see, offsets into the
original text, test regions and the code without them."""

from __future__ import annotations

import pytest

from rust_rewards.rust.lexer import count_test_fns, solution_names, strip_test_code, test_paths, test_regions, tokenize

SOURCE = """\ufeff#!/usr/bin/env rust
pub fn r#match(s: &str) -> usize { let t = r#"a "quoted" }{"#; s.len() + t.len() } /* a /* nested */ comment */
// fn commented() {}
const C: char = '}';
pub struct P<'a> { x: &'a [u8] }
#[cfg(feature = "x")]
mod gated { #[test] fn never() {} }
#[cfg(test)]
mod tests { use super::*; fn helper() -> u8 { 1 } #[test] fn t() { assert_eq!(r#match("a"), 1); } }
#[test]
fn top() {}
"""


def test_tokens_are_what_rustc_sees_with_offsets_into_the_original_text():
    tokens = tokenize(SOURCE)
    assert tokens[0].text == "pub"  # byte-order mark and shebang line skipped
    match = next(t for t in tokens if t.text == "match")
    assert (match.kind, match.raw, SOURCE[match.start:match.end]) == ("ident", True, "r#match")
    raw = next(t for t in tokens if t.kind == "string")
    assert raw.text == 'r#"a "quoted" }{"#'  # a raw string is one token, braces and quotes inside it included
    assert not any("commented" in t.text or "nested" in t.text for t in tokens)  # comments, nested ones too
    assert [t.text for t in tokens if t.kind == "char"] == ["'}'"]
    assert [t.text for t in tokens if t.kind == "lifetime"] == ["'a", "'a"]
    assert all(SOURCE[t.start:t.end] == t.text for t in tokens if not t.raw)


@pytest.mark.parametrize(("code", "kinds"), [
    ("1.5e3", [("number", "1.5e3")]),
    ("b'a'", [("char", "b'a'")]),
    ('c"c"', [("string", 'c"c"')]),
    ('br##"x"##', [("string", 'br##"x"##')]),
    ("a::b", [("ident", "a"), ("punct", "::"), ("ident", "b")]),
    ("x => y", [("ident", "x"), ("punct", "=>"), ("ident", "y")]),
])
def test_literals_and_multi_character_punctuation_are_single_tokens(code, kinds):
    assert [(t.kind, t.text) for t in tokenize(code)] == kinds


def test_unicode_identifiers_are_compared_in_nfc():
    decomposed, composed = "fn cafe\u0301() {}", "fn caf\u00e9() {}"
    assert [t.text for t in tokenize(decomposed)] == [t.text for t in tokenize(composed)]


def test_test_regions_are_cfg_test_modules_and_test_fns_that_run():
    regions = test_regions(tokenize(SOURCE))
    assert [f.name for f in regions.test_fns] == ["t", "top"]  # a test under a cargo feature does not run
    assert [m.name for m in regions.cfg_test_mods] == ["tests"]
    assert test_paths(SOURCE) == ("tests::t", "top")
    assert count_test_fns(SOURCE) == 2


def test_solution_names_leave_test_code_out():
    tokens = tokenize(SOURCE)
    names = solution_names(tokens, test_regions(tokens))
    assert {"match", "C", "P"} <= names
    assert not names & {"helper", "t", "top", "tests"}


def test_strip_test_code_keeps_everything_else_byte_for_byte():
    stripped = strip_test_code(SOURCE)
    assert "mod tests" not in stripped and "fn top" not in stripped
    assert stripped.startswith(SOURCE[:SOURCE.index("#[cfg(test)]")])
    assert "mod gated" in stripped  # gated by a feature, not by test
