"""README's commands are the ones CI runs, its next steps after the main job run as written, every documented command
uses flags that exist, the docs' links and package paths resolve, and the project is lint-clean."""

import functools
import glob
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOTEBOOKS = ("process_data.py", "train.py", "inference.py", "eval.py", "viz.py")
ROOMS = ("rust", "verify", "rewards", "data", "eval", "runs", "train", "ui")
# Flags after a bare `--` go to another program: benchmarks/batch_training.py passes them to train.py.
PASSTHROUGH = {"benchmarks/batch_training.py": "train.py"}
# Repository paths a command may name; they must exist (output folders such as outputs/ are not checked).
FILE_SUFFIXES = {"py", "parquet", "jsonl", "json", "log", "yaml", "md", "rs", "txt", "toml"}
CHECKED_PATH_PREFIXES = ("tests/", "benchmarks/", "configs/", ".ci/", "screenshots/", "rust_rewards/",
                         "qwen3-rust-finetune/bundled_tasks")


def _bash_blocks(text: str) -> list[str]:
    return [line.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
            for line in block.splitlines() if line.strip() and not line.startswith("#")]


def _readme_section(title: str) -> str:
    readme = (ROOT / "README.md").read_text()
    assert f"\n## {title}" in readme, f"README has no section {title!r}"
    return readme.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def test_quick_start_commands_are_what_ci_runs():
    """The set-up and main job of README's quick start, and the first command of its Tests section, are the commands
    `.ci/run` runs under its `# README:` comments, in that order, character for character."""
    quick = _bash_blocks(_readme_section("Quick start"))
    assert len(quick) == 2, quick
    test_command = _strip_comment(_bash_blocks(_readme_section("Tests"))[0]).strip()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    ci_readme = [ci_lines[i + 1] for i, line in enumerate(ci_lines) if line.startswith("# README:")]
    assert ci_readme == [*quick, test_command], (ci_readme, quick, test_command)
    assert test_command == ".venv/bin/python -m pytest -q -n 2"


def test_ruff_clean():
    res = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


# ---------------------------------------------------------------------------------------------------------------
# Parsing the docs


def _fences(text: str) -> tuple[list[tuple[str, str]], str]:
    """Fenced blocks as (info, body), and the text outside them."""
    blocks: list[tuple[str, str]] = []
    prose: list[str] = []
    info, body = None, []
    for line in text.splitlines():
        if info is None and re.match(r"^```[\w-]*\s*$", line):
            info, body = line.strip()[3:], []
        elif info is not None and re.match(r"^```\s*$", line):
            blocks.append((info, "\n".join(body)))
            info = None
        elif info is not None:
            body.append(line)
        else:
            prose.append(line)
    assert info is None, "a fenced block is never closed"
    return blocks, "\n".join(prose)


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _split_statements(line: str) -> list[str]:
    """Split on `;` and `&&` outside quotes (a `|` stays: usage lines write choices as `a|b`)."""
    parts, current, quote, i = [], "", None, 0
    while i < len(line):
        ch = line[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == ";" or line.startswith("&&", i):
            parts.append(current)
            current, i = "", i + (2 if ch == "&" else 1)
            continue
        current += ch
        i += 1
    return [p.strip() for p in [*parts, current] if p.strip()]


def _block_commands(body: str) -> list[str]:
    """The commands of a bash block: continuation lines joined, comments dropped, `$VAR`s of earlier
    assignments in the block (`M=...; E=...`) expanded."""
    logical, pending = [], ""
    for raw in body.splitlines():
        line = _strip_comment(raw).rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    logical.append(pending)
    env: dict[str, str] = {}
    commands = []
    for line in logical:
        for stmt in _split_statements(line):
            stmt = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), stmt)
            try:
                tokens = shlex.split(stmt)
            except ValueError:
                commands.append(stmt)
                continue
            if tokens and all(re.match(r"^[A-Za-z_]\w*=", t) for t in tokens):
                env.update(t.split("=", 1) for t in tokens)
            else:
                commands.append(stmt)
    return commands


def _inline_commands(prose: str) -> list[str]:
    """Inline code spans that are a command of ours (a python/marimo/accelerate call or a notebook with flags)."""
    spans = [" ".join(s.split()) for s in re.findall(r"(?<!`)`([^`]+)`(?!`)", prose)]
    starts = ("python ", "python3 ", ".venv/bin/python ", "uv run ", "marimo run ", "marimo edit ",
              ".venv/bin/marimo ", "accelerate launch ", "bash .ci/", "./start_marimo.sh")
    return [s for s in spans if s.startswith(starts) or s.split(" ")[0] in NOTEBOOKS]


def _documented_commands() -> list[tuple[str, str]]:
    """(doc file, command) for every command in a ```bash block and every inline command."""
    found = []
    for doc in DOC_FILES:
        blocks, prose = _fences(doc.read_text())
        for info, body in blocks:
            if info == "bash":
                found += [(doc.name, c) for c in _block_commands(body)]
        found += [(doc.name, c) for c in _inline_commands(prose)]
    return found


# ---------------------------------------------------------------------------------------------------------------
# What the programs accept


@functools.cache
def _help(*args: str) -> str:
    """`python ARGS --help` from the repository root (run once per program, cached)."""
    res = subprocess.run([sys.executable, *args, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise AssertionError(f"`python {' '.join(args)} --help` exited {res.returncode}: {res.stderr[-2000:]}")
    return res.stdout + res.stderr


def _known_flags(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--[A-Za-z][\w-]*)", help_text)) | {"--help"}


def _flags(args: list[str]) -> tuple[list[str], list[str]]:
    """`--flags` among args (usage syntax `[--flag X]` included), and the args after a bare `--`."""
    flags = []
    for i, token in enumerate(args):
        token = token.lstrip("[").rstrip("]")
        if token == "--":
            return flags, args[i + 1:]
        m = re.match(r"^(--[A-Za-z][\w-]*)", token)
        if m:
            flags.append(m.group(1))
    return flags, []


def _unknown(flags: list[str], help_args: tuple[str, ...]) -> list[str]:
    known = _known_flags(_help(*help_args))
    return [f"{f} is not in `python {' '.join(help_args)} --help`" for f in flags if f not in known]


def _check_path(token: str) -> list[str]:
    path = token.lstrip("[").rstrip("]").split("=", 1)[-1]
    if path.startswith("./"):
        path = path[2:]
    if not path.startswith(CHECKED_PATH_PREFIXES) or re.search(r"[A-Z]{2,}|\.\.\.", path):
        return []   # outputs, placeholders (RUN, NAME, FILE...)
    return [] if glob.glob(str(ROOT / path)) else [f"{path} does not exist"]


def _check_script(script: str, args: list[str]) -> list[str]:
    if re.fullmatch(r"[A-Z_]+\.py", Path(script).name):
        return []   # a placeholder: `python NOTEBOOK.py --arg value`
    if not (ROOT / script).is_file():
        return [f"{script} does not exist"]
    flags, after = _flags(args)
    if script in NOTEBOOKS:
        errors = _unknown(flags, (script,))
    elif "argparse" in (ROOT / script).read_text():
        errors = _unknown(flags, (script,))
    else:
        errors = []
    if after and script in PASSTHROUGH:
        errors += _unknown(_flags(after)[0], (PASSTHROUGH[script],))
    return errors


def _check_module(module: str, args: list[str]) -> list[str]:
    if module == "rust_rewards":
        if args and args[0].isupper():
            return []   # a placeholder: `python -m rust_rewards SUB --help`
        subcommands = re.search(r"\{([\w,]+)\}", _help("-m", "rust_rewards")).group(1).split(",")
        if not args or args[0] not in subcommands:
            return [f"`python -m rust_rewards` has no subcommand {args[:1]} (has {subcommands})"]
        return _unknown(_flags(args[1:])[0], ("-m", "rust_rewards", args[0]))
    if module.startswith("rust_rewards."):
        rel = module.replace(".", "/")
        if not (ROOT / f"{rel}.py").is_file() and not (ROOT / rel / "__main__.py").is_file():
            return [f"module {module} does not exist"]
        return _unknown(_flags(args)[0], ("-m", module))
    if module == "pytest" and "-m" in args:
        expr = args[args.index("-m") + 1]
        markers = {m.split(":")[0] for m in
                   tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]}
        return [f"pytest marker {w!r} is not registered in pyproject.toml"
                for w in re.findall(r"\w+", expr) if w not in markers | {"and", "or", "not"}]
    return []


def check_command(command: str) -> list[str]:
    """Why a documented command would not run as written (empty: fine, or not one of ours)."""
    try:
        tokens = shlex.split(command)
    except ValueError as e:
        return [f"cannot parse: {e}"]
    while tokens and re.match(r"^[A-Za-z_]\w*=", tokens[0]):
        tokens = tokens[1:]
    if not tokens:
        return []
    errors = [e for t in tokens for e in _check_path(t)]
    prog, rest = tokens[0], tokens[1:]
    if prog.lstrip("[").startswith("-"):
        return errors + ["starts with a flag: a continuation line without its `\\`?"]
    if prog == "uv" and rest[:1] == ["run"]:   # `uv run python X.py` and `uv run X.py`
        prog, rest = "python", rest[2:] if rest[1:2] in (["python"], ["python3"]) else rest[1:]
    if prog in ("python", "python3") or prog.endswith("/python"):
        if rest[:1] == ["-m"] and len(rest) > 1:
            return errors + _check_module(rest[1], rest[2:])
        if rest and rest[0].endswith(".py"):
            return errors + _check_script(rest[0], rest[1:])
        return errors
    if prog in NOTEBOOKS or prog.startswith("benchmarks/"):
        return errors + _check_script(prog, rest)
    if prog == "marimo" or prog.endswith("/marimo"):
        scripts = [i for i, t in enumerate(rest) if t.endswith(".py")]
        if not scripts:
            return errors
        script, args = rest[scripts[0]], rest[scripts[0] + 1:]
        return errors + _check_script(script, args[args.index("--") + 1:] if "--" in args else [])
    if prog == "accelerate":
        scripts = [i for i, t in enumerate(rest) if t.endswith(".py")]
        return errors + (_check_script(rest[scripts[0]], rest[scripts[0] + 1:]) if scripts else [])
    if prog.endswith(".sh") or (prog == "bash" and rest and rest[0].endswith(".sh")):
        script = (prog if prog.endswith(".sh") else rest[0]).removeprefix("./")
        return errors + ([] if (ROOT / script).is_file() else [f"{script} does not exist"])
    ours = [t for t in tokens if t in NOTEBOOKS or t.startswith("benchmarks/")]
    return errors + ([f"{prog} is not a way this project runs {ours[0]}"] if ours else [])


# ---------------------------------------------------------------------------------------------------------------
# The checks


def test_docs_pages_exist():
    names = {p.name for p in DOC_FILES}
    wanted = {"process_data.md", "train.md", "inference.md", "eval.md", "viz.md", "verifier.md",
              "gpu-and-scale.md", "measurements.md", "architecture.md"}
    assert wanted <= names, wanted - names


@pytest.mark.slow
def test_every_documented_command_exists_with_its_flags():
    commands = _documented_commands()
    # Enough commands were found for the check to mean something: every notebook, the CLI and the benchmarks.
    joined = "\n".join(c for _, c in commands)
    for program in (*NOTEBOOKS, "-m rust_rewards check", "-m rust_rewards bench", "benchmarks/learning.py",
                    "benchmarks/eval_500.py", "benchmarks/ray_verify.py", "-m pytest"):
        assert program in joined, f"no documented command runs {program}"
    assert len(commands) >= 60, len(commands)
    problems = [f"{doc}: `{command}`: {error}" for doc, command in commands for error in check_command(command)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("command", [
    "python train.py --preset tiny --no-such-flag 1",
    ".venv/bin/python train.py --preset tiny --output-dir outputs/x --max-stepz 2",
    "marimo run viz.py -- --run outputs/run1 --evall outputs/eval",
    "accelerate launch --config_file configs/accelerate/multi_gpu.yaml train.py --preset real --vllm-mod server",
    "python missing_notebook.py --preset tiny",
    "python -m rust_rewards check --mode batch x.rs --hidden-test h.rs",
    "python -m rust_rewards nosuch --repeats 3",
    "python -m rust_rewards.data.dpo_pairs --tasks T --predictions P --out O --min-marginn 1",
    ".venv/bin/python benchmarks/learning.py --stepz 100",
    ".venv/bin/python benchmarks/batch_training.py --repeats 2 -- --per-device-batch-size 32",
    ".venv/bin/python benchmarks/no_such_benchmark.py",
    ".venv/bin/python -m pytest -q -m 'not slowest'",
    "python -m rust_rewards check tests/adversarial/no_such_dir/*.rs",
    "./no_such_script.sh",
    "torchrun train.py --preset tiny",
    "[--workers N] [--near-dup-threshold 0.9]",
])
def test_a_wrong_command_is_caught(command):
    assert check_command(command), f"the checker accepted a wrong command: {command}"


def test_a_right_command_passes():
    assert check_command("python train.py --preset tiny --max-steps 2 --output-dir outputs/t") == []
    assert check_command("marimo run viz.py -- --run outputs/run1 --eval outputs/eval --refresh 30s") == []


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    _, prose = _fences(path.read_text())
    return {_slug(m) for m in re.findall(r"^#+ (.*)$", prose, re.M)}


def test_links_between_pages_resolve():
    checked = 0
    for doc in DOC_FILES:
        _, prose = _fences(doc.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"^[a-z]+://", target):
                continue
            file, _, anchor = target.partition("#")
            path = (doc.parent / file).resolve() if file else doc
            assert path.exists(), f"{doc.name}: link to {target}: {path} does not exist"
            if anchor:
                assert anchor in _anchors(path), f"{doc.name}: link to {target}: no heading with that anchor"
            checked += 1
    assert checked >= 30, checked


def test_package_paths_named_in_docs_exist():
    """`rust_rewards.x.y`, `verify/single.py`, `rust.signatures.check_items`: modules that moved must be renamed
    in the docs too."""
    rooms = "|".join(ROOMS)
    checked, problems = 0, []
    for doc in DOC_FILES:
        _, prose = _fences(doc.read_text())
        for span in re.findall(r"(?<!`)`([^`\s]+)`(?!`)", prose):
            span = span.split("(")[0]
            if re.fullmatch(r"\w+\.py", span):   # a bare file name: a notebook, or a module somewhere
                checked += 1
                places = [ROOT, ROOT / "rust_rewards", *(ROOT / "rust_rewards").glob("*/"), ROOT / "benchmarks"]
                if not any((place / span).is_file() for place in places):
                    problems.append(f"{doc.name}: {span}")
            elif m := re.fullmatch(rf"(?:rust_rewards/)?((?:{rooms})/\w+\.py)|rust_rewards/(\w+\.py)", span):
                checked += 1
                if not (ROOT / "rust_rewards" / (m.group(1) or m.group(2))).is_file():
                    problems.append(f"{doc.name}: {span}")
            elif (re.fullmatch(rf"(rust_rewards(\.\w+)+|(?:{rooms})\.\w+(\.\w+)*)", span)
                  and span.rsplit(".", 1)[-1] not in FILE_SUFFIXES):
                parts = span.removeprefix("rust_rewards.").split(".")
                checked += 1
                base = ROOT / "rust_rewards"
                while parts and ((base / parts[0]).is_dir() or (base / f"{parts[0]}.py").is_file()):
                    base = base / parts.pop(0)
                source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
                if base == ROOT / "rust_rewards" or (parts and not re.search(rf"\b{parts[0]}\b", source.read_text())):
                    problems.append(f"{doc.name}: {span}")
    assert checked >= 20, checked
    assert not problems, "names of moved or missing modules:\n" + "\n".join(problems)


# ---------------------------------------------------------------------------------------------------------------
# The newcomer's journey: README's next steps after the main job, run as written


NEXT_STEPS = "Next: generate, score, look"
RUN_PREFIX = "outputs/ci-tiny"
"""The main job's output folder: the one part of README's commands a test replaces (by a temporary folder)."""


def _next_step_commands() -> dict[str, list[str]]:
    """README's next-step commands as argument lists, by program (`inference.py`, `eval.py`, `viz.py`), parsed from
    the section's bash block (continuation lines joined)."""
    blocks = [body for info, body in _fences(_readme_section(NEXT_STEPS))[0] if info == "bash"]
    assert len(blocks) == 1, f"README's {NEXT_STEPS!r} section should hold one bash block, has {len(blocks)}"
    found: dict[str, list[str]] = {}
    for command in _block_commands(blocks[0]):
        tokens = shlex.split(command)
        script = next((t for t in tokens if t in NOTEBOOKS), None)
        assert script and script not in found, f"unexpected command in {NEXT_STEPS!r}: {command}"
        found[script] = tokens
    assert list(found) == ["inference.py", "eval.py", "viz.py"], list(found)
    return found


def _value(tokens: list[str], flag: str) -> str:
    assert flag in tokens, f"{flag} is missing from `{shlex.join(tokens)}`"
    return tokens[tokens.index(flag) + 1]


def _in_tmp(tokens: list[str], out: Path) -> list[str]:
    return [t.replace(RUN_PREFIX, str(out)) for t in tokens]


def _run_as_written(tokens: list[str], timeout: int = 900) -> subprocess.CompletedProcess[str]:
    assert (ROOT / tokens[0]).is_file(), f"{tokens[0]} does not exist (README's set-up makes it)"
    res = subprocess.run(tokens, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"`{shlex.join(tokens)}` exited {res.returncode}:\n{(res.stdout + res.stderr)[-4000:]}"
    return res


def test_next_step_commands_follow_the_main_job():
    """Without running anything: the next steps read the main job's run (its adapter and folder), answer in the tiny
    preset's format on the tasks it trained on, and viz.py knows every flag written after `--`."""
    from rust_rewards.train.config import preset_params

    tiny = preset_params("tiny")
    main_job = _bash_blocks(_readme_section("Quick start"))[1]
    assert f"--output-dir {RUN_PREFIX}" in main_job, main_job
    steps = _next_step_commands()
    inference, evaluate, viz = steps["inference.py"], steps["eval.py"], steps["viz.py"]
    assert _value(inference, "--model") == tiny.model
    assert _value(inference, "--adapter") == f"{RUN_PREFIX}/adapter"
    assert _value(inference, "--answer-format") == tiny.answer_format
    assert _value(inference, "--tasks") == tiny.data == _value(evaluate, "--tasks")
    assert int(_value(inference, "--limit")) <= tiny.max_tasks   # tasks the run trained on
    assert _value(evaluate, "--predictions") == _value(inference, "--out")
    for tokens in (inference, evaluate):
        assert _value(tokens, "--out").startswith(f"{RUN_PREFIX}/"), tokens
    assert viz[:3] == [".venv/bin/marimo", "run", "viz.py"] and viz[3] == "--", viz
    assert _value(viz, "--run") == RUN_PREFIX and _value(viz, "--eval") == _value(evaluate, "--out")
    assert not _unknown(_flags(viz[4:])[0], ("viz.py",))


@pytest.mark.slow
def test_readme_next_steps_run_as_written(tmp_path, tiny_model_dir):
    """The main job, then README's inference, eval and viz commands exactly as written there, each with its
    `outputs/ci-tiny` replaced by a temporary folder (the tiny model in `outputs/tiny-model` is shared): a renamed
    flag or file in README breaks this test."""
    import pandas as pd

    out = tmp_path / "ci-tiny"
    main_job = shlex.split(_bash_blocks(_readme_section("Quick start"))[1])
    _run_as_written(_in_tmp(main_job, out))
    assert (out / "adapter").is_dir() and (out / "metrics.jsonl").is_file()

    steps = {script: _in_tmp(tokens, out) for script, tokens in _next_step_commands().items()}
    inference, evaluate, viz = steps["inference.py"], steps["eval.py"], steps["viz.py"]
    _run_as_written(inference)
    predictions = pd.read_parquet(_value(inference, "--out"))
    limit, n = int(_value(inference, "--limit")), int(_value(inference, "--n"))
    assert len(predictions) == limit * n, (len(predictions), limit, n)
    assert predictions["task_id"].nunique() == limit

    scored = _run_as_written(evaluate)
    results = pd.read_parquet(Path(_value(evaluate, "--out")) / "results.parquet")
    assert len(results) == limit * n and results["build_ok"].notna().all()
    summary = json.loads((Path(_value(evaluate, "--out")) / "summary.json").read_text())
    assert len(summary) == 1, summary
    assert "hidden pass@1" in scored.stdout + scored.stderr

    # `marimo run` serves the dashboard; the same notebook run as a script with the same arguments prints it.
    shown = _run_as_written([sys.executable, "viz.py", *viz[4:]], timeout=300).stdout
    assert f"run: {out}" in shown and "last_step: 8" in shown, shown[-2000:]
    assert "hidden pass@1" in shown, shown[-2000:]
