"""Write extracted code (and optional hidden tests) into a std-only library crate.

Layout (``src/lib.rs`` is a library, so a model-written ``fn main`` is just a function and cannot clash):

- ``Cargo.toml``: written by us: edition from the task (2021 by default), no dependencies, no build script,
  no auto-discovered targets, doctests off (examples in doc comments are not tests and would cost one
  compile each);
- ``src/lib.rs``: the model's code, plus ``#[cfg(test)] #[path = "__rr_hidden.rs"] mod __rr_hidden;`` when
  the hidden tests are unit- or main-shaped;
- ``src/__rr_hidden.rs``: ``use super::*;`` + unit-shaped tests, or + a ``fn main`` (MultiPL-E) wrapped in a
  ``#[test] fn hidden_main``;
- ``tests/__rr_hidden.rs`` (+ other ``tests/*.rs``): integration-shaped tests using the crate by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rust_rewards.source import count_test_fns
from rust_rewards.tasks import HiddenTests

HIDDEN = "__rr_hidden"
"""Module / test-target name of the hidden tests; test names under it are filtered by ``HIDDEN::``."""

_MAIN_WRAPPER = """
#[test]
fn hidden_main() {
    main();
}
"""


@dataclass(frozen=True)
class CrateLayout:
    root: Path
    package: str
    lib_name: str
    edition: str
    hidden: HiddenTests | None
    integration_tests: tuple[str, ...]
    hidden_expected: int

    @property
    def hidden_in_lib(self) -> bool:
        return self.hidden is not None and self.hidden.shape in ("unit", "main")


def hidden_expected(hidden: HiddenTests) -> int:
    """How many hidden tests must pass: ``#[test]`` functions, or 1 for a MultiPL-E ``fn main``."""
    count = 1 if hidden.shape == "main" else count_test_fns(hidden.text)
    return count + sum(
        count_test_fns(text) for rel, text in hidden.extra_files if rel.startswith("tests/") and rel.endswith(".rs")
    )


def _cargo_toml(package: str, lib_name: str, edition: str, tests: tuple[str, ...]) -> str:
    targets = "".join(f'\n[[test]]\nname = "{Path(t).stem}"\npath = "{t}"\n' for t in tests)
    return f"""[package]
name = "{package}"
version = "0.1.0"
edition = "{edition}"
build = false
autobins = false
autoexamples = false
autotests = false
autobenches = false
publish = false

[lib]
name = "{lib_name}"
path = "src/lib.rs"
doctest = false
{targets}
[dependencies]

[profile.dev]
debug = 0
incremental = false

[profile.release]
incremental = false
"""


def write_crate(root: Path, code: str, hidden: HiddenTests | None) -> CrateLayout:
    """Write the crate for ``code`` under ``root`` (which must exist) and describe it."""
    package = hidden.crate_name if hidden else "solution"
    lib_name = package.replace("-", "_")
    edition = hidden.edition if hidden else "2021"
    src = root / "src"
    src.mkdir()
    (root / "target" / "release").mkdir(parents=True)
    lib = code.rstrip() + "\n"
    integration: list[str] = []
    expected = hidden_expected(hidden) if hidden is not None else 0
    if hidden is not None:
        for rel, text in hidden.extra_files:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if rel.startswith("tests/") and rel.endswith(".rs"):
                integration.append(rel)
        if hidden.shape == "integration":
            (root / "tests").mkdir(exist_ok=True)
            (root / "tests" / f"{HIDDEN}.rs").write_text(hidden.text)
            integration.insert(0, f"tests/{HIDDEN}.rs")
        else:
            body = "#![allow(unused_imports, dead_code)]\nuse super::*;\n\n" + hidden.text.rstrip() + "\n"
            if hidden.shape == "main":
                body += _MAIN_WRAPPER
            (src / f"{HIDDEN}.rs").write_text(body)
            lib += f'\n#[cfg(test)]\n#[path = "{HIDDEN}.rs"]\nmod {HIDDEN};\n'
    (src / "lib.rs").write_text(lib)
    (root / "Cargo.toml").write_text(_cargo_toml(package, lib_name, edition, tuple(integration)))
    return CrateLayout(root, package, lib_name, edition, hidden, tuple(integration), expected)


HIDDEN_FILE = f"src/{HIDDEN}.rs"


def rewrite_lib(layout: CrateLayout, code: str, *, hidden_hook: bool = True) -> None:
    """Replace the model's code in ``src/lib.rs``, with or without the hidden-test hook."""
    lib = code.rstrip() + "\n"
    if layout.hidden_in_lib and hidden_hook:
        lib += f'\n#[cfg(test)]\n#[path = "{HIDDEN}.rs"]\nmod {HIDDEN};\n'
    (layout.root / "src" / "lib.rs").write_text(lib)
