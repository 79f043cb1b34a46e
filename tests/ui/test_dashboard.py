"""What a newcomer reads on the dashboard (issue 48): why a completion's tests fail, what each headline card
summarises, readable legends, the eval next to the training curves, and a table footer that says one thing."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from browser import chromium_page, free_port, has_text, page_errors, serve
from conftest import ROOT
from run_folders import GOOD, write_eval_dir, write_training_dir

from rust_rewards.report import Report
from rust_rewards.report import TestCounts as Counts
from rust_rewards.runs.findings import completion_findings, failing_tests
from rust_rewards.runs.headlines import headlines
from rust_rewards.runs.records import load_run
from rust_rewards.ui import charts
from rust_rewards.ui.page_style import TABLE_FOOTER_CSS, page_style
from rust_rewards.ui.run_status import run_status

FAILURE = "hidden_add: failed: assertion `left == right` failed"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_training_dir(tmp_path_factory.mktemp("run") / "out")


def test_a_failing_test_is_shown_when_there_are_no_diagnostics() -> None:
    row = Report(has_code=True, build_ok=True, clippy_ok=True,
                 own_tests=Counts(passed=1, failed=1, expected=2, summary_seen=True),
                 hidden_tests=Counts(failed=1, expected=1, summary_seen=True, failures=(FAILURE,))).flat()
    assert row["diagnostics"] == ""
    assert failing_tests(row) == ["hidden tests: 0 of 1 passed", f"  {FAILURE}",
                                  "own tests: 1 of 2 failed (their output is not logged)"]
    text = completion_findings(row)
    assert text.startswith("Failing tests:\n") and FAILURE in text and "no diagnostics" not in text


def test_findings_name_the_other_reasons_and_keep_the_compiler_output() -> None:
    broken = Report(has_code=True, error_codes=("E0308",), diagnostics="error[E0308]: mismatched types",
                    hidden_tests=Counts(expected=1)).flat()
    assert failing_tests(broken) == []  # nothing ran: the compiler's output says why
    assert completion_findings(broken) == "Compiler diagnostics:\nerror[E0308]: mismatched types"
    off_task = Report(has_code=True, build_ok=True, off_task=("fn add",)).flat()
    assert completion_findings(off_task) == "off task, missing: fn add"
    assert completion_findings(Report(has_code=False).flat()) == "No ```rust block in the completion."
    clean = Report(has_code=True, build_ok=True, clippy_ok=True).flat()
    assert completion_findings(clean) == "No compiler diagnostics and no failing test."


def test_rows_stay_readable_without_optional_columns() -> None:
    row = pd.Series({"build_ok": True, "tests_failed": 2, "tests_passed": None, "hidden_total": float("nan")})
    assert failing_tests(row.to_dict()) == ["own tests: 2 of 2 failed (their output is not logged)"]


def test_the_failing_completion_of_a_run_shows_its_failing_test(run_dir: Path) -> None:
    run = load_run(run_dir)
    failing = run.completions[run.completions["verdict"] == "tests fail"].iloc[0].to_dict()
    text = completion_findings(failing)
    assert "hidden tests: 0 of 1 passed" in text and "hidden_add: failed" in text
    assert "own tests: 1 of 1 failed" in text


def test_headline_cards_say_which_steps_they_summarise(run_dir: Path) -> None:
    run = load_run(run_dir)
    cards = {card.label: card for card in headlines(run)}
    assert list(cards) == ["reward, last step (step 3)", "build pass rate, last step (step 3)",
                           "clippy pass rate, last step (step 3)", "tests pass rate, last step (step 3)",
                           "hidden tests pass rate, last step (step 3)"]
    build = cards["build pass rate, last step (step 3)"]
    assert build.value == 1.0
    assert build.caption == f"mean over the last 3 logged steps (1-3): {(0.25 + 0.75 + 1.0) / 3:.3g}"
    assert headlines(run, window=2)[1].caption.startswith("mean over the last 2 logged steps (2-3)")
    _, status = run_status(run_dir)
    assert "reward, last step (step 3)" in status.text and "mean over the last 3 logged steps" in status.text


def test_a_single_step_card_says_so(tmp_path: Path) -> None:
    run = load_run(write_training_dir(tmp_path / "out", {1: [GOOD]}))
    assert {card.caption for card in headlines(run)} == {"the only logged step"}


def test_line_chart_legends_are_drawn_at_full_opacity(run_dir: Path) -> None:
    metrics = load_run(run_dir).metrics
    for make in (charts.reward_chart, charts.components_chart, charts.length_chart, charts.signal_chart,
                 charts.policy_chart, charts.time_chart, charts.share_chart, charts.loss_chart):
        spec = make(metrics, 0.5).to_dict()
        assert spec["layer"][0]["mark"]["opacity"] < 1, make.__name__  # the raw line stays faint
        assert all(layer["encoding"]["color"]["legend"]["symbolOpacity"] == 1 for layer in spec["layer"]), \
            make.__name__


def test_the_page_style_hides_the_cell_selection_note() -> None:
    html = page_style().text
    assert "<style title='marimo-" in html and TABLE_FOOTER_CSS in html  # marimo copies it into shadow roots


@pytest.mark.browser
def test_the_dashboard_as_a_newcomer_reads_it(run_dir: Path, tmp_path: Path) -> None:
    eval_dir = write_eval_dir(tmp_path / "eval")
    marimo = ROOT / ".venv" / "bin" / "marimo"
    port = free_port()
    argv = [str(marimo) if marimo.exists() else "marimo", "run", "viz.py", "--port", str(port), "--host",
            "127.0.0.1", "--headless", "--", "--run", str(run_dir), "--eval", str(eval_dir), "--refresh", "5m"]
    with serve(argv, port, tmp_path / "viz.log") as server, chromium_page(1400, 5200) as page:
        page.goto(server.url)
        page.get_by_text("Summary per model").wait_for(timeout=90_000)
        page.get_by_text("reward, last step (step 3)").wait_for(timeout=30_000)
        evals = page.get_by_role("heading", name="Eval comparison", exact=True).bounding_box()
        completions = page.get_by_role("heading", name="Completions", exact=True).bounding_box()
        assert evals["y"] < completions["y"]  # the eval sits with the training curves, above the completions

        page.locator("tbody tr", has_text="tests fail").first.get_by_role("checkbox").click()
        page.get_by_text("Failing tests:", exact=False).wait_for(timeout=30_000)
        assert has_text(page, "hidden_add: failed")
        assert page.get_by_text("1 selected").first.is_visible()
        notes = page.get_by_text("No selection", exact=True)
        assert not any(notes.nth(i).is_visible() for i in range(notes.count()))
        assert page_errors(page) == [] and page.console_errors == []
