"""Load Rust task sets from files, Hugging Face or Oxen into canonical :class:`Task` rows.

The row format is detected from the column names (first match wins):

==============  ==========================================================  ================
format          columns that identify it                                    test shape
==============  ==========================================================  ================
``canonical``   ``task_id``, ``prompt``, ``test_shape``                     as given
``exercism``    ``instructions``, ``stub`` and ``tests`` or ``test_files``  ``integration``
``oxen``        ``rust_prompt`` (Oxen ``ox/Rust``)                          ``unit``
``multipl-e``   ``prompt``, ``tests`` and ``entry_point`` or ``stop_tokens``  ``main``
``prompt``      one of ``prompt``/``question``/``instruction``/``problem``  guessed
==============  ==========================================================  ================

Unit-shaped tests are kept as written: the verifier puts them inside a child module that already
has ``use super::*;``, so both a bare list of ``#[test]`` functions and a whole
``#[cfg(test)] mod tests { use super::*; ... }`` work. A list of bare assertion statements (MBPP
style) becomes one ``#[test]`` function.

Every problem found is collected and raised at once as :class:`TaskDataError`, each naming the
file, the row (the line number for jsonl, 1-based) and the field.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rust_rewards.tasks import TEST_SHAPES, Task

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")
EDITIONS = ("2015", "2018", "2021", "2024")
PROMPT_COLUMNS = ("prompt", "question", "instruction", "problem")
SOLUTION_COLUMNS = (
    "reference_code", "solution", "rust_code", "canonical_solution", "code", "response", "answer",
    "completion", "output",
)
TESTS_COLUMNS = ("reference_tests", "tests", "test", "test_list", "rust_test_list", "test_code")
ID_COLUMNS = ("task_id", "id", "problem_id", "slug", "name")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FENCE = re.compile(r"```(?:rust|rs)?[ \t]*\n(.*?)```", re.DOTALL)
_EDITION = re.compile(r'^\s*edition\s*=\s*"(\d{4})"', re.MULTILINE)


@dataclass(frozen=True)
class Issue:
    """One problem in a task file: where it is and what is wrong."""

    file: str
    row: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f" row {self.row}"
        if self.field is not None:
            where += f", field {self.field!r}"
        return f"{where}: {self.message}"


class TaskDataError(ValueError):
    """A task file has bad rows; ``issues`` lists every problem found."""

    def __init__(self, issues: list[Issue], limit: int = 50) -> None:
        self.issues = list(issues)
        shown = "\n".join(f"  {issue}" for issue in self.issues[:limit])
        more = f"\n  ... and {len(self.issues) - limit} more" if len(self.issues) > limit else ""
        super().__init__(f"{len(self.issues)} problem(s) in task data:\n{shown}{more}")


class TaskSourceError(RuntimeError):
    """A remote task source (Hugging Face, Oxen) or a local path could not be read."""


class _FieldError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# ----------------------------------------------------------------------------- field helpers

def _text(row: Mapping[str, Any], field: str, *, required: bool = False) -> str:
    """The field as text; bytes must be UTF-8; None and missing are empty unless required."""
    if field not in row or row[field] is None:
        if required:
            raise _FieldError(field, "missing")
        return ""
    value = row[field]
    if isinstance(value, bytes | bytearray):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as err:
            raise _FieldError(field, f"not valid UTF-8 (byte {err.start})") from None
    elif isinstance(value, int | float) and not isinstance(value, bool) and field in ID_COLUMNS:
        value = str(value)
    elif not isinstance(value, str):
        raise _FieldError(field, f"expected text, got {type(value).__name__}")
    _check_utf8(field, value)
    if required and not value.strip():
        raise _FieldError(field, "empty")
    return value


def _check_utf8(field: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise _FieldError(field, f"not valid UTF-8 (character {err.start})") from None


def _flag(row: Mapping[str, Any], field: str) -> bool:
    value = row.get(field)
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", ""):
        return value.strip().lower() in ("true", "1")
    raise _FieldError(field, f"expected true/false, got {value!r}")


def _files(row: Mapping[str, Any], field: str) -> dict[str, str]:
    """A path -> text mapping given as a dict or a JSON object string."""
    value = row.get(field)
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise _FieldError(field, f"not a JSON object: {err.msg}") from None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _FieldError(field, "expected an object mapping file paths to text")
    out = {}
    for path, text in value.items():
        if text is None:
            continue
        if not isinstance(text, str):
            raise _FieldError(field, f"file {path!r}: expected text, got {type(text).__name__}")
        _check_utf8(field, text)
        out[path] = text
    return out


def _first_column(row: Mapping[str, Any], names: Iterable[str]) -> str | None:
    return next((name for name in names if row.get(name) not in (None, "", [], ())), None)


def _strip_fence(code: str) -> str:
    """The first fenced Rust block of a markdown answer, or the text itself when it has none."""
    match = _FENCE.search(code)
    return match.group(1) if match else code


def unit_tests_text(value: Any, field: str = "tests") -> str:
    """Unit-shaped test text from a string, a JSON list string or a list of strings.

    Items that define functions are kept as they are; bare assertion statements (MBPP-style
    ``test_list``) are gathered into a single ``#[test] fn reference_tests()``.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, list):
                return unit_tests_text(parsed, field)
        items = [text] if text else []
    elif isinstance(value, Iterable) and not isinstance(value, bytes | Mapping):
        items = []
        for item in value:
            if not isinstance(item, str):
                raise _FieldError(field, f"expected a list of text, found {type(item).__name__}")
            if item.strip():
                items.append(item.strip())
    else:
        raise _FieldError(field, f"expected text or a list of text, got {type(value).__name__}")
    for item in items:
        _check_utf8(field, item)
    kept = [item for item in items if re.search(r"\bfn\s+\w+", item)]
    asserts = [item if item.endswith((";", "}")) else item + ";" for item in items if item not in kept]
    if asserts:
        body = "\n".join(f"    {line}" for line in asserts)
        kept.append(f"#[test]\nfn reference_tests() {{\n{body}\n}}")
    return "\n\n".join(kept)


def _guess_shape(tests: str) -> str:
    if not tests.strip():
        return "none"
    return "main" if re.search(r"\bfn\s+main\s*\(", tests) else "unit"


# ----------------------------------------------------------------------------- row mappers

def map_canonical(row: Mapping[str, Any], *, index: int, label: str) -> Task:
    """A row already in the canonical schema (our own jsonl/parquet)."""
    shape = _text(row, "test_shape") or "none"
    edition = _text(row, "edition") or "2021"
    return Task(
        task_id=_text(row, "task_id", required=True),
        prompt=_text(row, "prompt", required=True),
        reference_code=_text(row, "reference_code"),
        reference_tests=_text(row, "reference_tests"),
        test_shape=shape,
        crate_name=_text(row, "crate_name") or "solution",
        edition=edition,
        extra_files=_files(row, "extra_files"),
        test_release=_flag(row, "test_release"),
        source=_text(row, "source") or label,
        difficulty=_text(row, "difficulty"),
    )


def map_oxen(row: Mapping[str, Any], *, index: int, label: str) -> Task:
    """A row of Oxen's ``ox/Rust`` parquet (``rust_prompt``, ``rust_code``, ``rust_test_list``)."""
    tests = unit_tests_text(row.get("rust_test_list"), "rust_test_list")
    return Task(
        task_id=_text(row, "task_id", required=True),
        prompt=_text(row, "rust_prompt", required=True),
        reference_code=_strip_fence(_text(row, "rust_code")),
        reference_tests=tests,
        test_shape="unit" if tests else "none",
        source=_text(row, "source") or label,
    )


def multipl_e_prompt(code_prompt: str, entry_point: str) -> str:
    """An instruction around a MultiPL-E prompt (doc comment + signature ending in ``{``)."""
    head = code_prompt.rstrip()
    if head.endswith("{"):
        head = head[:-1].rstrip()
    name = f" `{entry_point}`" if entry_point else ""
    return (
        f"Implement the Rust function{name} described by the documentation comment below. Write the "
        "complete function with exactly this name and signature, and keep any `use` lines shown.\n\n"
        f"```rust\n{head}\n```"
    )


def map_multipl_e(row: Mapping[str, Any], *, index: int, label: str) -> Task:
    """A MultiPL-E Rust row: the prompt ends in ``{``, the tests start with ``}`` then ``fn main``."""
    code_prompt = _text(row, "prompt", required=True)
    tests = _text(row, "tests", required=True).lstrip()
    if not tests.startswith("}"):
        raise _FieldError("tests", "expected MultiPL-E tests that start with '}' closing the function")
    return Task(
        task_id=_text(row, "task_id", required=True),
        prompt=multipl_e_prompt(code_prompt, _text(row, "entry_point")),
        reference_tests=tests[1:].lstrip("\n"),
        test_shape="main",
        source=_text(row, "source") or label,
    )


def exercism_prompt(instructions: str, stub: str, crate: str, support: Mapping[str, str]) -> str:
    """Exercism instructions plus the stub to complete (and the support files it relies on)."""
    parts = [
        instructions.strip(),
        f"Complete this `src/lib.rs` of the crate `{crate}`:",
        f"```rust\n{stub.rstrip()}\n```",
    ]
    for path, text in sorted(support.items()):
        parts.append(f"The crate also contains `{path}` (do not change it):\n\n```rust\n{text.rstrip()}\n```")
    return "\n\n".join(parts)


def map_exercism(row: Mapping[str, Any], *, index: int, label: str) -> Task:
    """An Exercism-style exercise: integration tests under ``tests/`` that use the crate by name."""
    crate = _text(row, "crate_ident", required=True) if "crate_ident" in row else _text(
        row, "crate_name", required=True).replace("-", "_")
    test_files = _files(row, "test_files")
    main_file = _text(row, "main_test_file") or next(iter(sorted(test_files)), f"tests/{crate}.rs")
    tests = test_files.pop(main_file, "") or _text(row, "tests")
    if not tests.strip():
        raise _FieldError("tests", "no main test file text")
    support = _files(row, "support_files")
    instructions = _text(row, "instructions", required=True)
    append = _text(row, "instructions_append")
    if append.strip():
        instructions = f"{instructions.rstrip()}\n\n{append.strip()}"
    cargo_toml = _text(row, "cargo_toml_example") or _text(row, "cargo_toml")
    edition = _EDITION.search(cargo_toml)
    return Task(
        task_id=_text(row, "task_id", required=True),
        prompt=exercism_prompt(instructions, _text(row, "stub", required=True), crate, support),
        reference_code=_text(row, "reference_solution"),
        reference_tests=tests,
        test_shape="integration",
        crate_name=crate,
        edition=edition.group(1) if edition else "2021",
        extra_files={**test_files, **support},
        test_release=_flag(row, "test_in_release_mode"),
        source=_text(row, "source") or label,
    )


def map_prompt_dataset(row: Mapping[str, Any], *, index: int, label: str) -> Task:
    """A generic dataset row with a question column and optional solution/tests columns."""
    prompt_col = _first_column(row, PROMPT_COLUMNS) or PROMPT_COLUMNS[0]
    id_col = _first_column(row, ID_COLUMNS)
    solution_col = _first_column(row, SOLUTION_COLUMNS)
    tests_col = _first_column(row, TESTS_COLUMNS)
    tests = unit_tests_text(row[tests_col], tests_col) if tests_col else ""
    return Task(
        task_id=_text(row, id_col) if id_col else f"{label}/{index}",
        prompt=_text(row, prompt_col, required=True),
        reference_code=_strip_fence(_text(row, solution_col)) if solution_col else "",
        reference_tests=tests,
        test_shape=_guess_shape(tests),
        source=_text(row, "source") or label,
    )


Mapper = Callable[..., Task]


@dataclass(frozen=True)
class RowFormat:
    """A known row layout: how to recognise it, what it must have, how to map it."""

    name: str
    matches: Callable[[set[str]], bool]
    required: tuple[str, ...]
    mapper: Mapper


FORMATS: tuple[RowFormat, ...] = (
    RowFormat("canonical", lambda c: {"task_id", "prompt", "test_shape"} <= c, ("task_id", "prompt"),
              map_canonical),
    RowFormat("exercism", lambda c: {"instructions", "stub"} <= c and bool({"tests", "test_files"} & c),
              ("task_id", "instructions", "stub"), map_exercism),
    RowFormat("oxen", lambda c: "rust_prompt" in c, ("task_id", "rust_prompt"), map_oxen),
    RowFormat("multipl-e", lambda c: {"prompt", "tests"} <= c and bool({"entry_point", "stop_tokens"} & c),
              ("task_id", "prompt", "tests"), map_multipl_e),
    RowFormat("prompt", lambda c: bool(set(PROMPT_COLUMNS) & c), (), map_prompt_dataset),
)


def detect_format(columns: Iterable[str]) -> RowFormat | None:
    """The first known row format whose identifying columns are all present."""
    cols = set(columns)
    return next((fmt for fmt in FORMATS if fmt.matches(cols)), None)


# ----------------------------------------------------------------------------- validation

def task_problems(task: Task) -> list[tuple[str, str]]:
    """(field, message) for everything wrong with one mapped task."""
    problems = []
    if not task.task_id.strip():
        problems.append(("task_id", "empty"))
    if not task.prompt.strip():
        problems.append(("prompt", "empty"))
    if task.test_shape not in TEST_SHAPES:
        problems.append(("test_shape", f"must be one of {', '.join(TEST_SHAPES)}, got {task.test_shape!r}"))
    elif task.test_shape != "none" and not task.reference_tests.strip():
        problems.append(("reference_tests", f"empty, but test_shape is {task.test_shape!r}"))
    elif task.test_shape == "none" and task.reference_tests.strip():
        problems.append(("test_shape", "is 'none' but reference_tests is not empty"))
    if not _IDENT.match(task.crate_name):
        problems.append(("crate_name", f"not a Rust identifier: {task.crate_name!r}"))
    if task.edition not in EDITIONS:
        problems.append(("edition", f"must be one of {', '.join(EDITIONS)}, got {task.edition!r}"))
    for path in task.extra_files:
        parts = Path(path).parts
        if Path(path).is_absolute() or ".." in parts or not parts or parts[0] not in ("src", "tests"):
            problems.append(("extra_files", f"path must be relative and under src/ or tests/: {path!r}"))
    return problems


def tasks_from_rows(rows: list[tuple[int, Mapping[str, Any]]], label: str,
                    issues: list[Issue] | None = None) -> list[Task]:
    """Map (row number, row) pairs to tasks, collecting every problem; raises TaskDataError."""
    issues = [] if issues is None else issues
    columns: set[str] = set()
    for _, row in rows:
        columns.update(row)
    fmt = detect_format(columns)
    if fmt is None and rows:
        issues.append(Issue(label, None, None, f"unknown row format; columns found: {sorted(columns)}; "
                            f"expected one of: {', '.join(f.name for f in FORMATS)} (see importers.py)"))
        raise TaskDataError(issues)
    tasks: list[Task] = []
    first_row: dict[str, int] = {}
    if fmt is not None:
        for col in fmt.required:
            if col not in columns:
                issues.append(Issue(label, None, col, f"required column missing (format {fmt.name!r})"))
        if issues:
            raise TaskDataError(issues)
        for number, row in rows:
            try:
                task = fmt.mapper(row, index=number, label=label)
            except _FieldError as err:
                issues.append(Issue(label, number, err.field, err.message))
                continue
            problems = task_problems(task)
            issues.extend(Issue(label, number, f, m) for f, m in problems)
            if task.task_id in first_row:
                first = first_row[task.task_id]
                message = f"duplicate id {task.task_id!r} (first at row {first})"
                issues.append(Issue(label, number, "task_id", message))
                continue
            first_row[task.task_id] = number
            if not problems:
                tasks.append(task)
    if issues:
        raise TaskDataError(issues)
    return tasks


# ----------------------------------------------------------------------------- sources

def _read_jsonl(path: Path, issues: list[Issue]) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        line = raw.decode("utf-8", errors="surrogateescape")
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            issues.append(Issue(path.name, number, None, f"invalid JSON: {err.msg} (column {err.colno})"))
            continue
        if not isinstance(row, dict):
            issues.append(Issue(path.name, number, None, f"expected a JSON object, got {type(row).__name__}"))
            continue
        rows.append((number, row))
    return rows


def _read_json(path: Path, issues: list[Issue]) -> list[tuple[int, dict[str, Any]]]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8", errors="surrogateescape"))
    except json.JSONDecodeError as err:
        issues.append(Issue(path.name, None, None, f"invalid JSON: {err.msg} (line {err.lineno})"))
        return []
    if not isinstance(data, list):
        issues.append(Issue(path.name, None, None, "expected a JSON array of task objects"))
        return []
    rows = []
    for number, row in enumerate(data, start=1):
        if isinstance(row, dict):
            rows.append((number, row))
        else:
            issues.append(Issue(path.name, number, None, f"expected a JSON object, got {type(row).__name__}"))
    return rows


def _read_parquet(path: Path, issues: list[Issue]) -> list[tuple[int, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as err:
        issues.append(Issue(path.name, None, None, f"cannot read parquet: {err}"))
        return []
    return list(enumerate(table.to_pylist(), start=1))


_READERS = {".jsonl": _read_jsonl, ".json": _read_json, ".parquet": _read_parquet}


def is_local_source(source: str | os.PathLike[str]) -> bool:
    """Whether ``load_tasks`` reads ``source`` as a local file: an existing path or a name ending .jsonl/.json/.parquet
    (anything else names a Hugging Face dataset)."""
    text = os.fspath(source)
    return Path(text).exists() or text.lower().endswith(LOCAL_SUFFIXES)


def task_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``load_file`` cannot open ``path`` (another type, missing, a folder, unreadable), or None; reads nothing,
    so a command line can refuse it before anything loads."""
    path = Path(path)
    if path.suffix.lower() not in _READERS:
        return f"unsupported file type (expected {', '.join(LOCAL_SUFFIXES)})"
    if path.is_dir():
        return "a folder, not a task file"
    if not path.is_file():
        return "task file not found"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None


def load_file(path: str | os.PathLike[str], label: str | None = None) -> list[Task]:
    """Tasks from a local ``.jsonl`` / ``.json`` / ``.parquet`` file in any known row format."""
    path = Path(path)
    problem = task_file_problem(path)
    if problem is not None:
        raise TaskSourceError(f"{path}: {problem}")
    reader = _READERS[path.suffix.lower()]
    issues: list[Issue] = []
    rows = reader(path, issues)
    if issues:
        raise TaskDataError(issues)
    return tasks_from_rows(rows, label or path.name)


def load_hf(name: str, *, split: str | None = None, revision: str | None = None) -> list[Task]:
    """Tasks from a Hugging Face dataset (``datasets.load_dataset``); split defaults to ``train``."""
    import datasets

    split = split or "train"
    try:
        dataset = datasets.load_dataset(name, split=split, revision=revision)
    except Exception as err:  # any hub or network failure: one clear message
        raise TaskSourceError(
            f"could not load Hugging Face dataset {name!r} split {split!r} (offline?): "
            f"{type(err).__name__}: {err}") from None
    label = f"hf:{name}[{split}]"
    return tasks_from_rows(list(enumerate(dataset.to_list(), start=1)), label)


def load_oxen(repo: str, path: str, *, revision: str | None = None) -> list[Task]:
    """Tasks from a file in an Oxen repository (``RemoteRepo(repo).download(path, dst)``)."""
    from oxen import RemoteRepo

    with tempfile.TemporaryDirectory(prefix="rust_rewards_oxen_") as tmp:
        dst = Path(tmp) / Path(path).name
        try:
            RemoteRepo(repo, revision=revision or "main").download(path, str(dst))
        except Exception as err:  # any network or repo failure: one clear message
            raise TaskSourceError(
                f"could not download {path!r} from Oxen repo {repo!r} (offline?): "
                f"{type(err).__name__}: {err}") from None
        found = dst if dst.is_file() else next((p for p in Path(tmp).rglob(dst.name) if p.is_file()), None)
        if found is None:
            raise TaskSourceError(f"Oxen repo {repo!r}: download of {path!r} produced no file")
        return load_file(found, label=f"oxen:{repo}/{path}")


def load_tasks(source: str | os.PathLike[str], *, split: str | None = None, oxen_repo: str | None = None,
               revision: str | None = None) -> list[Task]:
    """Canonical tasks from a local file, a Hugging Face dataset name, or a path in an Oxen repo.

    With ``oxen_repo`` the source is a path inside that repository. Otherwise an existing path or a
    name ending in .jsonl/.json/.parquet is a local file, and anything else is a Hugging Face
    dataset name. Raises :class:`TaskDataError` for bad rows and :class:`TaskSourceError` when
    the source cannot be reached.
    """
    text = os.fspath(source)
    if oxen_repo:
        return load_oxen(oxen_repo, text, revision=revision)
    if is_local_source(text):
        return load_file(text)
    return load_hf(text, split=split, revision=revision)
