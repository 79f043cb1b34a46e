"""The dashboard and the editor as a person sees them: Debian's chromium driven by Playwright.

The dashboard shows a real tiny training run (``train.py --preset tiny --max-steps 2``) and an eval dir
scored by eval.py's own functions with the real verifier. Screenshots land in pytest's tmp path and in
``screenshots/`` (gitignored) for humans.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from browser import (
    REPO,
    SCREENSHOTS,
    chart_texts,
    chromium_page,
    free_port,
    has_text,
    inner_scroll_areas,
    page_errors,
    require_chromium,
    screenshot,
    serve,
    wait_for_charts,
)

from rust_rewards.params import info_of
from rust_rewards.runs.records import PASS_CHECKS, inspect_run, load_run, pass_rates
from rust_rewards.tasks import Task
from rust_rewards.train.config import TrainParams

pytestmark = pytest.mark.browser

TOKEN = "browser-test-token-5521"
HIDDEN = "#[test]\nfn hidden_add() {\n    assert_eq!(add(2, 2), 4);\n}\n"
GOOD = ("```rust\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n"
        "    use super::*;\n\n    #[test]\n    fn adds() {\n        assert_eq!(add(2, 3), 5);\n    }\n}\n```\n")
BROKEN = "```rust\npub fn add(a: i32, b: i32) -> i32 {\n    a + \"b\"\n}\n```\n"
LINTED = "```rust\npub fn add(a: i32, b: i32) -> i32 {\n    return a + b;\n}\n```\n"


@pytest.fixture(scope="session")
def chromium() -> Path:
    return require_chromium()


@pytest.fixture(scope="session")
def tiny_run(chromium: Path, script_run) -> Path:
    """A real two-step GRPO run of the tiny local model (train.py as a script; conftest's ``script_run``)."""
    state = inspect_run(script_run.out)
    assert state.ok, state.message
    return script_run.out


@pytest.fixture(scope="session")
def eval_dir(chromium: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An eval dir written by eval.py's functions: two models scored by the real verifier."""
    from rust_rewards.eval.metrics import summarize
    from rust_rewards.eval.scoring import score_predictions, write_outputs

    tasks = [Task(task_id=f"add_{i}", prompt="Write `pub fn add(a: i32, b: i32) -> i32`.",
                  reference_tests=HIDDEN, test_shape="unit") for i in range(3)]
    predictions = pd.DataFrame([
        {"model": model, "task_id": f"add_{i}", "sample": 0, "completion": completion}
        for model, completions in (("base", [BROKEN, LINTED, GOOD]), ("grpo", [GOOD, GOOD, LINTED]))
        for i, completion in enumerate(completions)
    ])
    results = score_predictions(tasks, predictions)
    out = tmp_path_factory.mktemp("eval") / "eval"
    write_outputs(out, results, summarize(results))
    return out


def _dashboard(run: Path, eval_dir: Path | None, port: int) -> list[str]:
    argv = [str(REPO / ".venv" / "bin" / "marimo") if (REPO / ".venv" / "bin" / "marimo").exists()
            else "marimo", "run", "viz.py", "--port", str(port), "--host", "127.0.0.1", "--headless",
            "--", "--run", str(run)]
    return argv + (["--eval", str(eval_dir)] if eval_dir else [])


def _assert_clean(page: Any) -> None:
    assert page_errors(page) == []
    assert page.console_errors == []
    # no stray output box: a setup cell ending in a value shows its repr (a PosixPath) above the page
    assert "PosixPath(" not in page.inner_text("body")


def _assert_charts_readable(page: Any, completions: pd.DataFrame) -> None:
    """Every chart as drawn: each legend swatch has its label, no title, legend or axis text runs off the chart; the
    pass rates name every check in order; the eval chart names its metrics as the table under it does, in its order."""
    drawn = {chart.title: chart for chart in chart_texts(page)}
    for chart in drawn.values():
        assert chart.clipped == [] and chart.legend_symbols == len(chart.legend_labels), chart
    checks = set(pass_rates(completions)["check"])
    assert drawn["Pass rates of sampled completions"].legend_labels == [c for c in PASS_CHECKS if c in checks]
    headers = page.locator("marimo-table").filter(has_text="Summary per model").get_by_role("columnheader")
    table = [header.split("\n")[0] for header in headers.all_inner_texts()]
    metrics = [label for label in drawn["Eval: models side by side (95% CI)"].axis_labels if not label.endswith("%")]
    assert len(metrics) >= 4 and metrics == [column for column in table if column in metrics], (metrics, table)


def _set_run_dir(page: Any, path: Path) -> None:
    """Type a new run directory into the dashboard's text field (marimo commits it on Enter)."""
    field = page.locator("input[type='text']").first
    field.fill(str(path))
    field.press("Enter")


def test_dashboard_shows_a_real_training_run(chromium: Path, tiny_run: Path, eval_dir: Path,
                                             tmp_path: Path) -> None:
    run = load_run(tiny_run)
    port = free_port()
    argv = [*_dashboard(tiny_run, eval_dir, port), "--refresh", "5s"]
    with serve(argv, port, tmp_path / "viz.log") as server, chromium_page(1400, 5200) as page:
        page.goto(server.url)
        # training: reward, reward functions, length, clipped, entropy, time, share, pass rates; eval: rates
        charts = wait_for_charts(page, 9)
        page.get_by_text("Summary per model").wait_for(timeout=60_000)
        for heading in ("Rewards", "Completions and policy", "Verdicts of sampled completions", "Eval comparison"):
            assert has_text(page, heading, exact=True), heading
        for text in (f"{len(run.completions)} of {len(run.completions)} completions", "last step"):
            assert has_text(page, text), text
        _assert_clean(page)
        screenshot(page, "dashboard", tmp_path)
        _assert_charts_readable(page, run.completions)

        # the completions table (the eval tables above it have no row checkboxes)
        page.locator("tbody tr").filter(has=page.get_by_role("checkbox")).first.get_by_role("checkbox").click()
        page.get_by_text("Compiled code").wait_for(timeout=30_000)
        page.get_by_text("Diagnostics", exact=True).wait_for(timeout=30_000)
        page.wait_for_timeout(8_000)  # auto-refresh ticks with nothing new: the selection stays
        assert has_text(page, "Compiled code")
        _assert_clean(page)
        screenshot(page, "dashboard-selected-completion", tmp_path)
    assert charts >= 9


def test_dashboard_explains_empty_folders_then_follows_the_run(chromium: Path, tiny_run: Path,
                                                               tmp_path: Path) -> None:
    not_a_run = tmp_path / "not-a-run"
    not_a_run.mkdir()
    (not_a_run / "notes.txt").write_text("nothing here")
    starting = tmp_path / "starting"
    starting.mkdir()
    shutil.copyfile(tiny_run / "params.json", starting / "params.json")
    port = free_port()
    argv = [*_dashboard(not_a_run, None, port), "--refresh", "5s"]
    with serve(argv, port, tmp_path / "viz.log") as server, chromium_page(1400, 900) as page:
        page.goto(server.url)
        page.get_by_text("Not a training run.").wait_for(timeout=60_000)
        _assert_clean(page)
        screenshot(page, "dashboard-not-a-run", tmp_path)

        _set_run_dir(page, starting)
        page.get_by_text("No logs yet.").wait_for(timeout=60_000)
        _assert_clean(page)
        assert page.locator("marimo-vega").count() == 0
        screenshot(page, "dashboard-no-logs-yet", tmp_path)

        # training writes its first steps: the periodic refresh picks them up without a reload
        shutil.copytree(tiny_run / "completions", starting / "completions")
        shutil.copyfile(tiny_run / "metrics.jsonl", starting / "metrics.jsonl")
        wait_for_charts(page, 3, timeout=60)
        page.get_by_text("last step", exact=True).wait_for(timeout=30_000)
        assert not has_text(page, "No logs yet.")
        _assert_clean(page)


def test_editor_asks_for_the_token(chromium: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {"MARIMO_PORT": str(port), "MARIMO_HOST": "127.0.0.1", "MARIMO_TOKEN": TOKEN}
    with serve(["bash", str(REPO / "start_marimo.sh")], port, tmp_path / "editor.log", env=env) as server, \
            chromium_page(1400, 900) as page:
        page.goto(server.url)
        page.locator("input[type='password']").wait_for(timeout=30_000)
        assert "/auth/login" in page.url
        assert not has_text(page, "viz.py")
        screenshot(page, "editor-login", tmp_path)

        page.locator("input[type='password']").fill(TOKEN)
        page.locator("input[type='password']").press("Enter")
        page.get_by_text("Workspace").wait_for(timeout=60_000)
        for notebook in ("process_data.py", "train.py", "inference.py", "eval.py", "viz.py"):
            page.get_by_text(notebook, exact=True).first.wait_for(timeout=30_000)
        _assert_clean(page)
        screenshot(page, "editor-home", tmp_path)

        page.goto(f"{server.url}/?file=viz.py")
        page.locator(".cm-editor").first.wait_for(timeout=60_000)
        assert has_text(page, "from rust_rewards.runs.overview import")  # the notebook's code (its setup cell)
        _assert_clean(page)
        screenshot(page, "editor-notebook", tmp_path)


FIRST_PAINT_BOUND_S = 20.0
"""Page load to a usable form, per notebook, in ``marimo run`` (kernel start + setup cell + form cells): measured
2-9 s on the 2-core machine while the rest of the suite ran; the bound leaves room for a slower CI machine."""
FORMS = {  # notebook -> (command-line args, the control that means the form is usable)
    "process_data.py": (["--tokenizer", "none"], ("button", "Process")),
    "train.py": ([], ("button", "Train")),
    "inference.py": ([], ("button", "Generate")),
    "eval.py": ([], ("button", "Evaluate")),
    "viz.py": ([], ("textbox", "Training output dir")),
}


def _marimo() -> str:
    local = REPO / ".venv" / "bin" / "marimo"
    return str(local) if local.exists() else "marimo"


@pytest.mark.parametrize("notebook", list(FORMS))
def test_every_notebook_shows_its_form_within_seconds(chromium: Path, notebook: str, tmp_path: Path) -> None:
    """From page load to an enabled form control: heavy imports (torch, transformers, TRL) wait for a button."""
    args, (role, name) = FORMS[notebook]
    port = free_port()
    argv = [_marimo(), "run", notebook, "--headless", "--host", "127.0.0.1", "--port", str(port), "--", *args]
    with serve(argv, port, tmp_path / "server.log") as server, chromium_page(1400, 1600) as page:
        start = time.monotonic()
        page.goto(server.url)
        control = page.get_by_role(role, name=name, exact=True).first
        control.wait_for(timeout=int(FIRST_PAINT_BOUND_S * 3000))
        assert control.is_enabled()
        elapsed = time.monotonic() - start
        page.wait_for_timeout(1500)  # let the page settle for the screenshot
        _assert_clean(page)
        screenshot(page, f"form-{notebook.removesuffix('.py')}", tmp_path)
    _record_first_paint(notebook, elapsed)
    assert elapsed < FIRST_PAINT_BOUND_S, f"{notebook}: form after {elapsed:.1f} s"


def _record_first_paint(notebook: str, seconds: float) -> None:
    """Keep the measured times in ``screenshots/first_paint.json`` (README quotes them)."""
    from filelock import FileLock

    record = SCREENSHOTS / "first_paint.json"
    SCREENSHOTS.mkdir(exist_ok=True)
    with FileLock(str(record) + ".lock"):  # pytest-xdist workers may finish two notebooks at once
        times = json.loads(record.read_text()) if record.is_file() else {}
        times[notebook] = round(seconds, 1)
        record.write_text(json.dumps(times, indent=2, sort_keys=True) + "\n")


@pytest.mark.timeout(900)
def test_train_in_the_editor_runs_live(chromium: Path, tmp_path: Path) -> None:
    """``start_marimo.sh`` with a token: train.py opens running; the tiny preset with max steps 2 trains in its own
    process while the page shows progress and a reward chart that fills in; the run folder is a complete run."""
    out = tmp_path / "run"
    port = free_port()
    env = {"MARIMO_PORT": str(port), "MARIMO_HOST": "127.0.0.1", "MARIMO_TOKEN": TOKEN}
    argv = ["bash", str(REPO / "start_marimo.sh"), "--", "--output-dir", str(out)]
    with serve(argv, port, tmp_path / "editor.log", env=env) as server, chromium_page(1400, 1400) as page:
        start = time.monotonic()
        page.goto(f"{server.url}/?file=train.py&access_token={TOKEN}")
        train = page.get_by_role("button", name="Train", exact=True)
        train.wait_for(timeout=120_000)
        editor_paint = time.monotonic() - start
        # the form shows whole: every section is there (the Train button can paint before the rest of the form's
        # cell under load: CI missed "Run" once) and no cell output scrolls inside itself
        infos = info_of(TrainParams).values()
        for heading in [*dict.fromkeys(info.group for info in infos if not info.advanced),
                        *dict.fromkeys(f"Advanced: {info.group}" for info in infos if info.advanced)]:
            page.get_by_text(heading, exact=True).first.wait_for(timeout=60_000)
        assert inner_scroll_areas(page) == []
        page.get_by_text(f"python train.py --preset tiny --output-dir={out}").wait_for(timeout=30_000)
        generations = page.locator("marimo-number[data-label*='num generations'] input")
        generations.fill("3")
        generations.press("Enter")
        from playwright.sync_api import expect

        expect(page.get_by_text("--num-generations 3 must divide the completions per step")).to_have_count(
            2, timeout=30_000)  # under the form and inline under its control
        generations.fill("8")
        generations.press("Enter")
        steps = page.locator("marimo-number[data-label*='max steps'] input")
        steps.fill("2")
        steps.press("Enter")
        page.get_by_text(f"--output-dir={out} --max-steps=2").wait_for(timeout=30_000)
        assert not out.exists() or not (out / "params.json").exists()
        train.click()
        pressed = time.monotonic()
        page.get_by_role("button", name="Stop (keeps a checkpoint)").wait_for(timeout=60_000)
        page.get_by_text("step 2 of 2 logged").first.wait_for(timeout=600_000)
        assert wait_for_charts(page, 1, timeout=60) >= 1
        live_run = time.monotonic() - pressed
        page.get_by_text("step 2 of 2 logged").first.scroll_into_view_if_needed()
        _assert_clean(page)
        screenshot(page, "train-live", tmp_path)
    _record_first_paint("train.py (editor, start_marimo.sh)", editor_paint)
    _record_first_paint("train.py (editor): Train pressed -> 2 steps drawn", live_run)
    run = load_run(out)
    assert list(run.metrics["step"]) == [1, 2]
    assert (out / "checkpoint-2").is_dir() and (out / "adapter" / "adapter_config.json").is_file()
    assert "done: 2 steps" in (out / "train.log").read_text()
