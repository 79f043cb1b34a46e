"""clippy's default groups are forced (``--force-warn``, rust_rewards.verify.harness.CLIPPY_FORCED), the deny-level
``correctness`` group too: no lint attribute in the completion earns the clippy reward for code clippy flags, whatever
its form or level; what changes clippy's view of the code (``cfg(clippy)``, ``clippy::msrv``) is refused
(``rules.clippy_view_reasons``); an honest answer keeps it; the hidden tests still judge the code. Real cargo, every
verifier mode."""

from __future__ import annotations

import pytest

from rust_rewards.rewards import rewards_from_report
from rust_rewards.rust.rules import CLIPPY_VIEW, MACRO_DEFINITION
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import MODES, VerifierConfig
from rust_rewards.verify.verifier import Verifier

REFERENCE = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
HIDDEN = HiddenTests("use super::add;\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 3), 5);\n}\n",
                     reference=REFERENCE, prompt="Add two numbers.")
RETURN = "pub fn add(a: i32, b: i32) -> i32 {\n    return a + b;\n}\n"  # clippy::needless_return (style)
SILENCED = {  # name: (code, the lint clippy must still report)
    "item allow": ("#[allow(clippy::needless_return)]\n" + RETURN, "needless_return"),
    "item allow all": ("#[allow(clippy::all)]\n" + RETURN, "needless_return"),
    "item expect": ("#[expect(clippy::needless_return)]\n" + RETURN, "needless_return"),
    "module allow": ("pub use inner::add;\n\nmod inner {\n    #![allow(clippy::all)]\n    "
                     + RETURN.replace("\n", "\n    ").rstrip() + "\n}\n", "needless_return"),
    "crate allow": ("#![allow(clippy::all)]\n\n" + RETURN, "needless_return"),
    "crate allow warnings": ("#![allow(warnings)]\n\n" + RETURN, "needless_return"),
    "crate allow style": ("#![allow(clippy::style)]\n\n" + RETURN, "needless_return"),
    "cfg_attr": ("#![cfg_attr(all(), allow(clippy::all))]\n\n" + RETURN, "needless_return"),
    "macro allow": ("macro_rules! quiet {\n    ($i:item) => {\n        #[allow(clippy::all)]\n        $i\n    };\n}\n\n"
                    "quiet! {\n" + RETURN + "}\n", "needless_return"),
    "complexity": ("#![allow(clippy::complexity)]\n\npub fn add(a: i32, b: i32) -> i32 {\n    let big = if a > b "
                   "{ true } else { false };\n    if big { a + b } else { b + a }\n}\n", "needless_bool"),
}
SILENCED["allow correctness"] = ("#[allow(clippy::eq_op)]\npub fn add(a: i32, b: i32) -> i32 {\n"
                                 "    if a == a { a + b } else { 0 }\n}\n", "eq_op")
SILENCED["correctness"] = ("pub fn add(a: i32, b: i32) -> i32 {\n    if a == a { a + b } else { 0 }\n}\n", "eq_op")
REFUSED = {  # what clippy sees is not what is built or tested
    "msrv": "#![clippy::msrv = \"1.0.0\"]\n\n" + REFERENCE,
    "cfg not clippy": "#[cfg(not(clippy))]\n" + RETURN + "\n#[cfg(clippy)]\n" + REFERENCE,
    "cfg_attr clippy": "#![cfg_attr(clippy, allow(clippy::all))]\n\n" + RETURN,
    "cfg! clippy": "pub fn add(a: i32, b: i32) -> i32 {\n    if cfg!(clippy) { a + b } else { a - b + 2 * b }\n}\n",
}
CASES = {**{name: code for name, (code, _) in SILENCED.items()}, **REFUSED, "honest": REFERENCE}


@pytest.fixture(scope="module")
def reports():
    out = {}
    for mode in MODES:
        verifier = Verifier(VerifierConfig(mode=mode), workers=2)
        got = verifier.verify_many(list(CASES.values()), [HIDDEN] * len(CASES), raw_code=True)
        out.update({(mode, name): r for name, r in zip(CASES, got, strict=True)})
        verifier.close()
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(SILENCED))
def test_a_lint_attribute_does_not_silence_clippy(reports, mode, name):
    report = reports[(mode, name)]
    assert report.build_ok and not report.internal_error
    assert SILENCED[name][1] in report.clippy_warnings and not report.clippy_ok
    rewards = rewards_from_report(report)
    assert rewards["clippy_reward"] == 0.0
    if name == "macro allow":  # a macro definition is a hack reason of its own (rules.macro_definitions)
        assert report.hack_reasons == (MACRO_DEFINITION,) and rewards["hidden_test_reward"] == 0.0
    else:
        assert not report.hack_reasons and rewards["hidden_test_reward"] == 2.0


@pytest.mark.parametrize("mode", MODES)
def test_clean_code_keeps_the_clippy_reward(reports, mode):
    report = reports[(mode, "honest")]
    assert report.clippy_ok and report.clippy_warnings == ()
    assert rewards_from_report(report)["clippy_reward"] > 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(REFUSED))
def test_code_that_changes_what_clippy_sees_is_refused(reports, mode, name):
    report = reports[(mode, name)]
    assert report.hack_reasons == (CLIPPY_VIEW,) and not report.clippy_ok
    rewards = rewards_from_report(report)
    assert rewards["clippy_reward"] == 0.0 and rewards["hidden_test_reward"] == 0.0
