"""Parameter definitions shared by a notebook's command line and its form.

A notebook's parameter dataclass declares each field with ``param(...)``: its default plus a ``ParamInfo``
(one-line help, group, choices, bounds, existing-file patterns). ``fill_params`` turns ``mo.cli_args()`` or form
values into the dataclass with the same checks and the same error messages (naming ``--flag``) for both;
``rust_rewards.ui.forms`` builds the typed controls from the same definitions. In a script, ``one_line_errors``
ends a run the user's input refused with one line and exit code 2.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
import typing
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

USER_ERRORS = (ValueError, FileNotFoundError, KeyError)
"""What a mistake of the user's raises (a bad flag, a missing or malformed file, an unknown task id)."""
TRACEBACK_ENV = "RUST_REWARDS_TRACEBACK"
"""Set to 1 to get the traceback of a refused script run instead of its one line."""
_TRUE = ("", "true", "1", "yes")
_FALSE = ("false", "0", "no")
P = TypeVar("P")


@dataclass(frozen=True)
class ParamInfo:
    """What a form needs to know about one parameter, beyond its type and default.

    ``choices``: the only values accepted (a dropdown; a multiselect for ``list[str]``). ``bounds``: inclusive
    (low, high), either may be None. ``files``: glob patterns (relative to the repository) of existing files or
    folders the form offers. ``advanced``: folded away in the form.
    """

    help: str
    group: str = "Other"
    advanced: bool = False
    choices: tuple[str, ...] = ()
    bounds: tuple[float | None, float | None] = (None, None)
    step: float | None = None
    files: tuple[str, ...] = ()


def param(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING, help: str,
          group: str = "Other", advanced: bool = False, choices: Sequence[str] = (),
          bounds: tuple[float | None, float | None] = (None, None), step: float | None = None,
          files: Sequence[str] = ()) -> Any:
    """A dataclass field with its ``ParamInfo`` in ``metadata["param"]``.

    >>> @dataclass
    ... class P:
    ...     lr: float = param(1e-5, help="learning rate", bounds=(0, 1))
    >>> info_of(P)["lr"].bounds
    (0, 1)
    """
    info = ParamInfo(help=help, group=group, advanced=advanced, choices=tuple(choices), bounds=bounds, step=step,
                     files=tuple(files))
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"param": info})


def info_of(cls: type) -> dict[str, ParamInfo]:
    """Each field's ``ParamInfo`` (a bare one for fields declared without ``param``)."""
    return {f.name: f.metadata.get("param", ParamInfo(help="")) for f in dataclasses.fields(cls)}


def flag_name(name: str) -> str:
    """``--max-steps`` for ``max_steps``."""
    return "--" + name.replace("_", "-")


def coerce_value(flag: str, annotation: Any, value: Any, info: ParamInfo | None = None) -> Any:
    """``value`` as a field annotated ``annotation``, checked against ``info``; errors name ``--flag``.

    ``--flag`` alone means True; ``auto``/``none`` mean None for optional fields; ``list[T]`` takes
    comma-separated text (or a list, from repeated flags or a form).

    >>> coerce_value("k", list[int], "1,5"), coerce_value("lr", float | None, "auto")
    ([1, 5], None)
    """
    flag = flag.lstrip("-")
    options = typing.get_args(annotation) or (annotation,)
    if typing.get_origin(annotation) is list:
        result: Any = _split(flag, value, options[0])
    else:
        result = _scalar(flag, options, value)
    if info is not None:
        check_value(flag, info, result)
    return result


def check_value(flag: str, info: ParamInfo, value: Any) -> None:
    """Raise ``ValueError`` naming ``--flag`` when ``value`` is not one of the choices or out of bounds."""
    flag = flag.lstrip("-")
    items = value if isinstance(value, list) else [value]
    if info.choices:
        bad = [v for v in items if v not in info.choices and not (v == "" and not isinstance(value, list))]
        if bad:
            raise ValueError(f"--{flag}: expected one of {', '.join(info.choices)}; got {', '.join(map(str, bad))}")
    low, high = info.bounds
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int | float):
            continue
        if (low is not None and v < low) or (high is not None and v > high):
            span = f">= {low}" if high is None else f"<= {high}" if low is None else f"within [{low}, {high}]"
            raise ValueError(f"--{flag} must be {span}, got {v}")


_NUMBER = re.compile(r"\d+(\.\d*)?([eE][-+]?\d+)?")


def undo_cli_splits(values: Mapping[str, Any]) -> dict[str, Any]:
    """``mo.cli_args()`` as the user typed it: marimo's parser reads ``--max-steps -1`` as the flags
    ``max-steps`` and ``1``, and ``--reward-weights a=2`` as the flag ``reward-weights a`` with the value 2.

    >>> undo_cli_splits({"max-steps": "", "1": "", "reward-weights test_reward": "2,build_reward=0.5"})
    {'max-steps': '-1', 'reward-weights': 'test_reward=2,build_reward=0.5'}
    """
    fixed: dict[str, Any] = {}
    for raw, value in values.items():
        key = str(raw)
        last = next(reversed(fixed), None)
        if _NUMBER.fullmatch(key) and isinstance(value, list):
            raise ValueError(f"-{key} is given more than once: write negative values as --flag=-{key}")
        if _NUMBER.fullmatch(key) and value == "" and last is not None and fixed[last] == "":
            fixed[last] = f"-{key}"
        elif " " in key.strip():
            flag, rest = key.strip().split(" ", 1)
            fixed[flag] = f"{rest}={value}"
        else:
            fixed[key] = value
    return fixed


def usage(cls: type, base: Any = None) -> str:
    """Every parameter of ``cls`` as the command line takes it, by group (each group once, in the order of its first
    field), with its help, default (``base``'s value when given: what a run without the flag uses) and choices."""
    hints = typing.get_type_hints(cls)
    groups: dict[str, list[str]] = {}
    for f in dataclasses.fields(cls):
        info = f.metadata.get("param", ParamInfo(help=""))
        default = getattr(base, f.name) if base is not None else f.default if f.default is not dataclasses.MISSING \
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        kind = getattr(hints[f.name], "__name__", str(hints[f.name]))
        extra = f" (one of: {', '.join(map(str, info.choices))})" if info.choices else ""
        groups.setdefault(info.group or "Options", []).append(
            f"  {flag_name(f.name)} {kind.upper()}  {info.help}{extra} [default: {default!r}]")
    return "\n".join(f"\n{group}:\n" + "\n".join(lines) for group, lines in groups.items()).lstrip("\n") + "\n"


def exit_with_usage_if_asked(cls: type, values: Mapping[str, Any], prog: str, base: Any = None,
                             note: str = "") -> None:
    """``--help`` (or ``-h``) among ``values``: print ``usage(cls, base)`` (after ``note``) and exit 0."""
    if any(str(key).lstrip("-") in ("help", "h") for key in values):
        print(f"usage: python {prog} [--flag value ...]\n{note}\n{usage(cls, base)}", flush=True)
        raise SystemExit(0)


def fill_params(cls: type[P], values: Mapping[str, Any], base: P | None = None) -> P:
    """``cls`` from CLI args or form values (names with - or _), over ``base`` (default: the defaults).

    Unknown names, values of the wrong type, values outside the choices or bounds raise ``ValueError``
    naming the flag.
    """
    hints = typing.get_type_hints(cls)
    infos = info_of(cls)
    changes: dict[str, Any] = {}
    for raw, value in undo_cli_splits(values).items():
        key = str(raw).replace("-", "_")
        if key not in hints:
            raise ValueError(unknown_flag(str(raw), list(hints)))
        changes[key] = coerce_value(flag_name(key), hints[key], value, infos.get(key))
    return dataclasses.replace(base, **changes) if base is not None else cls(**changes)


def unknown_flag(raw: str, names: Sequence[str]) -> str:
    """The one line refusing the flag ``raw``: the closest of ``names`` (at most 3, ``difflib``), else the number of
    flags ``--help`` lists.

    >>> unknown_flag("max-step", ["max_steps", "save_steps", "lr"])
    'unknown parameter --max-step (did you mean --max-steps or --save-steps?)'
    >>> unknown_flag("bogus", ["max_steps", "lr"])
    'unknown parameter --bogus (--help lists all 2)'
    """
    name = raw.lstrip("-").replace("-", "_")
    flag, close = flag_name(name), [flag_name(n) for n in difflib.get_close_matches(name, names, n=3)]
    if not close:
        return f"unknown parameter {flag} (--help lists all {len(names)})"
    shown = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f"unknown parameter {flag} (did you mean {shown}?)"


def _scalar(flag: str, options: tuple[Any, ...], value: Any) -> Any:
    text = str(value).strip()
    if type(None) in options and (value is None or text.lower() in ("auto", "none")):
        return None
    if bool in options:
        if isinstance(value, bool):
            return value
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise ValueError(f"--{flag}: expected true/false, got {value!r}")
    for kind in (int, float, str):
        if kind in options:
            try:
                if kind is int and isinstance(value, float) and not value.is_integer():
                    raise ValueError(value)
                return kind(value)
            except (TypeError, ValueError):
                hint = f" (a negative value is written --{flag}=-N)" if text == "" else ""
                raise ValueError(f"--{flag}: expected {kind.__name__}, got {value!r}{hint}") from None
    raise ValueError(f"--{flag}: unsupported type {options}")


def _split(flag: str, value: Any, item: type) -> list[Any]:
    values = value if isinstance(value, list | tuple) else str(value).split(",")
    try:
        return [item(str(v).strip()) for v in values if str(v).strip()]
    except ValueError:
        raise ValueError(f"--{flag}: expected comma-separated {item.__name__} values, got {value!r}") from None


@contextmanager
def one_line_errors(prog: str, errors: tuple[type[BaseException], ...] = USER_ERRORS,
                    enabled: bool = True) -> Iterator[None]:
    """``errors`` end the run with ``PROG: message`` on stderr and exit code 2 instead of a traceback through
    marimo's runner (``enabled`` False, or ``RUST_REWARDS_TRACEBACK=1``: they propagate)."""
    try:
        yield
    except errors as err:
        if not enabled or os.environ.get(TRACEBACK_ENV) == "1":
            raise
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"{prog}: {message}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
