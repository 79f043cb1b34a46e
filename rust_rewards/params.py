"""Turn command-line (``mo.cli_args()``) and form values into the types of a notebook's parameter dataclass."""

from __future__ import annotations

import typing
from typing import Any

_TRUE = ("", "true", "1", "yes")
_FALSE = ("false", "0", "no")


def coerce_value(flag: str, annotation: Any, value: Any) -> Any:
    """``value`` as a field annotated ``annotation``; errors name ``--flag``.

    ``--flag`` alone means True; ``auto``/``none`` mean None for optional fields; ``list[T]`` takes
    comma-separated text (or a list, from repeated flags or a form).

    >>> coerce_value("k", list[int], "1,5"), coerce_value("lr", float | None, "auto")
    ([1, 5], None)
    """
    options = typing.get_args(annotation) or (annotation,)
    if typing.get_origin(annotation) is list:
        return _split(flag, value, options[0])
    text = str(value).strip()
    if type(None) in options and text.lower() in ("auto", "none"):
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
                raise ValueError(f"--{flag}: expected {kind.__name__}, got {value!r}") from None
    raise ValueError(f"--{flag}: unsupported type {annotation}")


def _split(flag: str, value: Any, item: type) -> list[Any]:
    values = value if isinstance(value, list) else str(value).split(",")
    try:
        return [item(str(v).strip()) for v in values if str(v).strip()]
    except ValueError:
        raise ValueError(f"--{flag}: expected comma-separated {item.__name__} values, got {value!r}") from None
