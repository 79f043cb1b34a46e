"""Static required-item checks: references and prompts as specs, attacks that must fail, honest variants that pass."""

import json
from pathlib import Path

import pytest
from conftest import ROOT

from rust_rewards.rust.signatures import ItemCheck, _scan, check_items, required_items

BUNDLED = [json.loads(line) for line in (ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl").read_text().splitlines()]
MULTIPLE = Path("/work/shared/benchmarks/multiple_humaneval_rs.jsonl")

ADD = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
POINT = """use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Point {
    pub x: i32,
    pub y: i32,
}

impl Point {
    pub fn new(x: i32, y: i32) -> Self {
        Point { x, y }
    }
    pub fn shifted(&self, dx: i32) -> Point {
        Point { x: self.x + dx, y: self.y }
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {})", self.x, self.y)
    }
}
"""
STACK = """pub struct Stack<T> {
    items: Vec<T>,
}

impl<T> Stack<T> {
    pub fn new() -> Self {
        Stack { items: Vec::new() }
    }
    pub fn push(&mut self, item: T) {
        self.items.push(item);
    }
    pub fn peek(&self) -> Option<&T> {
        self.items.last()
    }
}
"""


@pytest.mark.parametrize("row", BUNDLED, ids=[row["task_id"] for row in BUNDLED])
def test_bundled_reference_passes_against_itself_and_its_prompt(row):
    ref = row["reference_code"]
    assert required_items(ref)
    assert required_items(row["prompt"])
    assert check_items(ref, ref) == ItemCheck()
    assert check_items(ref, row["prompt"]) == ItemCheck()


def test_bundled_answers_to_other_tasks_fail():
    for row in BUNDLED:
        for other in BUNDLED:
            if other is not row:
                assert not check_items(other["reference_code"], row["reference_code"]).ok, (row, other)
                assert not check_items(other["reference_code"], row["prompt"]).ok, (row, other)


@pytest.mark.parametrize("row", BUNDLED[::7], ids=[row["task_id"] for row in BUNDLED[::7]])
def test_bundled_honest_additions_pass(row):
    ref = row["reference_code"]
    names = {it.name.split("::")[-1] for it in required_items(ref) if it.kind == "fn"}
    tests = "".join(f"    fn {name}(_: ()) -> u8 {{ 0 }}\n" for name in names)
    code = "fn private_helper(x: u8) -> u8 {\n    x\n}\n\n" + ref + f"\n#[cfg(test)]\nmod tests {{\n{tests}}}\n"
    assert check_items(code, ref) == ItemCheck()
    assert check_items(code, row["prompt"]) == ItemCheck()


def test_bundled_answer_to_another_task_is_missing_items():
    first, second = BUNDLED[0], BUNDLED[1]
    for spec in (first["reference_code"], first["prompt"]):
        result = check_items(second["reference_code"], spec)
        assert not result.ok and result.missing == ("fn run_length_encode",)


@pytest.mark.skipif(not MULTIPLE.exists(), reason="MultiPL-E benchmark file not present")
def test_multiple_prompts_as_specs():
    rows = [json.loads(line) for line in MULTIPLE.read_text().splitlines()]
    for k, row in enumerate(rows):
        prompt, name = row["prompt"], row["entry_point"]
        assert [it.name for it in required_items(prompt)] == [name], row["task_id"]
        completion = prompt + "    todo!()\n}\n"
        assert check_items(completion, prompt).ok, row["task_id"]
        renamed = completion.replace(f"fn {name}(", f"fn {name}_v2(")
        assert check_items(renamed, prompt).missing == (f"fn {name}",), row["task_id"]
        other = rows[(k + 1) % len(rows)]
        assert not check_items(other["prompt"] + "    todo!()\n}\n", prompt).ok, row["task_id"]


def test_required_items_of_a_reference():
    items = {it.label: it for it in required_items(POINT + STACK + "fn helper() {}\n")}
    assert set(items) == {
        "struct Point", "fn Point::new", "fn Point::shifted", "impl Display for Point", "struct Stack",
        "fn Stack::new", "fn Stack::push", "fn Stack::peek",
    }
    assert items["struct Point"].derives == ("PartialEq", "Eq", "Hash")
    assert items["fn Point::shifted"].signature == "fn(&self, i32) -> Self"
    assert items["fn Stack::peek"].signature == "fn(&self) -> Option<&@0>"


def test_required_items_of_prose_and_bad_input():
    prompt = "Write `pub fn add(a: i32, b: i32) -> i32` that adds; it's `a + b`. Don't overflow \"quotes"
    assert [(it.name, it.signature) for it in required_items(prompt)] == [("add", "fn(i32, i32) -> i32")]
    for junk in ("", "it's", "```rust\nfn (", "fn", "`fn x<`", "\"unterminated", "'", "impl", "/* open", "r#"):
        assert isinstance(required_items(junk), tuple)
        assert isinstance(check_items(junk, junk), ItemCheck)
        assert isinstance(check_items(junk, ADD), ItemCheck)


def test_prose_methods_resolve_self_and_impl_generics_per_candidate():
    prompt = ("Implement `pub struct Stack<T>` with `pub fn new() -> Self`, `pub fn push(&mut self, item: T)` and "
              "`pub fn peek(&self) -> Option<&T>`.\n```rust\npub trait Sized2 {\n    fn size(&self) -> usize;\n}\n```")
    assert [it.name for it in required_items(prompt)] == ["size", "new", "push", "peek"]
    honest = STACK.replace("impl<T> Stack<T>", "impl<U> Stack<U>").replace("item: T", "item: U").replace(
        "-> Self", "-> Stack<U>").replace("Option<&T>", "Option<&U>") + """
pub trait Sized2 {
    fn size(&self) -> usize;
}
impl<T> Sized2 for Stack<T> {
    fn size(&self) -> usize {
        self.items.len()
    }
}
struct Node;
impl Node {
    fn new(_: u8) -> Node {
        Node
    }
}
"""
    assert check_items(honest, prompt) == ItemCheck()
    wrong = honest.replace("pub fn push(&mut self, item: U)", "pub fn push(&mut self, item: i32)")
    assert check_items(wrong, prompt).mismatched == ("push: expected fn(&mut self, @0), found fn(&mut self, i32)",)


# Attacks: each must not be ok.

def test_wrong_return_type_with_forged_equality():
    wat = """#[derive(Debug)]
pub struct Wat;
impl PartialEq<i32> for Wat {
    fn eq(&self, _other: &i32) -> bool {
        true
    }
}
pub fn add(a: i32, b: i32) -> Wat {
    let _ = (a, b);
    Wat
}
"""
    for spec in (ADD, "Write `pub fn add(a: i32, b: i32) -> i32`."):
        result = check_items(wat, spec)
        assert not result.ok
        assert "implements PartialEq<i32> for its own type Wat" in result.mismatched
        assert any("expected fn(i32, i32) -> i32, found fn(i32, i32) -> Wat" in r for r in result.mismatched)


def test_shadowing_a_std_type_is_a_mismatch():
    shadow = "pub struct String;\npub fn greet(name: &str) -> String {\n    String\n}\n"
    result = check_items(shadow, "pub fn greet(name: &str) -> String {\n    name.to_string()\n}\n")
    assert "defines its own type String, shadowing the standard one" in result.mismatched


def test_different_parameter_type():
    spec = "pub fn total(xs: &[i32]) -> i32 {\n    xs.iter().sum()\n}\n"
    result = check_items("pub fn total(xs: &Vec<i32>) -> i32 {\n    xs.iter().sum()\n}\n", spec)
    assert not result.ok and result.mismatched == ("total: expected fn(&[i32]) -> i32, found fn(&Vec<i32>) -> i32",)


def test_answer_to_another_task():
    result = check_items("pub fn is_upper(c: char) -> bool {\n    c.is_uppercase()\n}\n", ADD)
    assert result.missing == ("fn add",) and not result.ok


def test_not_pub():
    result = check_items(ADD.replace("pub fn", "fn"), ADD)
    assert result.mismatched == ("add is not pub",)
    assert check_items(ADD.replace("pub fn", "pub(crate) fn"), ADD).mismatched == ("add is not pub",)
    assert check_items(ADD.replace("pub fn", "fn"), "Write `pub fn add(a: i32, b: i32) -> i32`.").ok


def test_decoy_definition_plus_macro_generated_one():
    decoy = """#[cfg(any())]
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

pub struct Wat;

macro_rules! make {
    ($t:ty) => {
        pub fn add(_a: i32, _b: i32) -> $t {
            Wat
        }
    };
}
make!(Wat);
"""
    result = check_items(decoy, ADD)
    assert result.mismatched == ("add: signature built from macro metavariables",)


def test_fn_named_only_through_a_macro_metavariable_is_missing():
    code = "macro_rules! def { ($name:ident) => { pub fn $name(a: i32, b: i32) -> i32 { a + b } }; }\ndef!(add);\n"
    assert check_items(code, ADD).missing == ("fn add",)


def test_hand_written_comparison_instead_of_derive():
    hand = POINT.replace("PartialEq, Eq, Hash", "Hash") + """
impl PartialEq for Point {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}
impl Eq for Point {}
"""
    result = check_items(hand, POINT)
    assert result.mismatched == (
        "Point must derive PartialEq; Point must derive Eq; Point implements PartialEq by hand instead of deriving it; "
        "Point implements Eq by hand instead of deriving it",
    )
    extra = POINT + "impl std::cmp::PartialEq<i32> for Point {\n    fn eq(&self, _: &i32) -> bool { true }\n}\n"
    assert check_items(extra, POINT).mismatched == ("Point implements PartialEq by hand instead of deriving it",)


def test_required_fn_name_bound_to_something_else():
    decoy = "#[cfg(any())]\n" + ADD + "pub struct Wat;\nfn plus(_: i32, _: i32) -> Wat {\n    Wat\n}\n"
    for alias in ("pub use self::plus as add;\n", "pub const add: fn(i32, i32) -> Wat = plus;\n",
                  "pub static add: fn(i32, i32) -> Wat = plus;\n"):
        result = check_items(decoy + alias, ADD)
        assert result.mismatched == ("add is also bound by a const, static, type or `as`",), alias


def test_trait_method_decoy_for_a_required_method():
    decoy = STACK.replace("    pub fn push(", "    #[cfg(any())]\n    pub fn push(") + """
pub trait Pusher {
    fn push(&mut self, item: i32) -> bool;
}
impl Pusher for Stack<i32> {
    fn push(&mut self, _item: i32) -> bool {
        true
    }
}
"""
    result = check_items(decoy, STACK)
    assert result.mismatched == ("Stack::push: expected fn(&mut self, @0), found fn(&mut self, i32) -> bool",)


def test_missing_trait_impl():
    without = POINT[: POINT.index("impl fmt::Display")]
    assert check_items(without, POINT).missing == ("impl Display for Point",)


def test_wrong_method_owner_and_receiver():
    moved = STACK.replace("impl<T> Stack<T> {", "pub struct Other<T>(T);\nimpl<T> Other<T> {")
    assert "fn Stack::push" in check_items(moved, STACK).missing
    consuming = STACK.replace("pub fn peek(&self)", "pub fn peek(self)")
    assert check_items(consuming, STACK).mismatched == ("Stack::peek: expected fn(&self) -> Option<&@0>, "
                                                        "found fn(self) -> Option<&@0>",)


def test_qualifiers_are_compared():
    assert not check_items(ADD.replace("pub fn", "pub unsafe fn"), ADD).ok
    assert not check_items(ADD.replace("pub fn", "pub async fn"), ADD).ok


# Honest variants: each must be ok.

@pytest.mark.parametrize(
    ("code", "spec"),
    [
        pytest.param(
            "pub fn first<'a>(s: &'a str) -> &'a str {\n    s\n}\n",
            "pub fn first(s: &str) -> &str {\n    s\n}\n", id="explicit-vs-elided-lifetimes"),
        pytest.param(
            "pub fn pick<U: Clone + std::fmt::Debug>(xs: &[U]) -> Option<U> where U: Send {\n    None\n}\n",
            "pub fn pick<T: Clone>(xs: &[T]) -> Option<T> {\n    xs.first().cloned()\n}\n", id="renamed-generics"),
        pytest.param(
            STACK.replace("pub fn new() -> Self", "pub fn new() -> Stack<X>").replace("impl<T> Stack<T>",
                                                                                   "impl<X: Clone> Stack<X>")
            .replace("item: T", "item: X").replace("Option<&T>", "Option<&X>"),
            STACK, id="self-vs-type-name"),
        pytest.param(POINT.replace("-> Point {\n        Point { x: self", "-> Self {\n        Self { x: self"),
                     POINT, id="type-name-vs-self"),
        pytest.param("pub fn add(mut a: i32, b: i32) -> i32 {\n    a += b;\n    a\n}\n", ADD, id="mut-params"),
        pytest.param("pub fn add(x: i32, (y): i32) -> i32 {\n    x + y\n}\n", ADD, id="param-names"),
        pytest.param(
            "pub fn count(s: &str) -> std::collections::HashMap<char, usize> {\n    Default::default()\n}\n",
            "use std::collections::HashMap;\npub fn count(s: &str) -> HashMap<char, usize> {\n    todo!()\n}\n",
            id="std-path-prefix"),
        pytest.param("fn helper(a: i32) -> i32 {\n    a\n}\n" + ADD.replace("a + b", "helper(a) + b"), ADD,
                     id="private-helper"),
        pytest.param(ADD + "pub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\npub struct Extra;\n", ADD,
                     id="extra-pub-items"),
        pytest.param(
            ADD + "#[cfg(test)]\nmod tests {\n    use super::*;\n    fn add(x: u8) -> u8 { x }\n"
            "    #[test]\n    fn t() {\n        assert_eq!(super::add(1, 2), 3);\n    }\n}\n", ADD, id="test-module"),
        pytest.param(
            ADD + "#[test]\nfn add_works() {\n    fn add() {}\n    add();\n}\n", ADD, id="test-fn"),
        pytest.param(ADD.replace("-> i32 {", "-> i32\n{") + "// pub fn add(a: u8) -> u8\n", ADD, id="whitespace"),
        pytest.param("pub fn r#add(a: i32, b: i32) -> i32 {\n    a + b\n}\n", ADD, id="raw-identifier"),
        pytest.param("pub fn run(f: impl Fn(i32) -> i32) -> () {\n    f(1);\n}\n",
                     "pub fn run<F: Fn(i32) -> i32>(f: F) {\n    f(1);\n}\n", id="impl-trait-arg-and-unit"),
        pytest.param(
            POINT.replace("#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]",
                          "#[derive(Debug, Clone, Copy)]\n#[derive(PartialEq)]\n#[cfg_attr(all(), derive(Eq, Hash))]")
            .replace("impl fmt::Display for Point", "impl std::fmt::Display for Point"),
            POINT, id="split-derives-and-trait-paths"),
        pytest.param("#[derive(Default)]\npub struct Fib;\n", "pub struct Fib;\nimpl Default for Fib {\n"
                     "    fn default() -> Self {\n        Fib\n    }\n}\n", id="derive-satisfies-trait-impl"),
    ],
)
def test_honest_variants_pass(code, spec):
    assert check_items(code, spec) == ItemCheck()


def test_a_repeated_check_comes_from_the_cache_and_a_new_completion_is_scanned():
    """``check_items`` is cheap by its caches (timed in ``benchmarks/signatures.py``, docs/measurements.md): the same
    completion again is no new scan and gets the same verdict; one that differs by a comment is scanned anew and
    judged the same."""
    row = next(row for row in BUNDLED if 40 <= len(row["reference_code"].splitlines()) <= 70)
    code, prompt = row["reference_code"], row["prompt"]
    private = code.replace("pub fn", "fn", 1)
    verdicts = {(c, s): check_items(c, s) for c in (code, private) for s in (code, prompt)}
    misses = _scan.cache_info().misses
    assert all(check_items(c, s) == verdict for (c, s), verdict in verdicts.items())
    assert _scan.cache_info().misses == misses
    assert check_items(f"{code}\n// another sample\n", code) == ItemCheck() == verdicts[code, prompt]
    assert _scan.cache_info().misses == misses + 1
    assert verdicts[private, code].mismatched  # the cached verdicts still tell the two apart
