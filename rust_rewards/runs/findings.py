"""What went wrong with one logged completion, as text for the dashboard's detail panel: the tests that failed (each
hidden test as ``name: why``, the own tests as counts: their output is not logged), the verifier's other findings,
then the compiler's diagnostics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from rust_rewards.runs.records import cell_items

FINDINGS = {"off_task": "off task, missing", "mismatched": "signature mismatch", "forbidden": "banned construct",
            "timed_out": "timed out"}
"""List-valued completion column -> what its items are, one line each."""


def _missing(value: Any) -> bool:
    return value is None or bool(pd.isna(value))


def _count(value: Any) -> int:
    return 0 if _missing(value) else int(value)


def failing_tests(row: Mapping[str, Any]) -> list[str]:
    """The hidden tests' score with each failed one as ``name: why``, and the count of failed own tests. Empty when
    the code did not build (no test ran) or every test that ran passed (a verdict zeroed for an off-task answer or a
    banned construct is a finding of ``completion_findings``, not a failing test)."""
    if not row.get("build_ok"):
        return []
    lines = []
    passed, total = _count(row.get("hidden_passed")), _count(row.get("hidden_total"))
    if passed < total:
        lines.append(f"hidden tests: {passed} of {total} passed")
        lines.extend(f"  {failure}" for failure in cell_items(row.get("hidden_failures")))
    failed = _count(row.get("tests_failed"))
    if failed:
        lines.append(f"own tests: {failed} of {failed + _count(row.get('tests_passed'))} failed "
                     "(their output is not logged)")
    return lines


def completion_findings(row: Mapping[str, Any]) -> str:
    """The detail panel's text: failing tests, other findings (off task, signature mismatch, banned construct,
    timeout, internal error), then the compiler's diagnostics; a sentence when there is none of these."""
    parts = []
    tests = failing_tests(row)
    if tests:
        parts.append("Failing tests:\n" + "\n".join(tests))
    other = [f"{what}: {item}" for column, what in FINDINGS.items() for item in cell_items(row.get(column))]
    if row.get("internal_error"):
        other.append(f"verifier internal error: {row['internal_error']}")
    if other:
        parts.append("\n".join(other))
    diagnostics = str(row.get("diagnostics") or "")
    if diagnostics:
        parts.append("Compiler diagnostics:\n" + diagnostics)
    if "has_code" in row and not row["has_code"]:
        parts.append("No ```rust block in the completion.")
    return "\n\n".join(parts) or "No compiler diagnostics and no failing test."
