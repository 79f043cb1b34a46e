"""Sampling from a model: settings, chat prompts, decoding engines, vLLM (below `train/` and `eval/`)."""
