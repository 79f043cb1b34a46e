"""Write extracted code (and optional hidden tests) into a std-only library crate.

Layout (``src/lib.rs`` is a library, so a model-written ``fn main`` is just a function and cannot clash):

- ``Cargo.toml``: written by us: edition from the task (2021 by default), no dependencies, no build script,
  no auto-discovered targets, doctests off (examples in doc comments are not tests and would cost one
  compile each);
- ``src/lib.rs``: the model's code, plus ``#[cfg(test)] #[path = "H.rs"] mod H;`` when the hidden tests are
  unit- or main-shaped;
- ``src/H.rs``: ``use super::*;`` + unit-shaped tests, or + a ``fn main`` (MultiPL-E) wrapped in a
  ``#[test] fn hidden_main``;
- ``tests/H.rs`` (+ other ``tests/*.rs``): integration-shaped tests using the crate by name.

``H`` is ``__rr_hidden_`` + a random suffix drawn for each crate, so model code cannot name, shadow or include
the hidden module; the exact libtest names of the hidden tests (``CrateLayout.hidden_names``) are known before
anything runs, and ``remove_hidden_sources`` deletes the hidden files before any test binary starts.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from rust_rewards.source import HIDDEN_PREFIX, test_paths
from rust_rewards.tasks import HiddenTests

HIDDEN = f"{HIDDEN_PREFIX}_hidden"
"""Prefix of the hidden module / test-target name; each crate appends a random suffix."""

_MAIN_WRAPPER = """
#[test]
fn hidden_main() {
    main();
}
"""


@dataclass(frozen=True)
class CrateLayout:
    """A written crate. ``hidden_names`` holds, per hidden test binary (the library harness for unit/main
    shapes, else one per ``integration_tests`` file), the exact libtest names of the hidden tests in it."""

    root: Path
    package: str
    lib_name: str
    edition: str
    hidden: HiddenTests | None
    integration_tests: tuple[str, ...]
    hidden_module: str
    hidden_names: tuple[tuple[str, ...], ...]

    @property
    def hidden_in_lib(self) -> bool:
        return self.hidden is not None and self.hidden.shape in ("unit", "main")

    @property
    def hidden_expected(self) -> int:
        return sum(len(names) for names in self.hidden_names)

    @property
    def hidden_file(self) -> str:
        """Crate-relative path of the hidden module inside the library (unit/main shapes)."""
        return f"src/{self.hidden_module}.rs"


def _is_test_file(rel: str) -> bool:
    return rel.startswith("tests/") and rel.endswith(".rs")


def hidden_expected(hidden: HiddenTests) -> int:
    """How many hidden tests must pass: ``#[test]`` functions, or 1 for a MultiPL-E ``fn main``."""
    count = 1 if hidden.shape == "main" else len(test_paths(hidden.text))
    return count + sum(len(test_paths(text)) for rel, text in hidden.extra_files if _is_test_file(rel))


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
    module = f"{HIDDEN}_{secrets.token_hex(8)}"
    integration: list[str] = []
    names: list[tuple[str, ...]] = []
    if hidden is not None:
        for rel, text in hidden.extra_files:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if _is_test_file(rel):
                integration.append(rel)
                names.append(test_paths(text))
        if hidden.shape == "integration":
            (root / "tests").mkdir(exist_ok=True)
            (root / "tests" / f"{module}.rs").write_text(hidden.text)
            integration.insert(0, f"tests/{module}.rs")
            names.insert(0, test_paths(hidden.text))
        else:
            body, own = hidden_module_source(hidden)
            (src / f"{module}.rs").write_text(body)
            names = [tuple(f"{module}::{name}" for name in own)]
    (root / "Cargo.toml").write_text(_cargo_toml(package, lib_name, edition, tuple(integration)))
    layout = CrateLayout(root, package, lib_name, edition, hidden, tuple(integration), module, tuple(names))
    rewrite_lib(layout, code)
    return layout


def hidden_module_source(hidden: HiddenTests) -> tuple[str, tuple[str, ...]]:
    """The hidden module's source for unit/main shapes, and its tests' libtest names inside that module."""
    body = "#![allow(unused_imports, dead_code)]\nuse super::*;\n\n" + hidden.text.rstrip() + "\n"
    if hidden.shape == "main":
        return body + _MAIN_WRAPPER, ("hidden_main",)
    return body, test_paths(hidden.text)


def lib_source(code: str, hidden_module: str | None) -> str:
    """The model's code as a module's source, plus the hook that declares the hidden module (if any)."""
    lib = code.rstrip() + "\n"
    if hidden_module is not None:
        lib += f'\n#[cfg(test)]\n#[path = "{hidden_module}.rs"]\nmod {hidden_module};\n'
    return lib


def rewrite_lib(layout: CrateLayout, code: str, *, hidden_hook: bool = True) -> None:
    """Replace the model's code in ``src/lib.rs``, with or without the hidden-test hook."""
    module = layout.hidden_module if layout.hidden_in_lib and hidden_hook else None
    (layout.root / "src" / "lib.rs").write_text(lib_source(code, module))


def remove_hidden_sources(layout: CrateLayout) -> None:
    """Delete the hidden test sources once compiled, so no test binary can read them at run time."""
    if layout.hidden is None:
        return
    files = [layout.hidden_file] if layout.hidden_in_lib else []
    for rel in (*files, *layout.integration_tests):
        (layout.root / rel).unlink(missing_ok=True)
