"""The bundled task set shipped with the package (also at ``qwen3-rust-finetune/bundled_tasks.jsonl`` in a checkout)."""

from pathlib import Path

BUNDLED_TASKS = Path(__file__).with_name("bundled_tasks.jsonl")
"""70 std-only tasks with verified references and hidden tests (the training and eval data of the docs)."""
