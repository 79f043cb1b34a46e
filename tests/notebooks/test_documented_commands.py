"""Every command README.md and docs/*.md show uses flags its program accepts, with values it takes (issue 48): a
renamed or removed flag, a choice no longer offered or a number where text is wanted fails the test of the document
that shows it, naming the line, the command and the flags the program does accept.

Nothing is run, so the whole file takes about a second:

* the notebooks (process_data.py, train.py, inference.py, eval.py, viz.py) read their arguments as marimo's
  ``mo.cli_args()`` parses them into the reader the notebook calls (``params_from_mapping``, ``ScriptOrForm.read``,
  ``VizParams.from_args``): the flag names against the fields of their parameter dataclass, the values against
  the same types, choices and bounds a run checks first;
* the benchmarks and ``python -m rust_rewards[.module]`` build their argparse parser in their ``main()``: it is called
  with ``parse_args`` stopped (nothing after it runs), then every flag is looked up by its exact name (argparse would
  also take a prefix) and every value converted by the flag's ``type`` and checked against its ``choices``;
* train.py flags handed on by a benchmark (``batch_training.py ... -- FLAGS``, ``learning.py --train-args "FLAGS"``)
  are checked as train.py's.

Commands are the lines of ```bash blocks (``\\`` continuations joined, ``#`` comments dropped, split on ``&&``, ``;``
and `` | ``, a block's ``VAR=value`` assignments expanded in its later lines) and the inline code spans that start
with ``python``, ``python3``, ``.venv/bin/python``, ``.venv-vllm/bin/python``, ``marimo run|edit``,
``.venv/bin/marimo``, ``accelerate launch`` or a notebook or benchmark with a flag (``train.py --preset tiny``).
Leading ``VAR=value`` assignments are dropped. Skipped:

* programs that are not ours: pip, git, cargo, bash, trl vllm-serve, ray, ``./start_marimo.sh``, ``python -m pytest``
  (its markers are checked by tests/notebooks/test_readme.py), ``python3 -m venv``; ``accelerate launch``'s own flags
  (the train.py flags after the script are checked);
* marimo's own flags (before ``--``; the notebook's flags come after it);
* placeholders: a script named in capitals (``NOTEBOOK.py``), a subcommand in capitals (``SUB``), and values that are
  ``...``, a ``$VAR``, or start with a capitalised word (``FILE``, ``FILE.jsonl``, ``N``, ``HOST:PORT``,
  ``SFT/adapter``, ``A-B``, ``NAME_OR_PATH``): their flag's name is still checked, its value is not;
* in an inline span, a flag without a value (``train.py --init-adapter``): the prose names the flag, its name is
  checked.

Usage syntax is read as such: ``[--flag X]`` brackets are dropped (the flags inside are checked), ``a|b`` values
are alternatives and each is checked.

README's quick start and next steps also run as written in tests/notebooks/test_readme.py. The benchmarks' work takes
minutes and is not run here: importing each, building its parser and rendering its ``--help`` is.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import importlib.util
import inspect
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from unittest import mock

import pytest
from conftest import ROOT
from test_readme import _strip_comment

DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOTEBOOKS = ("process_data.py", "train.py", "inference.py", "eval.py", "viz.py")
PYTHONS = ("python", "python3", ".venv/bin/python", ".venv/bin/python3", ".venv-vllm/bin/python")
MARIMOS = ("marimo", ".venv/bin/marimo", ".venv-vllm/bin/marimo")
INLINE_STARTS = tuple(f"{p} " for p in (*PYTHONS, *MARIMOS, "accelerate launch"))
NOT_OURS_MODULES = ("pytest", "venv", "pip")
PASSTHROUGH = {"benchmarks/batch_training.py": "train.py"}
"""Flags after a bare ``--`` go to another program."""
NESTED = {("benchmarks/learning.py", flag): "train.py" for flag in ("--train-args", "--sft-args", "--dpo-args")}
"""A flag whose value is a string of another program's flags."""
DELEGATED = {"bench": "rust_rewards.verify.bench"}
"""``python -m rust_rewards SUB``: subcommands whose arguments another module's parser reads."""
PLACEHOLDER = re.compile(r"^(?:\$\w+|.*\.\.\.|[A-Z][A-Z0-9_]*(?:[./:\-].*)?)$")
"""A value standing for one the reader fills in: ``FILE``, ``FILE.jsonl``, ``HOST:PORT``, ``SFT/adapter``, ``$M``."""


@dataclass(frozen=True)
class Shown:
    """One command as a document shows it."""

    doc: str
    line: int
    text: str
    inline: bool

    def where(self) -> str:
        return f"{self.doc}:{self.line}: `{self.text}`"


# ---------------------------------------------------------------------------------------------------------------
# Collecting the commands


def _split_statements(line: str) -> list[str]:
    """On ``&&``, ``;`` and `` | `` outside quotes (``a|b`` without spaces stays: usage writes choices so)."""
    parts, current, quote, i = [], "", None, 0
    while i < len(line):
        ch = line[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        else:
            sep = next((s for s in ("&&", ";", " | ") if line.startswith(s, i)), None)
            if sep:
                parts.append(current)
                current, i = "", i + len(sep)
                continue
        current += ch
        i += 1
    return [p.strip() for p in [*parts, current] if p.strip()]


def _is_ours(text: str) -> bool:
    """An inline span that is a command of ours."""
    words = text.split()
    while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
        words = words[1:]
    rest = " ".join(words) + " "
    if rest.startswith(INLINE_STARTS):
        return True
    return bool(words) and (words[0] in NOTEBOOKS or words[0].startswith("benchmarks/")) and \
        any(w.lstrip("[").startswith("--") for w in words[1:])


def documented_commands(doc) -> list[Shown]:
    """The commands of one document, in order of their line."""
    lines = doc.read_text().splitlines()
    found: list[Shown] = []
    prose = []
    fence, pending, start = None, "", 0
    env: dict[str, str] = {}   # a block's `VAR=value` assignments, expanded in its later commands
    for number, raw in enumerate(lines, 1):
        opener = re.match(r"^\s*```\s*([\w-]*)\s*$", raw)
        if fence is None and opener:
            fence = opener.group(1) or "text"
            env.clear()
            prose.append("")
            continue
        if fence is not None:
            prose.append("")
            if re.match(r"^\s*```\s*$", raw):
                fence = None
                continue
            if fence != "bash":
                continue
            line = _strip_comment(raw).rstrip()
            if not pending:
                start = number
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            for statement in _split_statements(pending + line):
                statement = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), statement)
                words = shlex.split(statement) if statement.count('"') % 2 == 0 else []
                if words and all(re.match(r"^[A-Za-z_]\w*=", w) for w in words):   # `M=...; S="--n 4"`
                    env.update(w.split("=", 1) for w in words)
                else:
                    found.append(Shown(doc.name, start, " ".join(statement.split()), False))
            pending = ""
            continue
        prose.append(raw)
    assert fence is None, f"{doc.name}: a fenced block is never closed"
    text = "\n".join(prose)
    for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", text):
        span = " ".join(m.group(1).replace("\\|", "|").split())
        if _is_ours(span):
            found.append(Shown(doc.name, text.count("\n", 0, m.start()) + 1, span, True))
    return sorted(found, key=lambda s: s.line)


# ---------------------------------------------------------------------------------------------------------------
# What the notebooks accept


def _notebook_readers() -> dict[str, tuple[type, Callable, set[str]]]:
    """Per notebook: its parameter dataclass, the function its script cell reads ``mo.cli_args()`` with, and the
    flags it takes beside the dataclass's fields."""
    from rust_rewards.data.pipeline import ProcessParams
    from rust_rewards.eval.inference import InferenceParams
    from rust_rewards.eval.scoring import EvalParams
    from rust_rewards.runs.overview import VizParams
    from rust_rewards.train.config import TrainParams, params_from_mapping
    from rust_rewards.ui.entry_points import EVAL, INFERENCE, PROCESS

    return {
        "process_data.py": (ProcessParams, PROCESS.read, {"--no-verify"}),
        "train.py": (TrainParams, params_from_mapping, set()),
        "inference.py": (InferenceParams, INFERENCE.read, set()),
        "eval.py": (EvalParams, EVAL.read, set()),
        "viz.py": (VizParams, VizParams.from_args, set()),
    }


READER_CALLS = {
    "process_data.py": "PROCESS.command_line()",
    "train.py": "run_command_line(mo.cli_args())",
    "inference.py": "INFERENCE.command_line()",
    "eval.py": "EVAL.command_line()",
    "viz.py": "VizParams.from_args(mo.cli_args())",
}


@functools.cache
def notebook_flags(script: str) -> tuple[str, ...]:
    from rust_rewards.params import flag_name

    cls, _, extra = _notebook_readers()[script]
    return tuple(sorted({flag_name(f.name) for f in dataclasses.fields(cls)} | extra | {"--help"}))


def _is_flag(token: str) -> bool:
    return bool(re.match(r"^--?[A-Za-z]", token)) and " " not in token


def _alternatives(value: str) -> list[str]:
    """The values a usage line offers (``a|b``), placeholders left out."""
    return [v for v in (value.split("|") if "|" in value else [value]) if v and not PLACEHOLDER.match(v)]


def check_notebook(script: str, args: list[str], inline: bool) -> list[str]:
    """Why ``python SCRIPT ARGS`` would be refused by its reader before any work (empty: it would not)."""
    from marimo._cli.parse_args import parse_args as marimo_cli_args

    from rust_rewards.params import USER_ERRORS

    known = notebook_flags(script)
    problems: list[str] = []
    groups: list[tuple[str, list[str]]] = []
    for token in args:
        if _is_flag(token):
            groups.append((token, []))
        elif groups:
            groups[-1][1].append(token)
        elif not PLACEHOLDER.match(token):
            problems.append(f"`{token}` comes before any flag: {script} ignores it")
    checked: list[tuple[str, list[str]]] = []   # (flag, values to try)
    for token, values in groups:
        flag, eq, value = token.partition("=")
        if flag in ("-h", "--help"):
            continue
        name = "--" + flag.lstrip("-").replace("_", "-")
        if name not in known:
            problems.append(f"{script} has no flag {flag}; it accepts: {' '.join(known)}")
            continue
        value = value if eq else " ".join(values)
        if not eq and not values:
            if not inline:   # a bare flag (a bool); in prose, the flag's mere name
                checked.append((flag, [""]))
            continue
        if alternatives := _alternatives(value):
            checked.append((flag, alternatives))
    _, reader, _ = _notebook_readers()[script]
    variants = [[(flag, values[0]) for flag, values in checked]]   # each alternative once, the others at the first
    variants += [[(f, v if j == i else vs[0]) for j, (f, vs) in enumerate(checked)]
                 for i, (_, values) in enumerate(checked) for v in values[1:]]
    for variant in variants:
        tokens = [t for flag, value in variant for t in ([flag, value] if value else [flag])]
        try:
            reader(marimo_cli_args(tokens))
        except USER_ERRORS as err:
            problems.append(f"{script} refuses `{shlex.join(tokens)}`: {err}")
    return problems


# ---------------------------------------------------------------------------------------------------------------
# What the argparse programs accept


class _Parsed(BaseException):   # not an Exception: a main() that catches those lets it through
    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__("parser captured")
        self.parser = parser


def _stop(parser, *args, **kwargs):
    raise _Parsed(parser)


def _capture_parser(main: Callable) -> argparse.ArgumentParser:
    """The parser ``main`` builds: it is called with ``parse_args`` stopped, so nothing after parsing runs."""
    with mock.patch.object(argparse.ArgumentParser, "parse_args", _stop), \
            mock.patch.object(argparse.ArgumentParser, "parse_known_args", _stop):
        try:
            main([]) if inspect.signature(main).parameters else main()
        except _Parsed as got:
            return got.parser
    raise AssertionError(f"{main.__module__}.main() returned without parsing its arguments")


@functools.cache
def program_parser(program: str) -> argparse.ArgumentParser:
    """The parser of ``benchmarks/X.py`` or of a module (``rust_rewards``, ``rust_rewards.data.dpo_pairs``)."""
    if program.endswith(".py"):
        path = ROOT / program
        spec = importlib.util.spec_from_file_location(f"_documented_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(f"{program}.__main__" if program == "rust_rewards" else program)
    assert hasattr(module, "main"), f"{program} has no main() to build its parser"
    parser = _capture_parser(module.main)
    parser.format_help()   # its --help renders
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings}


def check_argparse(program: str, parser: argparse.ArgumentParser, args: list[str], inline: bool) -> list[str]:
    """Why ``ARGS`` would not parse: unknown flags (by exact name), values its ``type`` or ``choices`` refuse, a
    missing value; the train.py flags it hands on checked as train.py's."""
    options = _options(parser)
    problems: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if not _is_flag(token):
            continue
        flag, eq, inline_value = token.partition("=")
        action = options.get(flag)
        if action is None:
            problems.append(f"{program} has no flag {flag}; it accepts: {' '.join(sorted(options))}")
            continue
        if action.nargs == 0:
            continue
        values = [inline_value] if eq else []
        while not eq and i < len(args) and not _is_flag(args[i]):
            values.append(args[i])
            i += 1
            if action.nargs in (None, "?"):
                break
        if not values:
            if action.nargs not in ("?", "*") and not inline:
                problems.append(f"{program} {flag} needs a value")
            continue
        for value in values:
            for alt in _alternatives(value):
                problems += _check_value(program, flag, action, alt)
                if (program, flag) in NESTED:
                    nested = NESTED[program, flag]
                    problems += [f"{flag} {alt!r}: {p}" for p in check_notebook(nested, shlex.split(alt), False)]
    return problems


def _check_value(program: str, flag: str, action: argparse.Action, value: str) -> list[str]:
    try:
        converted = action.type(value) if callable(action.type) else value
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        return [f"{program} {flag} takes {getattr(action.type, '__name__', action.type)} values, got {value!r}"]
    if action.choices is not None and converted not in action.choices:
        return [f"{program} {flag} takes one of {', '.join(map(str, action.choices))}; got {value!r}"]
    return []


# ---------------------------------------------------------------------------------------------------------------
# One command


def _program(tokens: list[str]) -> tuple[str, list[str]] | None:
    """(program, its arguments): a notebook, ``benchmarks/X.py``, ``-m MODULE``; None for programs not ours."""
    prog, rest = tokens[0], tokens[1:]
    if prog in PYTHONS:
        if rest[:1] == ["-m"] and len(rest) > 1:
            return None if rest[1] in NOT_OURS_MODULES else (f"-m {rest[1]}", rest[2:])
        return (rest[0], rest[1:]) if rest and rest[0].endswith(".py") else None
    if prog in MARIMOS and rest[:1] in (["run"], ["edit"]):
        scripts = [i for i, t in enumerate(rest) if t.endswith(".py")]
        if not scripts:
            return None
        after = rest[scripts[0] + 1:]
        return rest[scripts[0]], after[after.index("--") + 1:] if "--" in after else []
    if prog == "accelerate":
        scripts = [i for i, t in enumerate(rest) if t.endswith(".py")]
        return (rest[scripts[0]], rest[scripts[0] + 1:]) if scripts else None
    if prog in NOTEBOOKS or prog.startswith("benchmarks/"):
        return prog, rest
    return None


def check_command(text: str, inline: bool = False) -> list[str]:
    """Why a documented command would be refused by its program's argument reader (empty: it would not, or it is
    not one of ours)."""
    try:
        tokens = [t.lstrip("[").rstrip("]") for t in shlex.split(text)]
    except ValueError as err:
        return [f"cannot be split as the shell would: {err}"]
    tokens = [t for t in tokens if t]
    while tokens and re.match(r"^[A-Za-z_]\w*=", tokens[0]):
        tokens = tokens[1:]
    found = _program(tokens) if tokens else None
    if found is None:
        return []
    program, args = found
    if PLACEHOLDER.match(program.removeprefix("-m ").removesuffix(".py")):
        return []
    if program in NOTEBOOKS:
        return check_notebook(program, args, inline)
    if program.startswith("-m "):
        module = program[3:]
        if not module.startswith("rust_rewards"):
            return [f"python -m {module}: not a module of this project (add it to NOT_OURS_MODULES if meant)"]
        if importlib.util.find_spec(module) is None:
            return [f"no module {module}"]
        parser = program_parser(module)
        if module != "rust_rewards":
            return check_argparse(f"python -m {module}", parser, args, inline)
        sub = _subcommands(parser)
        if not args or PLACEHOLDER.match(args[0]):
            return []
        if args[0] not in sub:
            return [f"python -m rust_rewards has no subcommand {args[0]!r}; it has {', '.join(sub)}"]
        name = f"python -m rust_rewards {args[0]}"
        inner = program_parser(DELEGATED[args[0]]) if args[0] in DELEGATED else sub[args[0]]
        return check_argparse(name, inner, args[1:], inline)
    if not (ROOT / program).is_file():
        return [f"{program} does not exist"]
    after = args[args.index("--") + 1:] if "--" in args else []
    args = args[:args.index("--")] if "--" in args else args
    problems = check_argparse(program, program_parser(program), args, inline)
    if after:
        if program not in PASSTHROUGH:
            return problems + [f"{program} hands the flags after `--` to no program"]
        problems += [f"after `--`: {p}" for p in check_notebook(PASSTHROUGH[program], after, inline)]
    return problems


# ---------------------------------------------------------------------------------------------------------------
# The tests


@pytest.mark.parametrize("doc", DOC_FILES, ids=[d.name for d in DOC_FILES])
def test_documented_commands_use_flags_their_programs_accept(doc):
    commands = documented_commands(doc)
    assert commands, f"{doc.name} shows no command"
    problems = [f"{shown.where()}: {problem}" for shown in commands
                for problem in check_command(shown.text, shown.inline)]
    assert not problems, "\n".join(problems)


def test_every_notebook_reads_its_arguments_as_checked_here():
    """The readers above are the ones the notebooks call; the flags the check adds are the ones they take."""
    from rust_rewards.data.pipeline import ProcessParams

    for script, call in READER_CALLS.items():
        assert call in (ROOT / script).read_text(), f"{script} no longer reads its flags with {call}"
    assert "no_verify" in inspect.getsource(ProcessParams.from_cli)
    assert "from rust_rewards.verify.bench import main" in (ROOT / "rust_rewards" / "__main__.py").read_text()
    assert "`--`" in (ROOT / "benchmarks" / "batch_training.py").read_text()
    for (program, flag), nested in NESTED.items():
        assert nested in _options(program_parser(program))[flag].help, (program, flag)


def test_the_documents_show_every_program():
    """Enough was found for the check to mean something: every notebook, the CLI, and every benchmark the docs
    name by path."""
    shown = [(s, check_command(s.text, s.inline)) for doc in DOC_FILES for s in documented_commands(doc)]
    joined = "\n".join(s.text for s, _ in shown)
    named = set(re.findall(r"benchmarks/\w+\.py", "\n".join(d.read_text() for d in DOC_FILES)))
    for program in (*NOTEBOOKS, "-m rust_rewards check", "-m rust_rewards bench", "-m rust_rewards notes", *named):
        assert program in joined, f"no documented command runs {program}"
    assert len(shown) >= 100, len(shown)


@pytest.mark.parametrize("command, expected", [
    ("python train.py --preset tiny --max-stepz 2", "train.py has no flag --max-stepz; it accepts: "),
    ("python train.py --preset tiny --max-steps two", "--max-steps: expected int"),
    ("marimo run viz.py -- --runs outputs/a", "viz.py has no flag --runs"),
    ("python eval.py --tasks T --verifier local|cloud", "--verifier: expected one of"),
    ("inference.py --engine grouped|fast", "got fast"),
    ("python process_data.py --no-verifyy", "process_data.py has no flag --no-verifyy"),
    ("accelerate launch --num_processes 2 train.py --preset tinyy", "--preset: expected one of"),
    (".venv/bin/python benchmarks/learning.py --stepz 100", "benchmarks/learning.py has no flag --stepz"),
    (".venv/bin/python benchmarks/learning.py --step 100", "has no flag --step;"),   # no prefix matching
    (".venv/bin/python benchmarks/learning.py --steps x", "--steps takes int values, got 'x'"),
    (".venv/bin/python benchmarks/learning.py --preset big", "--preset takes one of"),
    (".venv/bin/python benchmarks/learning.py --train-args \"--lrr 1\"", "train.py has no flag --lrr"),
    (".venv/bin/python benchmarks/batch_training.py -- --per-device-batch-size 32", "after `--`: train.py has no"),
    (".venv/bin/python benchmarks/no_such_benchmark.py", "benchmarks/no_such_benchmark.py does not exist"),
    ("python -m rust_rewards check FILE --mode fast", "--mode takes one of"),
    ("python -m rust_rewards chek FILE", "has no subcommand 'chek'"),
    ("python -m rust_rewards bench --repeat 3", "python -m rust_rewards bench has no flag --repeat;"),
    ("python -m rust_rewards.data.dpo_pairs --min-margin x", "--min-margin takes"),
])
def test_a_wrong_flag_or_value_is_caught(command, expected):
    problems = check_command(command)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("command", [
    "python eval.py --tasks TASKS --predictions a.parquet [--predictions b.parquet] [--verifier local|ray]",
    "python train.py ... --feedback-turns 1",
    "python -m rust_rewards notes [--tasks FILE...]",
    "python -m rust_rewards SUB --help",
    "python NOTEBOOK.py --arg value",
    "CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model M --port 8000",
    ".venv/bin/pip install -q -e .",
])
def test_usage_syntax_and_programs_not_ours_pass(command):
    assert check_command(command) == []
