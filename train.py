import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")

with app.setup:
    import dataclasses
    import importlib.util
    import json
    import os
    import shlex
    import shutil
    import typing
    import warnings
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path, PurePosixPath
    from typing import Any

    import marimo as mo

    from rust_rewards.atomic import replace_dir
    from rust_rewards.cpus import cpu_share
    from rust_rewards.data.dpo_pairs import read_pairs
    from rust_rewards.data.importers import load_tasks
    from rust_rewards.data.sft_rows import SFTSet, sft_rows
    from rust_rewards.params import coerce_value, exit_with_usage_if_asked, fill_params, flag_name, info_of, param
    from rust_rewards.prompts import FEEDBACK_INSTRUCTIONS, SYSTEM_PROMPT, chat_messages
    from rust_rewards.report import Report
    from rust_rewards.rewards import DEFAULT_WEIGHTS, REWARD_FUNCS
    from rust_rewards.rewards.cargo_tool import TOOL_FEEDBACK_TOKENS
    from rust_rewards.runs.records import PARAMS_FILE, PARAMS_HISTORY_FILE, STOP_FILE, load_params, param_changes
    from rust_rewards.tasks import Task
    from rust_rewards.train.dry_run import SettingRejected
    from rust_rewards.train.recording import (
        METRICS_FILE,
        TASK_KWARGS,
        InfraGuard,
        InfrastructureError,
        RewardRecorder,
        format_log_line,
        record_start,
    )
    from rust_rewards.train.tiny_model import WarmStart, build_tiny_model
    from rust_rewards.ui.forms import control, param_controls, param_panel, problem_field
    from rust_rewards.verify.single import MODES as VERIFIER_MODES
    from rust_rewards.verify.verifier import BACKENDS as VERIFIER_BACKENDS
    from rust_rewards.verify.verifier import verifier_for

    ROOT = Path(__file__).resolve().parent
    REAL_MODEL = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    PRESETS = ("tiny", "real")
    RESUME_CHOICES = ("auto", "yes", "no")
    STAGES = ("grpo", "sft", "dpo")
    VLLM_MODES = ("colocate", "server")
    TOOL_MODEL_SUFFIX = "-tools"
    TOOL_WARM_SHARE, TOOL_WARM_STEPS = 0.3, 400
    """The tiny model for ``--feedback-turns``: 30% of its warm-start prompts also taught to call ``cargo_check``,
    400 steps (``rust_rewards.train.tiny_model.tool_pairs``)."""
    LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")
    SCALE_REWARDS = ("group", "batch", "none")
    LR_SCHEDULERS = ("cosine", "linear", "constant", "constant_with_warmup", "cosine_with_restarts", "polynomial",
                     "inverse_sqrt")
    """transformers' schedulers that need no extra arguments."""
    REWARD_NAMES = tuple(f.__name__ for f in REWARD_FUNCS)
    RUN_DIRS = ("outputs/*/", "outputs/*/run/")
    MODEL_DIRS = ("outputs/tiny-model*/",)
    ADAPTER_DIRS = ("outputs/*/adapter/", "outputs/*/checkpoint-*/")
    TASK_FILES = ("qwen3-rust-finetune/*.jsonl", "qwen3-rust-finetune/**/*.parquet")


@app.cell(hide_code=True)
def _():
    mo.md(r"""
    # Train: GRPO + LoRA with cargo as the judge

    TRL's `GRPOTrainer` samples `num_generations` completions per task prompt, the reward functions
    of `rust_rewards.rewards` score them with the Rust toolchain, and a LoRA adapter learns from the
    group-relative advantages. Two presets: **tiny** (a 0.4M-parameter Qwen2 built and warm-started locally,
    CPU, seconds per step: a smoke test of the whole loop) and **real** (Qwen2.5-Coder-1.5B-Instruct
    on a GPU). Script: `python train.py --preset tiny --max-steps 2 --output-dir outputs/t`;
    `python train.py --preset real --dry-run` checks every real setting on CPU before a GPU is rented.
    Outputs: `params.json`, `metrics.jsonl`, `completions/step_NNNNNN.parquet`, `checkpoint-N/`,
    `adapter/`; a rerun with the same `--output-dir` resumes from its last checkpoint.
    """)
    return


@app.class_definition
@dataclasses.dataclass
class TrainParams:
    """Every knob of a training run, with its help, group, choices and bounds (``rust_rewards.params``): the
    command line (``--max-steps 2``, - or _) and the notebook's form are built from these definitions.

    The defaults are the ``real`` preset; ``preset_params("tiny")`` overrides a few of them.
    ``None`` means "decide from the hardware" (bf16 and vLLM on CUDA, CPU otherwise).

    Choices that differ from the published run or from TRL's defaults:
    ``num_generations=8`` (published: 4): a larger group gives a less noisy group-relative baseline
    and fewer all-equal groups (zero advantage, no signal). ``lr=2e-5``: TRL's 1e-6 default is meant
    for full fine-tuning; a LoRA adapter starts at zero and needs a larger step (published: 5e-6 with
    the same LoRA), while ``max_grad_norm=0.1`` still bounds each update. ``loss_type="dapo"`` and
    ``beta=0.0`` are TRL 1.16's defaults (no reference model, token-level loss). ``per_device_train_batch_size``
    counts completions: 8 x 4 accumulation steps = 32 completions = 4 prompts per optimizer step.
    A verification that fails for infrastructure reasons (``Report.internal_error``: sandbox, toolchain,
    verifier crash) scores None; training stops with ``InfrastructureError`` past the ``max_internal_error_*``
    limits, keeping the last checkpoint. ``feedback_turns`` K > 0: each rollout may call the ``cargo_check`` tool
    up to K times before its final answer, which alone is rewarded (``rust_rewards.rewards.cargo_tool``); the tiny
    preset then builds ``outputs/tiny-model-tools``, warm-started to call the tool. ``load_in_4bit`` (QLoRA): the
    base model's linear layers in bitsandbytes NF4 on a CUDA GPU, generation without vLLM (``check_load_in_4bit``).
    """

    preset: str = param("real", help="`real`: Qwen2.5-Coder-1.5B on a GPU; `tiny`: a 0.4M local model on CPU",
                        group="Run", choices=PRESETS)
    stage: str = param("grpo", help="`grpo`: reinforcement learning with cargo rewards; `sft`: supervised training "
                       "on the verified reference answers; `dpo`: offline preference training on cargo-ranked pairs "
                       "(`--dpo-pairs`)", group="Run", choices=STAGES)
    output_dir: str = param("outputs/train-real", help="run folder: params, metrics.jsonl, completions, "
                            "checkpoints, adapter/", group="Run", files=RUN_DIRS)
    max_steps: int = param(-1, help="optimizer steps (-1: `num_train_epochs` over the data)", group="Run",
                           bounds=(-1, None))
    resume: str = param("auto", help="`auto`: from the last checkpoint in the run folder if any; `yes`: require "
                        "one; `no`: refuse a folder that has one; or a checkpoint folder", group="Run")
    dry_run: bool = param(False, help="real preset only: check every setting on CPU with a 2-layer model of the "
                          "same shape, one step, checkpoint, resume; print the GPU memory plan", group="Run")
    model: str = param(REAL_MODEL, help="hub name or local folder of the base model", group="Model and data",
                       files=MODEL_DIRS)
    init_adapter: str = param("", help="continue training this LoRA adapter (e.g. an SFT run's `adapter/`) "
                              "instead of a fresh one", group="Model and data", files=ADAPTER_DIRS)
    data: str = param("qwen3-rust-finetune/processed/train.parquet", help="tasks: parquet/jsonl from "
                      "process_data.py, or a Hugging Face dataset name", group="Model and data", files=TASK_FILES)
    dpo_pairs: str = param("", help="`--stage dpo`: preference pairs (jsonl/parquet with prompt, chosen, rejected; "
                           "`rust_rewards.data.dpo_pairs.build_pairs` + `write_pairs`)", group="Model and data")
    dpo_beta: float = param(0.1, help="`--stage dpo`: DPO's beta, how far the policy may move from the base model",
                            group="Model and data", advanced=True, bounds=(0.0, 10.0), step=0.01)
    build_tiny_model: bool = param(False, help="build and warm-start the tiny local model at `model` if missing",
                                   group="Model and data", advanced=True)
    data_split: str = param("", help="split of a Hugging Face dataset (empty: train)", group="Model and data",
                            advanced=True)
    max_tasks: int = param(0, help="use the first N tasks (0: all)", group="Model and data", advanced=True,
                           bounds=(0, None))
    rewards: list[str] = param(default_factory=lambda: list(REWARD_NAMES), help="reward functions of "
                               "`rust_rewards.rewards` to train with", group="Rewards", choices=REWARD_NAMES)
    reward_weights: str = param("", help="weights that differ from 1.0, `name=weight,...` "
                                "(e.g. `test_reward=2,build_reward=0.5`)", group="Rewards")
    feedback_turns: int = param(0, help="cargo_check tool calls a rollout may make before its final answer "
                                "(0: single-turn GRPO)", group="Rewards", bounds=(0, 16))
    num_generations: int = param(8, help="completions per prompt (the GRPO group)", group="GRPO",
                                 bounds=(2, 256))
    max_completion_length: int = param(768, help="tokens per completion", group="GRPO", bounds=(16, 32768),
                                       step=16)
    temperature: float = param(1.0, help="sampling temperature of the rollouts", group="GRPO",
                               bounds=(0.01, 4.0), step=0.05)
    per_device_train_batch_size: int = param(8, help="completions per micro-batch on each GPU", group="GRPO",
                                             bounds=(1, 4096))
    gradient_accumulation_steps: int = param(4, help="micro-batches per optimizer step", group="GRPO",
                                             bounds=(1, 4096))
    loss_type: str = param("dapo", help="TRL's GRPO loss normalisation", group="GRPO", advanced=True,
                           choices=LOSS_TYPES)
    scale_rewards: str = param("group", help="divide advantages by the reward std of the group, the batch, or not",
                               group="GRPO", advanced=True, choices=SCALE_REWARDS)
    beta: float = param(0.0, help="KL penalty to the base model (0: no reference model)", group="GRPO",
                        advanced=True, bounds=(0.0, 10.0), step=0.01)
    top_p: float = param(1.0, help="nucleus sampling of the rollouts", group="GRPO", advanced=True,
                         bounds=(0.01, 1.0), step=0.01)
    lr: float = param(2e-5, help="peak learning rate of the LoRA adapter", group="Optimizer", bounds=(0.0, 1.0),
                      step=1e-6)
    lr_scheduler_type: str = param("cosine", help="learning-rate schedule after warm-up", group="Optimizer",
                                   choices=LR_SCHEDULERS)
    num_train_epochs: float = param(1.0, help="passes over the data when max steps is -1", group="Optimizer",
                                    advanced=True, bounds=(0.0, None), step=0.5)
    warmup_ratio: float = param(0.1, help="share of the steps spent warming up", group="Optimizer",
                                advanced=True, bounds=(0.0, 1.0), step=0.01)
    weight_decay: float = param(0.1, help="AdamW weight decay", group="Optimizer", advanced=True,
                                bounds=(0.0, 1.0), step=0.01)
    adam_beta2: float = param(0.99, help="AdamW beta2", group="Optimizer", advanced=True, bounds=(0.0, 1.0),
                              step=0.001)
    max_grad_norm: float = param(0.1, help="gradient clipping norm", group="Optimizer", advanced=True,
                                 bounds=(0.0, None), step=0.1)
    lora_r: int = param(16, help="LoRA rank", group="LoRA", advanced=True, bounds=(1, 1024))
    lora_alpha: int = param(64, help="LoRA scaling numerator (scale = alpha / r)", group="LoRA", advanced=True,
                            bounds=(1, 4096))
    lora_dropout: float = param(0.05, help="dropout on the LoRA input", group="LoRA", advanced=True,
                                bounds=(0.0, 0.9), step=0.01)
    lora_target_modules: str = param("all-linear", help="`all-linear` or comma-separated module names",
                                     group="LoRA", advanced=True)
    bf16: bool | None = param(None, help="bfloat16 weights and compute (auto: on CUDA)", group="Hardware",
                              advanced=True)
    load_in_4bit: bool = param(False, help="QLoRA: the base model's linear layers in bitsandbytes NF4 (double "
                               "quantization, bf16 compute) for 24 GiB cards; CUDA only, generates without vLLM",
                               group="Hardware", advanced=True)
    use_cpu: bool | None = param(None, help="train on the CPU (auto: when there is no CUDA)", group="Hardware",
                                 advanced=True)
    gradient_checkpointing: bool = param(True, help="recompute activations in backward: less memory, ~30% "
                                         "slower", group="Hardware", advanced=True)
    torch_threads: int = param(0, help="torch CPU threads during the run (0: torch's default; the tiny model is "
                               "fastest on 1)", group="Hardware", advanced=True, bounds=(0, 1024))
    use_vllm: bool | None = param(None, help="generate with vLLM (auto: when installed and on CUDA, off with "
                                  "--load-in-4bit)", group="vLLM", advanced=True)
    vllm_mode: str = param("colocate", help="`colocate`: on the training GPU, asleep while training; `server`: "
                           "`trl vllm-serve` elsewhere", group="vLLM", advanced=True, choices=VLLM_MODES)
    vllm_gpu_memory_utilization: float = param(0.3, help="colocate: share of the GPU vLLM may take", group="vLLM",
                                               advanced=True, bounds=(0.01, 1.0), step=0.05)
    vllm_server_host: str = param("0.0.0.0", help="server mode: host of `trl vllm-serve`", group="vLLM",
                                  advanced=True)
    vllm_server_port: int = param(8000, help="server mode: its port", group="vLLM", advanced=True,
                                  bounds=(1, 65535))
    vllm_server_timeout: float = param(240.0, help="server mode: seconds to wait for the server at start",
                                       group="vLLM", advanced=True, bounds=(1.0, None), step=10.0)
    save_steps: int = param(100, help="write a checkpoint every N steps", group="Checkpoints and logs",
                            bounds=(1, None))
    wandb: bool = param(False, help="log to Weights & Biases (`WANDB_MODE=offline` works without a network)",
                        group="Checkpoints and logs")
    save_total_limit: int = param(3, help="checkpoints kept (older ones deleted)", group="Checkpoints and logs",
                                  advanced=True, bounds=(1, None))
    logging_steps: int = param(1, help="a metrics.jsonl line every N steps", group="Checkpoints and logs",
                               advanced=True, bounds=(1, None))
    completions_every: int = param(1, help="write every completion of every Nth step (0: never)",
                                   group="Checkpoints and logs", advanced=True, bounds=(0, None))
    run_name: str = param("", help="name in wandb and Oxen (empty: the run folder's name)",
                          group="Checkpoints and logs", advanced=True)
    wandb_project: str = param("rust-grpo", help="wandb project", group="Checkpoints and logs", advanced=True)
    oxen_repo: str = param("", help="Oxen.ai repository to upload the run to at the end (empty: none)",
                           group="Checkpoints and logs", advanced=True)
    oxen_dest: str = param("", help="folder in that repository (empty: runs/<run name>)",
                           group="Checkpoints and logs", advanced=True)
    seed: int = param(0, help="random seed", group="Checkpoints and logs", advanced=True, bounds=(0, 2**31 - 1))
    max_internal_error_share: float = param(0.5, help="stop when more than this share of a step's completions "
                                            "failed for infrastructure reasons (1: never)", group="Safety",
                                            advanced=True, bounds=(0.0, 1.0), step=0.05)
    max_internal_error_steps: int = param(3, help="stop after this many consecutive steps with any "
                                          "infrastructure failure (0: never)", group="Safety", advanced=True,
                                          bounds=(0, None))
    eval_tasks: str = param("", help="held-out task file (jsonl/parquet) to evaluate the policy on during training "
                            "(empty: off)", group="Held-out evaluation", files=TASK_FILES)
    eval_every: int = param(0, help="evaluate every N optimizer steps (0: only at the end of training)",
                            group="Held-out evaluation", bounds=(0, None))
    eval_n: int = param(1, help="completions sampled per held-out task", group="Held-out evaluation",
                        bounds=(1, 64))
    eval_limit: int = param(0, help="evaluate on the first M held-out tasks (0: all)", group="Held-out evaluation",
                            bounds=(0, None))
    eval_max_new_tokens: int = param(0, help="tokens per held-out completion (0: --max-completion-length)",
                                     group="Held-out evaluation", advanced=True, bounds=(0, 32768))
    verifier: str = param("local", help="where cargo runs: this machine's pool or a Ray cluster", group="Verifier",
                          advanced=True, choices=VERIFIER_BACKENDS)
    ray_address: str = param("auto", help="Ray cluster: `auto`, `local` or HOST:PORT", group="Verifier",
                             advanced=True)
    verifier_mode: str = param("direct", help="`direct`: one crate per completion; `batch`: compile a batch "
                               "together", group="Verifier", advanced=True, choices=VERIFIER_MODES)

    def prompts_per_step(self) -> float:
        """Distinct task prompts per optimizer step (one process)."""
        completions = self.per_device_train_batch_size * self.gradient_accumulation_steps
        return completions / self.num_generations


@app.function
def preset_params(preset: str = "tiny") -> TrainParams:
    """The ``real`` (GPU, Qwen2.5-Coder-1.5B) or ``tiny`` (CPU, random local model) parameter set."""
    if preset == "real":
        return TrainParams()
    if preset == "tiny":
        return TrainParams(
            preset="tiny",
            model="outputs/tiny-model",
            build_tiny_model=True,
            data="qwen3-rust-finetune/bundled_tasks.jsonl",
            output_dir="outputs/train-tiny",
            max_steps=8,
            lr=5e-4,
            weight_decay=0.0,
            max_grad_norm=1.0,
            num_generations=8,
            max_completion_length=128,
            per_device_train_batch_size=16,
            gradient_accumulation_steps=1,
            gradient_checkpointing=False,
            use_vllm=False,
            torch_threads=1,
            save_steps=4,
            save_total_limit=2,
        )
    raise ValueError(f"unknown preset {preset!r}; choose one of {PRESETS}")


@app.function
def resume_value(value: Any) -> str:
    """``--resume`` alone means ``yes``; true/false mean yes/no; anything else (auto, a path) is kept."""
    text = str(value).strip()
    return {"": "yes", "true": "yes", "false": "no"}.get(text.lower(), text)


@app.function
def params_from_mapping(values: Mapping[str, Any]) -> TrainParams:
    """Fill ``TrainParams`` from CLI args or form values: the preset first, then each override.

    Unknown names and values of the wrong type, outside their choices or bounds raise ``ValueError`` naming the
    flag.
    """
    exit_with_usage_if_asked(TrainParams, values, "train.py")
    values = {str(k).replace("-", "_"): v for k, v in values.items()}
    base = preset_params(str(values.pop("preset", "tiny")))
    if "resume" in values:
        values["resume"] = resume_value(values["resume"])
    return fill_params(TrainParams, values, base)


@app.function
def local_path(value: str, default: str) -> str:
    """An absolute path: the preset's default is relative to the repository root, anything else to the
    current directory."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return str(path)
    return str(ROOT / path) if value == default else str(path.resolve())


@app.function
def validate_params(p: TrainParams) -> TrainParams:
    """``p`` unchanged when its values fit together; else ``ValueError`` naming the flag (what the command line
    and the form both show before anything runs)."""
    hints = typing.get_type_hints(TrainParams)
    for name, info in info_of(TrainParams).items():
        coerce_value(flag_name(name), hints[name], getattr(p, name), info)
    if p.resume not in RESUME_CHOICES and not Path(p.resume).is_dir():
        raise ValueError(f"--resume: expected one of {RESUME_CHOICES} or a checkpoint folder, got {p.resume!r}")
    if p.init_adapter and not (Path(p.init_adapter) / "adapter_config.json").is_file():
        raise ValueError(f"--init-adapter {p.init_adapter}: no adapter_config.json there (expected a LoRA adapter "
                         "folder such as an SFT run's OUT/adapter)")
    if p.stage == "dpo" and not p.dpo_pairs:
        raise ValueError("--dpo-pairs: `--stage dpo` needs a file of preference pairs (rust_rewards.data.dpo_pairs)")
    if p.stage == "dpo" and not Path(p.dpo_pairs).is_file():
        raise ValueError(f"--dpo-pairs {p.dpo_pairs}: no such file")
    if p.stage == "dpo" and p.feedback_turns:
        raise ValueError("--feedback-turns: the dpo stage trains on fixed pairs, it runs no rollouts (use 0)")
    room = p.feedback_turns * TOOL_FEEDBACK_TOKENS + 64
    if p.feedback_turns and p.max_completion_length < room:
        raise ValueError(f"--feedback-turns {p.feedback_turns}: the tool's answers (up to {TOOL_FEEDBACK_TOKENS} "
                         f"tokens each) count against --max-completion-length {p.max_completion_length}, leaving no "
                         f"room for a final answer: use at least {room}")
    completions = p.per_device_train_batch_size * p.gradient_accumulation_steps
    if completions % p.num_generations:
        raise ValueError(
            f"--num-generations {p.num_generations} must divide the completions per step, "
            f"--per-device-train-batch-size x --gradient-accumulation-steps ({completions})")
    check_eval_params(p)
    check_load_in_4bit(p, this_machine=False)
    select_rewards(p)
    return p


@app.function
def check_eval_params(p: TrainParams) -> None:
    """The held-out evaluation flags' refusals (``ValueError`` naming the flag)."""
    if not p.eval_tasks:
        for name in ("eval_every", "eval_limit", "eval_max_new_tokens"):
            if getattr(p, name) != getattr(TrainParams, name):
                raise ValueError(f"{flag_name(name)} {getattr(p, name)}: needs --eval-tasks (a held-out task file)")
        return
    if not Path(p.eval_tasks).is_file():
        raise ValueError(f"--eval-tasks {p.eval_tasks}: no such file (a jsonl/parquet task file)")
    if p.max_steps > 0 and p.eval_every > p.max_steps:
        raise ValueError(f"--eval-every {p.eval_every} is more than --max-steps {p.max_steps}: it would only "
                         "evaluate at the end (use --eval-every 0 for that)")


@app.function
def bitsandbytes_importable() -> bool:
    """Whether ``import bitsandbytes`` works here (installed, and its native library loads)."""
    try:
        import bitsandbytes  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install (missing CUDA library) fails here, not with ImportError
        return False
    return True


@app.function
def check_load_in_4bit(p: TrainParams, this_machine: bool = True) -> None:
    """``--load-in-4bit``'s refusals, one ``ValueError`` each (the command line prints ``train.py: MESSAGE``).

    bitsandbytes' 4-bit kernels run on CUDA only. vLLM is refused in both modes: TRL hands vLLM the policy at every
    generation by merging the adapter into the base, which for a 4-bit base re-quantizes it each time (lossy, TRL
    issue #3466) and yields packed NF4 tensors (a bf16 server's loader fails on them, TRL issue #4973); a 4-bit run
    generates with transformers instead (auto ``use_vllm`` is off). ``this_machine=False`` checks the settings only
    (before they are resolved, or the dry run's view of the GPU machine): auto (None) values pass and this machine's
    CUDA and bitsandbytes are not asked.
    """
    if not p.load_in_4bit:
        return
    if this_machine:
        import torch

        if not torch.cuda.is_available():
            raise ValueError("--load-in-4bit needs a CUDA GPU: bitsandbytes' 4-bit kernels do not run on CPU")
        if not bitsandbytes_importable():
            raise ValueError("--load-in-4bit needs bitsandbytes: pip install bitsandbytes")
    if p.use_cpu:
        raise ValueError("--load-in-4bit with --use-cpu true: bitsandbytes' 4-bit kernels do not run on CPU; train "
                         "on the GPU (--use-cpu false) or unquantized")
    if p.use_vllm and p.vllm_mode == "colocate":
        raise ValueError("--load-in-4bit with vLLM colocate: colocate vLLM runs beside the policy and is reloaded "
                         "with its merged weights at every generation, and it cannot take a bitsandbytes 4-bit "
                         "policy (the merge re-quantizes the 4-bit base each time, TRL issue #3466); generate "
                         "without vLLM: --use-vllm false (--vllm-mode server cannot take it either, TRL issue #4973)")
    if p.use_vllm:
        raise ValueError("--load-in-4bit with --vllm-mode server: TRL sends the server the policy merged into its "
                         "4-bit base at every generation, as packed NF4 tensors a bf16 server cannot load (TRL issue "
                         "#4973); generate without vLLM: --use-vllm false")


@app.function
def remove_stale_stop(out: Path) -> None:
    """Remove a STOP file older than this process (left by a run that ended before it saw it); one written since
    it started (Stop pressed while the run was loading) stays and stops the run after its first step."""
    import psutil

    stop = out / STOP_FILE
    try:
        if stop.stat().st_mtime < psutil.Process().create_time():
            stop.unlink(missing_ok=True)
    except FileNotFoundError:
        pass


@app.function
def resolve_params(params: TrainParams) -> TrainParams:
    """Fill the hardware-dependent fields and make paths absolute; validate the rest."""
    import torch

    p = validate_params(params)
    cuda = torch.cuda.is_available()
    use_vllm = p.use_vllm
    if use_vllm is None:
        use_vllm = cuda and importlib.util.find_spec("vllm") is not None and not p.load_in_4bit
    elif use_vllm and importlib.util.find_spec("vllm") is None:
        raise ValueError("--use-vllm true needs the vllm package (pip install '.[gpu]')")
    preset = preset_params(p.preset)
    model, data = p.model, p.data
    default_model = preset.model + TOOL_MODEL_SUFFIX if p.feedback_turns and p.build_tiny_model else preset.model
    if model == preset.model:
        model = default_model
    if p.build_tiny_model or Path(model).exists() or model == default_model and (ROOT / model).exists():
        model = local_path(model, default_model)
    if Path(data).exists() or data == preset.data:
        data = local_path(data, preset.data)
    # the sft and dpo stages' default folders are their own: GRPO's default would auto-resume their checkpoints
    stage_default = preset.output_dir if p.stage == "grpo" else f"outputs/{p.stage}-{p.preset}"
    output_dir = local_path(stage_default if p.output_dir == preset.output_dir else p.output_dir, stage_default)
    resolved = dataclasses.replace(
        p,
        model=model,
        data=data,
        output_dir=output_dir,
        run_name=p.run_name or Path(output_dir).name,
        bf16=cuda if p.bf16 is None else p.bf16,
        use_cpu=(not cuda) if p.use_cpu is None else p.use_cpu,
        use_vllm=use_vllm,
        oxen_dest=p.oxen_dest or f"runs/{p.run_name or Path(output_dir).name}",
        init_adapter=str(Path(p.init_adapter).resolve()) if p.init_adapter else "",
        dpo_pairs=str(Path(p.dpo_pairs).resolve()) if p.dpo_pairs else "",
        eval_tasks=str(Path(p.eval_tasks).resolve()) if p.eval_tasks else "",
    )
    check_load_in_4bit(resolved)
    return resolved


@app.function
def select_rewards(params: TrainParams) -> tuple[list[Callable[..., Any]], dict[str, float]]:
    """The reward functions to train with (the async ones: TRL runs them concurrently) and their weights."""
    from rust_rewards import rewards as rr

    by_name = {f.__name__: f for f in rr.ASYNC_REWARD_FUNCS}
    missing = [n for n in params.rewards if n not in by_name]
    if missing or not params.rewards:
        raise ValueError(f"--rewards: expected one or more of {', '.join(by_name)}; got {params.rewards}")
    funcs = [by_name[n] for n in params.rewards]
    weights = {f.__name__: float(rr.DEFAULT_WEIGHTS.get(f.__name__, 1.0)) for f in funcs}
    for item in filter(None, (s.strip() for s in params.reward_weights.split(","))):
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in weights:
            raise ValueError(f"--reward-weights: expected name=weight with name in {sorted(weights)}, got {item!r}")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--reward-weights: {item!r} has a weight that is not a number") from None
    return funcs, weights


@app.function
def load_train_tasks(params: TrainParams) -> list[Task]:
    """The training tasks (any source ``load_tasks`` reads), the first ``max_tasks`` when > 0."""
    tasks = list(load_tasks(params.data, split=params.data_split or None))
    if not tasks:
        raise ValueError(f"{params.data}: no tasks to train on")
    return tasks[: params.max_tasks] if params.max_tasks > 0 else tasks


@app.function
def task_dataset(tasks: Sequence[Task], feedback: bool = False):
    """A ``datasets.Dataset`` with a conversational ``prompt`` and the columns reward functions read; with
    ``feedback`` the system prompt also offers the ``cargo_check`` tool."""
    from datasets import Dataset

    system = SYSTEM_PROMPT + FEEDBACK_INSTRUCTIONS if feedback else SYSTEM_PROMPT
    rows = []
    for task in tasks:
        row = {**task.to_row(), "task_prompt": task.prompt}
        rows.append({"prompt": chat_messages(task.prompt, system), **{k: row[k] for k in TASK_KWARGS}})
    return Dataset.from_list(rows)


@app.function
def task_reports(completions: Sequence[Any], columns: Mapping[str, list[Any]]) -> list[Report]:
    """The verifier's reports for one batch, asked exactly as the rewards ask (so they are cache hits)."""
    from rust_rewards.rewards import reports_for

    return reports_for(list(completions), **columns)


@app.function
def find_checkpoint(output_dir: str | Path, resume: str) -> str | None:
    """The checkpoint to resume from: the last one in ``output_dir`` for auto/yes, or an explicit folder.

    ``yes`` without any checkpoint and ``no`` with checkpoints present are errors (a fresh run must
    not mix its logs with an older run's).
    """
    from transformers.trainer_utils import get_last_checkpoint

    if resume not in RESUME_CHOICES:
        return resume
    last = get_last_checkpoint(str(output_dir)) if Path(output_dir).is_dir() else None
    if resume == "yes" and last is None:
        raise FileNotFoundError(f"--resume: no checkpoint-N folder in {output_dir}")
    if resume == "no" and last is not None:
        raise FileExistsError(f"{output_dir} already holds {Path(last).name}: resume it (default) or choose "
                              "another --output-dir")
    return last


@app.function
def vllm_kwargs(params: TrainParams) -> dict[str, Any]:
    """``GRPOConfig``'s vLLM fields for resolved params (none without vLLM).

    Colocate: vLLM takes ``vllm_gpu_memory_utilization`` of the training GPU and sleeps (weights and KV cache
    offloaded) during the optimizer step. Server: generation by ``trl vllm-serve`` at host:port.
    """
    p = params
    if not p.use_vllm:
        return {}
    if p.vllm_mode == "colocate":
        return dict(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=p.vllm_gpu_memory_utilization,
                    vllm_enable_sleep_mode=True)
    return dict(use_vllm=True, vllm_mode="server", vllm_server_host=p.vllm_server_host,
                vllm_server_port=p.vllm_server_port, vllm_server_timeout=p.vllm_server_timeout)


@app.function
def trainer_args(p: TrainParams) -> dict[str, Any]:
    """The ``TrainingArguments`` both stages share: optimizer, schedule, precision, device, checkpoints, logging."""
    return dict(
        output_dir=p.output_dir,
        run_name=p.run_name,
        max_steps=p.max_steps,
        num_train_epochs=p.num_train_epochs,
        learning_rate=p.lr,
        lr_scheduler_type=p.lr_scheduler_type,
        warmup_steps=p.warmup_ratio,
        weight_decay=p.weight_decay,
        adam_beta2=p.adam_beta2,
        max_grad_norm=p.max_grad_norm,
        bf16=p.bf16,
        use_cpu=p.use_cpu,
        gradient_checkpointing=p.gradient_checkpointing,
        # a 4-bit base is loaded here (base_model): TRL would only warn that model_init_kwargs go unused
        model_init_kwargs=None if p.load_in_4bit else {"dtype": "bfloat16" if p.bf16 else "float32"},
        save_strategy="steps",
        save_steps=p.save_steps,
        save_total_limit=p.save_total_limit,
        logging_steps=p.logging_steps,
        report_to=["wandb"] if p.wandb else "none",
        disable_tqdm=True,
        seed=p.seed,
    )


@app.function
def run_callbacks(p: TrainParams, log: Any, progress: Callable[[int, int, dict[str, Any]], None] | None) -> list[Any]:
    """A run's callbacks: its ``metrics.jsonl`` writer, the stop-file check, then progress lines; sets the wandb
    project when logging."""
    from rust_rewards.train.callbacks import ProgressCallback, StopFileCallback

    if p.wandb:
        os.environ.setdefault("WANDB_PROJECT", p.wandb_project)
    return [log, StopFileCallback(p.output_dir)] + ([] if progress is None else [ProgressCallback(progress)])


@app.function
def eval_callbacks(p: TrainParams) -> list[Any]:
    """The held-out evaluation callback (``rust_rewards.train.evaluation``) when ``--eval-tasks`` is set, else none:
    its tasks (the first ``eval_limit``), its own copy of the tokenizer, the rollouts' temperature and top-p."""
    if not p.eval_tasks:
        return []
    from transformers import AutoTokenizer

    from rust_rewards.eval.generation import SamplingParams
    from rust_rewards.train.evaluation import HeldOutEvalCallback

    tasks = list(load_tasks(p.eval_tasks))
    tasks = tasks[: p.eval_limit] if p.eval_limit > 0 else tasks
    if not tasks:
        raise ValueError(f"--eval-tasks {p.eval_tasks}: no tasks in it")
    sampling = SamplingParams(n=p.eval_n, temperature=p.temperature, top_p=p.top_p, seed=p.seed,
                              max_new_tokens=p.eval_max_new_tokens or p.max_completion_length)
    tokenizer = AutoTokenizer.from_pretrained(p.model, padding_side="left")
    return [HeldOutEvalCallback(p.output_dir, tasks, tokenizer, sampling, p.eval_every, use_wandb=p.wandb)]


@app.function
def with_our_callbacks_first(trainer: Any) -> Any:
    """Drop the Trainer's printer (our progress lines replace it) and move wandb's callback after ours, so the
    metrics our callbacks add (``reward_share``, ``verify/*``) reach wandb too."""
    from transformers import PrinterCallback
    from transformers.integrations import WandbCallback

    trainer.pop_callback(PrinterCallback)
    wandb_callback = trainer.pop_callback(WandbCallback)
    if wandb_callback is not None:
        trainer.add_callback(wandb_callback)
    return trainer


@app.function
def grpo_config(params: TrainParams, weights: Sequence[float]):
    """TRL's ``GRPOConfig`` for resolved params."""
    from trl import GRPOConfig

    p = params
    return GRPOConfig(
        **trainer_args(p),
        beta=p.beta,
        loss_type=p.loss_type,
        scale_rewards=p.scale_rewards,
        num_generations=p.num_generations,
        max_completion_length=p.max_completion_length,
        temperature=p.temperature,
        top_p=p.top_p,
        per_device_train_batch_size=p.per_device_train_batch_size,
        gradient_accumulation_steps=p.gradient_accumulation_steps,
        reward_weights=list(weights),
        log_completions=False,
        **({"max_tool_calling_iterations": p.feedback_turns} if p.feedback_turns else {}),
        **vllm_kwargs(p),
    )


@app.function
def lora_config(params: TrainParams):
    from peft import LoraConfig

    targets = params.lora_target_modules
    return LoraConfig(
        r=params.lora_r,
        lora_alpha=params.lora_alpha,
        lora_dropout=params.lora_dropout,
        target_modules=targets if targets == "all-linear" else [t.strip() for t in targets.split(",")],
        task_type="CAUSAL_LM",
    )


@app.function
def finished_run(checkpoint: str | None, max_steps: int) -> dict[str, Any] | None:
    """The checkpoint's trainer state when it already reached the target step count, else None.

    The target is ``max_steps`` when > 0, else the step count the checkpointed run planned (epochs).
    Resuming a finished run would otherwise train one step past the target.
    """
    if checkpoint is None:
        return None
    state_file = Path(checkpoint) / "trainer_state.json"
    if not state_file.is_file():
        raise FileNotFoundError(f"{checkpoint}: no trainer_state.json, not a Trainer checkpoint")
    state = json.loads(state_file.read_text(encoding="utf-8"))
    target = max_steps if max_steps > 0 else int(state.get("max_steps") or 0)
    return state if target > 0 and int(state.get("global_step", 0)) >= target else None


@app.function
def adapter_from_checkpoint(checkpoint: Path, target: Path) -> Path:
    """Copy a checkpoint's adapter and tokenizer files (no optimizer state) to ``target``; an adapter
    already there is swapped out atomically (``replace_dir``), never deleted first."""
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(checkpoint, tmp, ignore=shutil.ignore_patterns(
        "optimizer.pt", "scheduler.pt", "rng_state*.pth", "trainer_state.json", "training_args.bin"))
    return replace_dir(tmp, target)


@app.function
def save_adapter(trainer: Any, target: Path) -> Path:
    """Save the final LoRA adapter (and tokenizer) to a temporary sibling folder, then swap it in
    atomically (``replace_dir``): there is always a complete adapter at ``target`` once there was one."""
    tmp = target.with_name(f".{target.name}.tmp")
    accelerator = trainer.accelerator
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
    accelerator.wait_for_everyone()
    trainer.save_model(str(tmp))  # every process takes part (sharded weights), the main one writes
    if accelerator.is_main_process:
        replace_dir(tmp, target)
    accelerator.wait_for_everyone()
    return target


@app.function
def upload_to_oxen(out_dir: str | Path, repo_id: str, dest: str) -> str | None:
    """Upload params, metrics, per-step completions and the adapter to an Oxen repo.

    Returns None on success, else the error text (also raised as a warning): an upload is never
    required for a run to count as finished.
    """
    out = Path(out_dir)
    files = [out / PARAMS_FILE, out / PARAMS_HISTORY_FILE, out / METRICS_FILE,
             *sorted((out / "completions").glob("*.parquet")),
             *sorted(p for p in (out / "adapter").rglob("*") if p.is_file())]
    try:
        from oxen import RemoteRepo

        repo = RemoteRepo(repo_id)
        for file in files:
            if file.is_file():
                repo.add(str(file), dst=str(PurePosixPath(dest) / file.parent.relative_to(out).as_posix()))
        repo.commit(f"train.py: {dest}")
    except Exception as exc:  # noqa: BLE001 - any failure (offline, auth, quota) only warns
        message = f"Oxen upload to {repo_id}:{dest} failed: {type(exc).__name__}: {exc}"
        warnings.warn(message, stacklevel=2)
        return message
    return None


@app.class_definition
@dataclasses.dataclass
class TrainResult:
    """What a finished run left behind."""

    output_dir: Path
    adapter_dir: Path
    global_step: int
    resumed_from: str | None
    last_metrics: dict[str, Any]
    oxen_error: str | None = None
    stopped: bool = False
    """Stopped on request (``STOP`` file) before ``max_steps``: rerun with the same output dir to resume."""


@app.function
def quiet_script_logs() -> None:
    """Script mode: keep the log to our step lines (no weight-loading bars or v6 deprecation notes)."""
    import transformers

    transformers.logging.set_verbosity_warning()
    transformers.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message=".*deprecated and will be removed in v6.*", category=FutureWarning)


@app.function
def print_progress(step: int, max_steps: int, logs: dict[str, Any]) -> None:
    """Script-mode progress: one readable line per logged step."""
    print(format_log_line(step, max_steps, logs), flush=True)


@app.function
def policy_model(p: TrainParams):
    """The base model with ``init_adapter`` loaded as a trainable LoRA adapter: training continues that adapter
    (stacked on the frozen base, not merged into it), with its own rank, alpha and target modules."""
    from peft import PeftConfig, PeftModel

    adapter = PeftConfig.from_pretrained(p.init_adapter)
    if adapter.base_model_name_or_path not in (p.model, None) and Path(
            adapter.base_model_name_or_path).name != Path(p.model).name:
        warnings.warn(f"--init-adapter {p.init_adapter} was trained on {adapter.base_model_name_or_path}, "
                      f"this run's base model is {p.model}", stacklevel=2)
    print(f"continuing adapter {p.init_adapter}: r={adapter.r}, lora_alpha={adapter.lora_alpha}, "
          f"target_modules={sorted({m.rsplit('.', 1)[-1] for m in adapter.target_modules or ()})} (the --lora-* "
          "flags do not apply)", flush=True)
    return PeftModel.from_pretrained(base_model(p), p.init_adapter, is_trainable=True)


@app.function
def quantization_config(p: TrainParams):
    """``--load-in-4bit``'s ``BitsAndBytesConfig`` (QLoRA: NF4, double quantization, bf16 compute), else None."""
    if not p.load_in_4bit:
        return None
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=torch.bfloat16)


@app.function
def base_model(p: TrainParams):
    """The base model for training, in the run's dtype; with ``load_in_4bit`` its linear layers in NF4 on this
    process's GPU, prepared by PEFT's ``prepare_model_for_kbit_training`` (weights frozen, the unquantized rest
    upcast to fp32, input gradients on for gradient checkpointing) before any LoRA adapter is added."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if p.bf16 else torch.float32
    if not p.load_in_4bit:
        return AutoModelForCausalLM.from_pretrained(p.model, dtype=dtype)
    from accelerate import PartialState
    from peft import prepare_model_for_kbit_training

    model = AutoModelForCausalLM.from_pretrained(p.model, dtype=dtype, quantization_config=quantization_config(p),
                                                 device_map={"": PartialState().local_process_index})
    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=p.gradient_checkpointing)


@app.function
def trainer_model(p: TrainParams):
    """The trainer's model: ``init_adapter`` on the base (``policy_model``), the prepared 4-bit base (``base_model``:
    TRL's own loader would skip ``prepare_model_for_kbit_training``), else the name TRL loads with
    ``model_init_kwargs``; a fresh adapter comes from ``peft_config``."""
    if p.init_adapter:
        return policy_model(p)
    return base_model(p) if p.load_in_4bit else p.model


@app.function
def sft_config(params: TrainParams):
    """TRL's ``SFTConfig`` for resolved params: the GRPO stage's optimizer, schedule, batch, checkpoint and logging
    settings; loss on the answer tokens only; no truncation (answers over the completion budget are not in the
    data)."""
    from trl import SFTConfig

    p = params
    return SFTConfig(
        **trainer_args(p),
        per_device_train_batch_size=p.per_device_train_batch_size,
        gradient_accumulation_steps=p.gradient_accumulation_steps,
        completion_only_loss=True,
        max_length=None,
    )


@app.function
def sft_data(p: TrainParams, tasks: Sequence[Task]) -> SFTSet:
    """The verified reference answers of ``tasks`` (answers longer than ``max_completion_length`` tokens skipped)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(p.model)
    return sft_rows(tasks, p.data, lambda text: len(tokenizer(text, add_special_tokens=False).input_ids),
                    p.max_completion_length)


@app.function
def build_sft_trainer(p: TrainParams, rows: Sequence[dict[str, Any]],
                      progress: Callable[[int, int, dict[str, Any]], None] | None = None):
    """The ``SFTTrainer`` of the supervised stage: same LoRA settings (or ``init_adapter``), same outputs."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    from rust_rewards.train.callbacks import MetricsFileCallback

    trainer = SFTTrainer(
        model=trainer_model(p),
        args=sft_config(p),
        train_dataset=Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows]),
        processing_class=AutoTokenizer.from_pretrained(p.model),
        peft_config=None if p.init_adapter else lora_config(p),
        callbacks=run_callbacks(p, MetricsFileCallback(p.output_dir), progress) + eval_callbacks(p),
    )
    return with_our_callbacks_first(trainer)


@app.function
def dpo_config(params: TrainParams):
    """TRL's ``DPOConfig`` for resolved params: the other stages' optimizer, schedule, batch (pairs per micro-batch),
    checkpoint and logging settings; sigmoid DPO loss with ``dpo_beta``; no truncation (sampled completions are
    already bounded by the completion budget they were generated with)."""
    from trl import DPOConfig

    p = params
    return DPOConfig(
        **trainer_args(p),
        per_device_train_batch_size=p.per_device_train_batch_size,
        gradient_accumulation_steps=p.gradient_accumulation_steps,
        beta=p.dpo_beta,
        max_length=None,
    )


@app.function
def build_dpo_trainer(p: TrainParams, pairs: Sequence[dict[str, Any]],
                      progress: Callable[[int, int, dict[str, Any]], None] | None = None):
    """The ``DPOTrainer`` of the preference stage: same LoRA settings (or ``init_adapter``), same outputs; the
    reference model is the base with the adapter switched off (TRL's default with PEFT)."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import DPOTrainer

    from rust_rewards.train.callbacks import MetricsFileCallback

    trainer = DPOTrainer(
        model=trainer_model(p),
        args=dpo_config(p),
        train_dataset=Dataset.from_list([{k: r[k] for k in ("prompt", "chosen", "rejected")} for r in pairs]),
        processing_class=AutoTokenizer.from_pretrained(p.model),
        peft_config=None if p.init_adapter else lora_config(p),
        callbacks=run_callbacks(p, MetricsFileCallback(p.output_dir), progress) + eval_callbacks(p),
    )
    return with_our_callbacks_first(trainer)


@app.function
def build_trainer(
    p: TrainParams,
    tasks: Sequence[Task],
    progress: Callable[[int, int, dict[str, Any]], None] | None = None,
    guard: InfraGuard | None = None,
):
    """The ``GRPOTrainer`` for resolved params, with our reward timing and log callbacks.

    Our ``RunLogCallback`` runs before the wandb callback, so ``reward_share`` and the ``verify/*``
    counts reach wandb too; ``guard`` (default: from the params) stops training on internal errors.
    """
    from trl import GRPOTrainer

    from rust_rewards.rewards.cargo_tool import cargo_check
    from rust_rewards.train.callbacks import RunLogCallback

    funcs, weights = select_rewards(p)
    recorder = RewardRecorder(funcs)
    guard = guard or InfraGuard(p.max_internal_error_share, p.max_internal_error_steps)
    log = RunLogCallback(p.output_dir, recorder, weights, task_reports, p.completions_every, guard,
                         feedback=p.feedback_turns > 0)
    trainer = GRPOTrainer(
        model=trainer_model(p),
        reward_funcs=recorder.wrapped,
        args=grpo_config(p, [weights[f.__name__] for f in funcs]),
        train_dataset=task_dataset(tasks, feedback=p.feedback_turns > 0),
        peft_config=None if p.init_adapter else lora_config(p),
        callbacks=run_callbacks(p, log, progress) + eval_callbacks(p),
        tools=[cargo_check] if p.feedback_turns else None,
    )
    return with_our_callbacks_first(trainer)


@app.function
def run_training(
    params: TrainParams,
    progress: Callable[[int, int, dict[str, Any]], None] | None = print_progress,
) -> TrainResult:
    """Train a LoRA adapter with GRPO (``stage="sft"``: supervised, on verified reference answers; ``"dpo"``: DPO on
    the preference pairs of ``dpo_pairs``); write params,
    metrics, completions (GRPO), checkpoints and the adapter.

    Under ``accelerate launch`` every process trains and verifies its own completions (the local verifier
    with its share of this machine's CPUs, ``cpu_share``; or the Ray cluster); only the main process writes.

    Raises ``InfrastructureError`` (no adapter written, the last checkpoint kept) when the verifier's
    internal errors cross the ``max_internal_error_*`` limits.
    """
    import torch
    from accelerate import PartialState

    p = resolve_params(params)
    out = Path(p.output_dir)
    earlier = load_params(out).get("stage", "grpo") if (out / PARAMS_FILE).is_file() else p.stage
    if earlier != p.stage:
        raise ValueError(f"{out} holds a {earlier} run ({PARAMS_FILE}): the {p.stage} stage needs its own "
                         "--output-dir (it would resume the other stage's checkpoints)")
    checkpoint = find_checkpoint(out, p.resume)
    finished = finished_run(checkpoint, p.max_steps)
    if finished is not None:
        print(f"{checkpoint} is already at step {finished['global_step']} of {finished['max_steps']}: "
              "nothing to train (raise --max-steps to continue)", flush=True)
        adapter = out / "adapter"
        if not (adapter / "adapter_config.json").is_file():
            adapter = adapter_from_checkpoint(Path(checkpoint), adapter)
        logs = [h for h in finished.get("log_history", []) if "train_runtime" not in h]
        return TrainResult(out, adapter, finished["global_step"], checkpoint, logs[-1] if logs else {})
    _, weights = select_rewards(p)
    tasks = load_train_tasks(p)
    if p.build_tiny_model:
        build_tiny_model(p.model, warm_start=WarmStart(tool_calls=TOOL_WARM_SHARE, steps=TOOL_WARM_STEPS)
                         if p.feedback_turns else WarmStart())

    sft = sft_data(p, tasks) if p.stage == "sft" else None
    if sft is not None:
        print(f"supervised stage: {sft.counts()['rows']} verified reference answers of {len(tasks)} tasks; "
              f"skipped: {dict(sft.skipped) or 'none'}", flush=True)
    pairs = read_pairs(p.dpo_pairs) if p.stage == "dpo" else None
    if pairs is not None:
        print(f"preference stage: {len(pairs)} pairs of {len({r.get('task_id') for r in pairs})} prompts from "
              f"{p.dpo_pairs}", flush=True)
    record = {**dataclasses.asdict(p), "derived": {
        "reward_weights": weights,
        "n_tasks": len(tasks),
        **({"sft": sft.counts()} if sft is not None else {"dpo": {"pairs": len(pairs)}} if pairs is not None else {
            "prompts_per_step": p.prompts_per_step(),
            "completions_per_step": p.per_device_train_batch_size * p.gradient_accumulation_steps}),
        "resumed_from": checkpoint,
    }}
    processes = PartialState(cpu=bool(p.use_cpu))
    if processes.is_main_process:
        remove_stale_stop(out)
        first = record_start(out, record)
        print(json.dumps(record, indent=2), flush=True)
        changes = param_changes(first, record)
        if changes:
            print(f"changed since the first start ({out / PARAMS_FILE}): "
                  + ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changes.items()), flush=True)
    verifier = verifier_for(cpu_share() if processes.num_processes > 1 else 0, p.verifier, p.ray_address,
                            p.verifier_mode)
    if processes.num_processes > 1:
        print(f"process {processes.process_index}/{processes.num_processes}: verifies its own completions "
              f"({verifier.backend}, {verifier.workers} workers)", flush=True)

    threads = torch.get_num_threads()
    if p.torch_threads > 0:
        torch.set_num_threads(p.torch_threads)
    guard = InfraGuard(p.max_internal_error_share, p.max_internal_error_steps)
    try:
        if sft is not None:
            trainer = build_sft_trainer(p, sft.rows, progress)
        elif pairs is not None:
            trainer = build_dpo_trainer(p, pairs, progress)
        else:
            trainer = build_trainer(p, tasks, progress, guard)
        trainer.train(resume_from_checkpoint=checkpoint)
        stopped = (out / STOP_FILE).is_file() and trainer.state.global_step < trainer.state.max_steps
        if guard.stopped is not None:
            raise InfrastructureError(guard.stopped.message(find_checkpoint(out, "auto")))
        adapter = save_adapter(trainer, out / "adapter")
    finally:
        torch.set_num_threads(threads)
    oxen_error = upload_to_oxen(out, p.oxen_repo, p.oxen_dest) if p.oxen_repo and processes.is_main_process else None
    history = [h for h in trainer.state.log_history if "train_runtime" not in h]
    processes.wait_for_everyone()
    if processes.is_main_process:
        (out / STOP_FILE).unlink(missing_ok=True)
    if stopped:
        print(f"stopped on request at step {trainer.state.global_step} of {trainer.state.max_steps}: "
              f"checkpoint-{trainer.state.global_step} kept; run again with the same output dir to resume", flush=True)
    return TrainResult(out, adapter, trainer.state.global_step, checkpoint,
                       history[-1] if history else {}, oxen_error, stopped)


@app.function
def gpu_view(params: TrainParams) -> TrainParams:
    """Params validated and resolved as the full run resolves them on a GPU machine with the ``[gpu]`` extras (and
    bitsandbytes): bf16 and vLLM where left to the hardware (auto vLLM is off with ``load_in_4bit``), the GPU as
    device; ``load_in_4bit`` checked for that machine (``check_load_in_4bit``), not this one."""
    p = resolve_params(dataclasses.replace(params, use_vllm=False, load_in_4bit=False))
    view = dataclasses.replace(p, bf16=params.bf16 is not False, use_cpu=bool(params.use_cpu),
                               load_in_4bit=params.load_in_4bit,
                               use_vllm=params.use_vllm is True or params.use_vllm is None and not params.load_in_4bit)
    check_load_in_4bit(view, this_machine=False)
    return view


@app.function
def run_dry_run(
    params: TrainParams,
    progress: Callable[[int, int, dict[str, Any]], None] | None = print_progress,
) -> TrainResult:
    """``--dry-run``: check a real-preset run on CPU before renting a GPU.

    Builds the full run's ``GRPOConfig`` (vLLM fields included), ``LoraConfig`` and, with ``load_in_4bit``, its
    ``BitsAndBytesConfig``, and prints its GPU plan (an estimate), then trains a copy reduced only where a CPU must
    (``rust_rewards.train.dry_run.reduce_params``, printed) for one step with checkpoint-1 and resumes it to step 2, in
    ``outputs/dry-run`` (or ``<output_dir>/dry-run`` for a non-default ``--output-dir``). Raises
    ``SettingRejected`` for a setting the full run would reject.
    """
    import torch

    from rust_rewards.train import dry_run as dr

    if params.preset != "real":
        raise SettingRejected(f"--dry-run checks the real preset; the {params.preset} preset runs on CPU as it is")
    if params.stage != "grpo" or params.init_adapter:
        raise SettingRejected("--dry-run checks the GRPO stage from a fresh adapter on a reduced model; run "
                              "--stage sft/dpo / --init-adapter with the tiny preset (or on the GPU) instead")
    try:
        full = gpu_view(params)
        funcs, weights = select_rewards(full)
        # TrainingArguments refuses bf16 without a GPU unless use_cpu is set; use_cpu only picks the device.
        on_this_machine = dataclasses.replace(full, use_cpu=full.use_cpu or not torch.cuda.is_available())
        config = grpo_config(on_this_machine, [weights[f.__name__] for f in funcs])
        lora = lora_config(full)
        bnb = quantization_config(full)
        if bnb is not None:
            from peft import prepare_model_for_kbit_training  # noqa: F401 - what base_model calls on the GPU
    except (ValueError, TypeError) as err:
        raise SettingRejected(f"the full run would reject these settings: {err}") from err
    print(dr.plan_text(full), flush=True)
    vllm = {k: getattr(config, k) for k in vllm_kwargs(full)}
    print(f"full run's GRPOConfig built: bf16={config.bf16}, loss_type={config.loss_type!r}, "
          f"generation_batch_size={config.generation_batch_size}, steps_per_generation={config.steps_per_generation}, "
          f"{', '.join(f'{k}={v!r}' for k, v in vllm.items()) or 'use_vllm=False'}; LoraConfig built: r={lora.r}, "
          f"lora_alpha={lora.lora_alpha}, target_modules={lora.target_modules!r}", flush=True)
    if vllm:
        print("vLLM is off on CPU: its settings above are validated by GRPOConfig only, not run", flush=True)
    if bnb is not None:
        print(f"full run's BitsAndBytesConfig built: load_in_4bit={bnb.load_in_4bit}, "
              f"bnb_4bit_quant_type={bnb.bnb_4bit_quant_type!r}, "
              f"bnb_4bit_use_double_quant={bnb.bnb_4bit_use_double_quant}, "
              f"bnb_4bit_compute_dtype={bnb.bnb_4bit_compute_dtype}; the GPU run loads the base with it and "
              "prepares it with peft.prepare_model_for_kbit_training (not run here: no CUDA)", flush=True)

    default_out = params.output_dir == preset_params(params.preset).output_dir
    root = dr.prepare_dir(ROOT / "outputs" / "dry-run" if default_out else Path(full.output_dir) / "dry-run")
    model = dr.build_shaped_model(root / "model", full.model)
    dry, changes = dr.reduce_params(full, model, root / "run")
    print(dr.format_changes(full, changes), flush=True)
    run_training(dry, progress)
    result = run_training(dataclasses.replace(dry, max_steps=2, resume="yes"), progress)
    checkpoint = str(root / "run" / "checkpoint-1")
    if (result.global_step, result.resumed_from) != (2, checkpoint):
        raise RuntimeError(f"dry run: expected step 2 resumed from {checkpoint}, got step {result.global_step} "
                           f"resumed from {result.resumed_from}")
    print(f"dry run passed: step 1, {checkpoint}, resumed to step 2; outputs in {root / 'run'}", flush=True)
    return result


@app.function
def run_dir(p: TrainParams) -> Path:
    """The absolute run folder of ``p``: the preset's default (per stage) under the repository, else as typed."""
    preset = preset_params(p.preset)
    # the sft and dpo stages' default folders are their own: GRPO's default would auto-resume their checkpoints
    stage_default = preset.output_dir if p.stage == "grpo" else f"outputs/{p.stage}-{p.preset}"
    return Path(local_path(stage_default if p.output_dir == preset.output_dir else p.output_dir, stage_default))


@app.function
def cli_text(value: Any) -> str:
    """A parameter value as the command line writes it."""
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


@app.function
def cli_flags(p: TrainParams) -> list[str]:
    """The command-line flags that give ``p``: the preset, then every field that differs from it, as
    ``--flag=value`` (marimo's parser reads ``--flag -1`` as two flags and splits ``--flag a=b`` at the ``=``)."""
    base = preset_params(p.preset)
    flags = ["--preset", p.preset]
    for f in dataclasses.fields(TrainParams):
        value = getattr(p, f.name)
        if f.name != "preset" and value != getattr(base, f.name):
            flags.append(f"{flag_name(f.name)}={cli_text(value)}")
    return flags


@app.function
def form_params(preset: str, values: Mapping[str, Any], weights: Mapping[str, float]) -> TrainParams:
    """Validated params from the form: its controls' values and a weight per selected reward (``ValueError``
    naming the flag, as on the command line)."""
    changed = ",".join(f"{name}={w:g}" for name, w in weights.items() if w != DEFAULT_WEIGHTS.get(name, 1.0))
    return validate_params(params_from_mapping({"preset": preset, **values, "reward_weights": changed}))


@app.function
def reward_weight_controls(selected: Sequence[str], defaults: TrainParams):
    """One weight control per selected reward, starting from ``defaults``' weights."""
    weights = dict(DEFAULT_WEIGHTS)
    for item in filter(None, (s.strip() for s in defaults.reward_weights.split(","))):
        name, _, value = item.partition("=")
        weights[name.strip()] = float(value)
    return mo.ui.dictionary({name: mo.ui.number(start=0.0, stop=100.0, step=0.1, value=weights.get(name, 1.0),
                                                label=f"weight of {name}") for name in selected})


@app.function
def field_problem(message: str):
    """A form error shown under the form, naming the group and field of the first ``--flag`` in ``message``."""
    name = problem_field(TrainParams, message)
    where = f"**{info_of(TrainParams)[name].group} › {name.replace('_', ' ')}:** " if name else ""
    return mo.callout(mo.md(where + message), kind="danger")


@app.class_definition
@dataclasses.dataclass
class TrainJob:
    """A run the notebook started: ``python train.py FLAGS`` in its own process, its output in ``OUT/train.log``.

    The notebook stays responsive while it trains; ``stop`` asks it to stop cleanly (``STOP`` file: checkpoint
    kept, resumable); the run folder's ``metrics.jsonl`` shows its progress."""

    process: Any
    output_dir: Path
    max_steps: int
    log: Path

    def returncode(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        if self.returncode() is None:
            (self.output_dir / STOP_FILE).touch()

    def stopping(self) -> bool:
        return self.returncode() is None and (self.output_dir / STOP_FILE).is_file()

    def log_tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace") if self.log.is_file() else ""
        return "\n".join(text.splitlines()[-lines:])


@app.function
def start_job(p: TrainParams) -> TrainJob:
    """Start ``python train.py`` with the flags of ``p`` in a new process."""
    import subprocess
    import sys

    out = run_dir(p)
    out.mkdir(parents=True, exist_ok=True)
    (out / STOP_FILE).unlink(missing_ok=True)
    log = out / "train.log"
    with open(log, "ab") as handle:
        process = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *cli_flags(p)], cwd=ROOT,
                                   stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    return TrainJob(process, out, p.max_steps, log)


@app.function
def live_chart(metrics):
    """Reward per step (mean and each reward function; loss for the supervised stage) as steps finish."""
    import altair as alt
    import pandas as pd

    from rust_rewards.runs.records import metric_series, reward_series

    series = metric_series(metrics, {"reward (weighted total)": "reward", "loss": "loss"})
    rewards = reward_series(metrics)
    data = pd.concat([series, rewards], ignore_index=True) if len(rewards) else series
    chart = alt.Chart(data).mark_line(point=True).encode(
        x=alt.X("step:Q", title="step", axis=alt.Axis(tickMinStep=1)),
        y=alt.Y("value:Q", title="value"),
        color=alt.Color("series:N", title=None),
        tooltip=["step", "series", alt.Tooltip("value:Q", format=".3f")],
    ).properties(height=260, width="container")
    return mo.ui.altair_chart(chart, chart_selection=False, legend_selection=True)


@app.function
def job_view(job: TrainJob, stop_button: Any):
    """Progress, the live reward chart, the stop button and the end of the run's log."""
    import pandas as pd

    from rust_rewards.runs.records import load_metrics

    metrics_file = job.output_dir / METRICS_FILE
    metrics = load_metrics(job.output_dir) if metrics_file.is_file() else pd.DataFrame()
    step = int(metrics["step"].max()) if len(metrics) else 0
    code = job.returncode()
    total = f" of {job.max_steps}" if job.max_steps > 0 else ""
    if code is None:
        state = "stopping after this step (a checkpoint is kept)" if job.stopping() else "training"
        head = mo.md(f"**{state}**: step {step}{total} logged · `{job.output_dir}`")
        parts = [mo.hstack([head, stop_button], justify="space-between")]
        if job.max_steps > 0:
            parts.append(mo.md(f"<progress value='{step}' max='{job.max_steps}' style='width:100%'></progress>"))
    elif code == 0:
        parts = [mo.callout(mo.md(f"**Finished**: step {step}{total} logged; adapter in "
                                  f"`{job.output_dir / 'adapter'}`. Dashboard: "
                                  f"`marimo run viz.py -- --run {job.output_dir}`"), kind="success")]
    else:
        parts = [mo.callout(mo.md(f"**The run failed** (exit {code}); the end of `{job.log}`:"), kind="danger")]
    if len(metrics):
        parts.append(live_chart(metrics))
    parts.append(mo.accordion({"Log": mo.plain_text(job.log_tail())}, lazy=False) if code in (None, 0)
                 else mo.plain_text(job.log_tail(40)))
    return mo.vstack(parts)


@app.cell(hide_code=True)
def _():
    mo.stop(mo.app_meta().mode == "script")
    cli_values = dict(mo.cli_args())
    preset = mo.ui.dropdown(options=list(PRESETS), value=str(cli_values.get("preset", "tiny")), label="preset")
    mo.hstack([preset, mo.md("`tiny`: a local 0.4M model on CPU, seconds per step · `real`: Qwen2.5-Coder-1.5B on "
                             "a GPU (on CPU: switch on **dry run**)")], justify="start", gap=1)
    return cli_values, preset


@app.cell(hide_code=True)
def _(cli_values, preset):
    try:
        form_defaults = params_from_mapping({**cli_values, "preset": preset.value})
        _problem = None
    except ValueError as _err:
        form_defaults, _problem = preset_params(preset.value), str(_err)
    controls = param_controls(TrainParams, form_defaults, ROOT, skip=("preset", "rewards", "reward_weights"))
    reward_pick = control("rewards", list[str], form_defaults.rewards, info_of(TrainParams)["rewards"], ROOT)
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
        _note = mo.md(f"{checked.per_device_train_batch_size * checked.gradient_accumulation_steps} completions per "
                      f"step ({checked.prompts_per_step():g} prompts x {checked.num_generations}), "
                      f"{'max steps ' + str(checked.max_steps) if checked.max_steps > 0 else 'epochs'}; "
                      f"`python train.py {shlex.join(cli_flags(checked))}`")
        form_problem = None
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
    mo.stop(mo.app_meta().mode != "script")
    quiet_script_logs()
    try:
        _params = validate_params(params_from_mapping(mo.cli_args()))
        if not _params.dry_run:  # this machine's CUDA and bitsandbytes (the dry run checks the GPU machine's)
            check_load_in_4bit(_params)
    except ValueError as _err:
        raise SystemExit(f"train.py: {_err}") from None
    try:
        (run_dry_run if _params.dry_run else run_training)(_params)
    except (InfrastructureError, SettingRejected) as _err:
        raise SystemExit(f"train.py: {_err}") from None
    return


if __name__ == "__main__":
    app.run()
