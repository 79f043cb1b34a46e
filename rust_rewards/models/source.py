"""Whether a ``--model`` or ``--adapter`` value can be loaded, checked before anything loads or is written: one
refusal (``ValueError`` naming the flag) shared by every script that loads a model (train.py, inference.py), which
print it as one line and exit 2."""

from __future__ import annotations

from pathlib import Path

from rust_rewards.hub import hub_reachable, looks_local
from rust_rewards.models.gguf import is_gguf
from rust_rewards.workspace import find_path


def check_model_source(model: str, flag: str = "--model", *, hub: bool = True) -> None:
    """``ValueError`` naming ``flag`` when no model can be loaded from ``model``: a path that is no model folder, a
    hub id neither cached nor reachable (offline, ``from_pretrained`` would spend ~50 s on retries first; with
    ``hub=False``, as a form checks while it is edited, hub ids are not looked up), or neither. A ``.gguf`` file or
    the bundled SmolLM2 name passes (converted on first use)."""
    if is_gguf(model):
        return
    found = find_path(model)
    path = Path(found or model).expanduser()
    if looks_local(model) or found is not None:
        if not (path / "config.json").is_file():
            raise ValueError(f"{flag} {model}: no model folder there (expected a folder with config.json, or a "
                             "Hugging Face hub id such as Qwen/Qwen2.5-Coder-1.5B-Instruct)")
        return
    if not hub:
        return
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(model, "config.json")
    except ValueError as err:  # huggingface_hub's HFValidationError: not shaped like a hub id
        raise ValueError(f"{flag} {model}: no such folder, and not a Hugging Face hub id (owner/name)") from err
    if not isinstance(cached, str) and not hub_reachable():
        raise ValueError(f"{flag} {model}: not a folder here, not in the Hugging Face cache, and the Hub cannot be "
                         "reached (offline?): pass a local model folder")


def check_adapter_folder(adapter: str, flag: str = "--adapter") -> None:
    """``ValueError`` naming ``flag`` unless ``adapter`` is a LoRA adapter folder (one with adapter_config.json)."""
    path = Path(find_path(adapter) or adapter).expanduser()
    if not (path / "adapter_config.json").is_file():
        what = "no such folder" if not path.exists() else "no adapter_config.json there"
        raise ValueError(f"{flag} {adapter}: {what} (expected a LoRA adapter folder such as an SFT run's "
                         "OUT/adapter)")
