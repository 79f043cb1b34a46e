"""README's commands are the ones CI runs, its next steps after the main job run as written, every documented command
uses flags that exist, the docs' links and package paths resolve, and the project is lint-clean."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
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


# ---------------------------------------------------------------------------------------------------------------
# What the programs accept


# ---------------------------------------------------------------------------------------------------------------
# The checks


def test_docs_pages_exist():
    names = {p.name for p in DOC_FILES}
    wanted = {"process_data.md", "train.md", "inference.md", "eval.md", "viz.md", "verifier.md",
              "gpu-and-scale.md", "measurements.md", "architecture.md"}
    assert wanted <= names, wanted - names


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


def _block_commands(body: str) -> list[str]:
    """The commands of a bash block, one per line with continuation lines joined and comments dropped."""
    commands, pending = [], ""
    for raw in body.splitlines():
        line = _strip_comment(raw).rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        if (pending + line).strip():
            commands.append(pending + line)
        pending = ""
    return commands


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
    from rust_rewards.params import flag_name, info_of
    from rust_rewards.runs.overview import VizParams

    known = {flag_name(name) for name in info_of(VizParams)}
    assert {t for t in viz[4:] if t.startswith("--")} <= known, known


@pytest.mark.slow
def test_readme_next_steps_run_as_written(tmp_path, tiny_model_dir):
    """The main job, then README's inference, eval and viz commands exactly as written there, each with its
    `outputs/ci-tiny` replaced by a temporary folder (the tiny model in `outputs/tiny-model` is shared): a renamed
    flag or file in README breaks this test. The main job's run is a copy of the one `.ci/run` has just made from
    README's command as written (it names it in ``RR_CI_MAIN_JOB``), else made here."""
    import pandas as pd

    out = tmp_path / "ci-tiny"
    steps = {script: _in_tmp(tokens, out) for script, tokens in _next_step_commands().items()}
    made = ROOT / RUN_PREFIX
    if os.environ.get("RR_CI_MAIN_JOB") == RUN_PREFIX and (made / "adapter").is_dir():
        later = {Path(_value(steps[script], "--out")).name for script in ("inference.py", "eval.py")}
        shutil.copytree(made, out, ignore=lambda folder, names: later & set(names) if folder == str(made) else ())
    else:
        main_job = shlex.split(_bash_blocks(_readme_section("Quick start"))[1])
        _run_as_written(_in_tmp(main_job, out))
    assert (out / "adapter").is_dir() and (out / "metrics.jsonl").is_file()
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
