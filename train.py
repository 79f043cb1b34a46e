import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")

with app.setup:
    from pathlib import Path

    import marimo as mo

    from rust_rewards.train.cli import run_command_line
    from rust_rewards.train.config import DEFAULT_PRESET, PRESETS, TrainParams
    from rust_rewards.train.jobs import start_job
    from rust_rewards.ui.forms import param_panel
    from rust_rewards.ui.script import is_script
    from rust_rewards.ui.train_view import (
        field_problem,
        form_controls,
        form_params,
        form_start,
        job_view,
        reward_weight_controls,
        run_summary,
        weights_view,
    )
    from rust_rewards.workspace import use_workspace

    use_workspace(Path(__file__).parent)


@app.cell(hide_code=True)
def _():
    mo.md(r"""
    # Train: GRPO + LoRA with cargo as the judge

    TRL's `GRPOTrainer` samples `num_generations` completions per task prompt, the reward functions
    of `rust_rewards.rewards` score them with the Rust toolchain, and a LoRA adapter learns from the
    group-relative advantages. Three presets: **tiny** (a 0.4M-parameter Qwen2 built and warm-started locally,
    CPU, seconds per step: a smoke test of the whole loop), **smollm2-cpu** (SmolLM2-135M-Instruct, a real
    pretrained model, on CPU) and **real** (Qwen2.5-Coder-1.5B-Instruct on a GPU).
    Script: `python train.py --preset tiny --max-steps 2 --output-dir outputs/t`;
    `python train.py --preset real --dry-run` checks every real setting on CPU before a GPU is rented.
    Outputs: `params.json`, `metrics.jsonl`, `completions/step_NNNNNN.parquet`, `checkpoint-N/`,
    `adapter/`; a rerun with the same `--output-dir` resumes from its last checkpoint.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.stop(is_script())
    cli_values = dict(mo.cli_args())
    preset = mo.ui.dropdown(options=list(PRESETS), value=str(cli_values.get("preset", DEFAULT_PRESET)), label="preset")
    mo.hstack([preset, mo.md("`tiny`: a local 0.4M model on CPU, seconds per step · `smollm2-cpu`: SmolLM2-135M on "
                             "CPU · `real`: Qwen2.5-Coder-1.5B on a GPU (on CPU: switch on **dry run**)")],
              justify="start", gap=1)
    return cli_values, preset


@app.cell(hide_code=True)
def _(cli_values, preset):
    form_defaults, _problem = form_start(cli_values, preset.value)
    controls, reward_pick = form_controls(form_defaults)
    train_button = mo.ui.run_button(label="Train", kind="success")
    field_problem(f"command line: {_problem}") if _problem else None
    return controls, form_defaults, reward_pick, train_button


@app.cell(hide_code=True)
def _(controls, form_problem, reward_pick):
    param_panel(controls, TrainParams, extra={"Rewards": [reward_pick]}, problem=form_problem)
    return


@app.cell(hide_code=True)
def _(form_defaults, reward_pick):
    reward_weights = reward_weight_controls(reward_pick.value, form_defaults)
    mo.vstack([mo.md("**Reward weights** (the total reward is their weighted sum)"),
               mo.hstack(list(reward_weights.elements.values()), wrap=True, justify="start")])
    return (reward_weights,)


@app.cell(hide_code=True)
def _(controls, preset, reward_pick, reward_weights, train_button):
    try:
        checked = form_params(preset.value, {**controls.value, "rewards": reward_pick.value}, reward_weights.value)
        form_problem, _note = None, mo.vstack([weights_view(checked), mo.md(run_summary(checked))])
    except ValueError as _err:
        checked, form_problem = None, str(_err)
        _note = field_problem(form_problem)
    mo.vstack([_note, train_button])
    return checked, form_problem


@app.cell(hide_code=True)
def _():
    get_job, set_job = mo.state(None)
    live_refresh = mo.ui.refresh(options=["1s", "2s", "5s", "10s"], default_interval="2s", label="live update")
    return get_job, live_refresh, set_job


@app.cell(hide_code=True)
def _(checked, get_job, set_job, train_button):
    mo.stop(not train_button.value)
    mo.stop(checked is None, mo.callout(mo.md("Fix the form first (see above)."), kind="warn"))
    _running = get_job()
    mo.stop(_running is not None and _running.returncode() is None,
            mo.callout(mo.md("A run is still going: stop it first."), kind="warn"))
    set_job(start_job(checked))
    return


@app.cell(hide_code=True)
def _(get_job, live_refresh):
    job = get_job()
    stop_button = mo.ui.button(label="Stop (keeps a checkpoint)", kind="danger",
                               on_click=lambda _: job.stop() if job is not None else None)
    live_refresh if job is not None else None
    return job, stop_button


@app.cell(hide_code=True)
def _(job, live_refresh, stop_button):
    live_refresh.value
    job_view(job, stop_button) if job is not None else None
    return


@app.cell(hide_code=True)
def _():
    mo.stop(not is_script())
    run_command_line(mo.cli_args())
    return


if __name__ == "__main__":
    app.run()
