"""The package's rooms stack in layers: a module imports only from its own room and the layers below, and no two
modules import each other, directly or around a loop (lazy imports inside functions included)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "rust_rewards"
LAYERS = {
    "report": 0, "params": 0, "atomic": 0, "cpus": 0, "workspace": 0, "layout": 0, "hub": 0,
    "rust": 1,
    "tasks": 2, "prompts": 2,
    "verify": 3, "models": 3,
    "rewards": 4, "sampling": 4,
    "data": 5,
    "eval": 6,
    "runs": 7,
    "train": 8,
    "ui": 9,
    "__init__": 10, "__main__": 10,
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every ``rust_rewards`` module ``path`` imports, anywhere in it (``from pkg import mod`` counts as ``mod``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("rust_rewards"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rust_rewards"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in known else node.module)
    return out - {name}


def _room(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_every_room_has_a_layer():
    assert {_room(m) for m in _modules()} <= set(LAYERS), {_room(m) for m in _modules()} - set(LAYERS)


def test_imports_go_down_the_layers():
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        for target in _imports(name, path, set(modules)):
            if _room(target) != _room(name) and LAYERS[_room(target)] >= LAYERS[_room(name)] \
                    and _room(target) != "__init__":
                wrong.append(f"{name} -> {target}")
            if _room(target) == "__init__" and _room(name) != "__init__":
                wrong.append(f"{name} -> rust_rewards (the public API is for users, not for the rooms)")
    assert not wrong, wrong


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, set(modules)) & set(modules) for name, path in modules.items()}
    for package in [m for m in modules if modules[m].name == "__init__.py"]:
        graph[package] -= {m for m in graph[package] if m.startswith(package + ".")}  # a room re-exports its own
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*trail[trail.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not cycles, cycles


def test_the_batch_path_takes_only_the_single_paths_entry_point():
    """The task's side of a verdict lives in ``verify.reference``, one crate's passes in ``verify.passes``:
    ``verify.batch`` needs nothing of ``verify.single`` but ``verify_code``, its fallback."""
    tree = ast.parse((PACKAGE / "verify" / "batch.py").read_text())
    taken = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module == "rust_rewards.verify.single" for alias in node.names]
    assert taken == ["verify_code"], taken
