"""Typed marimo controls built from a parameter dataclass (``rust_rewards.params``): one source for the
command line and the form.

``param_controls`` makes one control per field: a dropdown for choices, a multiselect for a list with
choices, a switch for a flag, auto/true/false for an optional flag, a bounded number, a searchable dropdown
of existing files for path fields, text otherwise. ``param_panel`` lays them out by group in field order,
each with its one-line help, the ``advanced`` ones folded in an accordion. ``fill_params(cls,
controls.value)`` then gives the same dataclass (and the same errors) as the command line.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import marimo as mo

from rust_rewards.params import ParamInfo, info_of

NONE_LABEL = "(none)"
PANEL_CLASS = "param-panel"
FULL_HEIGHT_CSS = f".marimo-cell.interactive .output-area:has(.{PANEL_CLASS}) {{ max-height: none; }}"
"""marimo's editor caps a cell's output at 610 px and scrolls the rest inside it, where a form's later sections
were cut off and easy to miss: the cell that shows a ``param_panel`` grows to the form's full height instead."""


def existing_files(root: Path, patterns: Iterable[str], limit: int = 200) -> list[str]:
    """Paths under ``root`` matching any glob pattern, relative to ``root``, sorted, at most ``limit``."""
    found = {str(p.relative_to(root)) for pattern in patterns for p in root.glob(pattern)}
    return sorted(found)[:limit]


def control(name: str, annotation: Any, value: Any, info: ParamInfo, root: Path) -> Any:
    """The marimo control for one parameter, holding ``value``."""
    label = name.replace("_", " ")
    options = typing.get_args(annotation)
    if typing.get_origin(annotation) is list:
        if info.choices or info.files:
            choices = list(info.choices) or existing_files(root, info.files)
            return mo.ui.multiselect(options=sorted({*choices, *map(str, value)}, key=choices_order(choices)),
                                     value=[str(v) for v in value], label=label, full_width=True)
        return mo.ui.text(value=",".join(map(str, value)), label=label, full_width=True)
    if bool in options and type(None) in options:
        return mo.ui.dropdown(options=["auto", "true", "false"],
                              value="auto" if value is None else str(value).lower(), label=label)
    if isinstance(value, bool):
        return mo.ui.switch(value=value, label=label)
    if info.choices:
        return mo.ui.dropdown(options=list(dict.fromkeys([*info.choices, str(value)])), value=str(value), label=label)
    if info.files:
        found = existing_files(root, info.files)
        labels = {NONE_LABEL if not v else v: v for v in dict.fromkeys([str(value), *found])}
        return mo.ui.dropdown(options=labels, value=NONE_LABEL if not value else str(value), searchable=True,
                              label=label, full_width=True)
    if isinstance(value, int | float):
        low, high = info.bounds
        step = info.step if info.step is not None else (1 if isinstance(value, int) else None)
        return mo.ui.number(start=low, stop=high, step=step, value=value, label=label)
    return mo.ui.text(value=str(value), label=label, full_width=True)


def choices_order(choices: Sequence[str]) -> Any:
    """Sort key keeping declared choices in their order, anything else after them."""
    rank = {c: i for i, c in enumerate(choices)}
    return lambda v: (rank.get(v, len(rank)), v)


def param_controls(cls: type, defaults: Any, root: Path, skip: Sequence[str] = ()) -> Any:
    """A ``mo.ui.dictionary`` of one control per field of ``cls`` (but ``skip``), filled from ``defaults``."""
    hints = typing.get_type_hints(cls)
    infos = info_of(cls)
    return mo.ui.dictionary({
        f.name: control(f.name, hints[f.name], getattr(defaults, f.name), infos[f.name], root)
        for f in dataclasses.fields(cls) if f.name not in skip
    })


def problem_field(cls: type, message: str) -> str | None:
    """The field of ``cls`` that the first of its ``--flags`` in ``message`` names (``None``: none does)."""
    infos = info_of(cls)
    for flag in re.findall(r"--([a-z0-9][a-z0-9-]*)", message):
        if (name := flag.replace("-", "_")) in infos:
            return name
    return None


def check_form(value: Any, parse: Callable[[Any], Any], check: Callable[[Any], Any],
               summary: Callable[[Any], str], verb: str) -> tuple[Any | None, str | None, Any]:
    """A form's ``value`` through the command line's own ``parse`` and ``check``: ``(params, None, summary)``, or
    ``(None, message, red callout "Cannot <verb> yet. message")`` when they raise ``ValueError``."""
    try:
        params = check(parse(value))
    except ValueError as err:
        return None, str(err), mo.callout(mo.md(f"**Cannot {verb} yet.** {err}"), kind="danger")
    return params, None, mo.md(summary(params))


def _field(element: Any, help_text: str, problem: str | None = None) -> Any:
    note = mo.md(help_text).style({"color": "var(--slate-11, #666)", "font-size": "0.8rem", "max-width": "26rem"})
    if problem is None:
        return mo.vstack([element, note], gap=0.1)
    error = mo.md(problem).style({"color": "var(--red-11, #c62828)", "font-size": "0.85rem", "max-width": "26rem",
                                  "font-weight": "600"})
    return mo.vstack([element, error, note], gap=0.1)


def _section(items: Sequence[Any]) -> Any:
    return mo.hstack(list(items), wrap=True, justify="start", align="start", gap=1.2)


def param_panel(controls: Any, cls: type, extra: Mapping[str, Sequence[Any]] | None = None,
                problem: str | None = None) -> Any:
    """``controls`` laid out by group (in field order) with each field's help; advanced fields folded; shown whole in
    the editor (``FULL_HEIGHT_CSS``).

    ``extra`` adds elements at the end of a group's main section (e.g. the weights of selected rewards);
    ``problem``, a validation message, is shown in red under the control of the field its ``--flag`` names
    (an advanced one then leaves the fold).
    """
    infos = info_of(cls)
    wrong = problem_field(cls, problem) if problem else None
    main: dict[str, list[Any]] = {}
    folded: dict[str, list[Any]] = {}
    for name in (f.name for f in dataclasses.fields(cls)):
        if name not in controls.elements:
            continue
        info = infos[name]
        target = folded if info.advanced and name != wrong else main  # a wrong value is never folded away
        target.setdefault(info.group, []).append(_field(controls[name], info.help, problem if name == wrong else None))
    for group, items in (extra or {}).items():
        main.setdefault(group, []).extend(items)
    parts = [mo.vstack([mo.md(f"**{group}**"), _section(items)], gap=0.4) for group, items in main.items()]
    if folded:
        parts.append(mo.accordion({f"Advanced: {group}": _section(items) for group, items in folded.items()}))
    return mo.Html(f"<div class='{PANEL_CLASS}'><style>{FULL_HEIGHT_CSS}</style>{mo.vstack(parts, gap=1.0).text}</div>")

