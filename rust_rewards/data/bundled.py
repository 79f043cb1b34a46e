"""The task sets shipped with the package (also under ``qwen3-rust-finetune/`` in a checkout)."""

from pathlib import Path

BUNDLED_TASKS = Path(__file__).with_name("bundled_tasks.jsonl")
"""70 std-only tasks with verified references and hidden tests (the training and eval data of the docs);
difficulty ``standard``."""

EASY_TASKS = Path(__file__).with_name("easy_tasks.jsonl")
"""60 one-function std-only tasks (difficulty ``easy``) for models too small for the bundled set, such as
SmolLM2-135M: the held-out split where learning on CPU can show."""

MEDIUM_TASKS = Path(__file__).with_name("medium_tasks.jsonl")
"""69 std-only tasks one step above the easy tier (difficulty ``medium``): one loop, one branch chain, ``Option`` and
``Result``, ``&str`` and slices, a small struct or enum with methods; no fn name of the easy or bundled sets."""

LOOP_TASKS = Path(__file__).with_name("loop_tasks.jsonl")
"""165 std-only tasks one step past the easy tier's one-liners (difficulty ``loop``): one short loop with an
accumulator, an early return, a ``match``, an ``Option``/``Result`` step, a small ``HashMap`` count or a struct with a
method or two, over integers, strings, slices, ``Vec``, iterators; no fn name of another set."""
