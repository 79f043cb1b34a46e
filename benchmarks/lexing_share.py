"""What lexing costs a verification (issue 57: would parsing each completion once pay?): ``rust.lexer.tokenize``
timed inside ``verify_code``, in process, direct mode.

    .venv/bin/python benchmarks/lexing_share.py [--tasks 20]

Three groups: the bench corpus (no hidden tests), the first ``--tasks`` medium-tier references with their hidden tests
(the first verification of each task: its reference's runs included), and the same again with the task caches warm
(as GRPO's later completions of a task). Prints, per group, the tokenize calls per verification, their share of the
wall time (the most one parse per completion could save) and this process's own CPU share (the Python part of a
verification, which holds the GIL in the verifier's thread pool).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import rust_rewards.rust.lexer as lexer  # noqa: E402
from rust_rewards.data.bundled import MEDIUM_TASKS  # noqa: E402
from rust_rewards.data.importers import load_tasks  # noqa: E402
from rust_rewards.rust.extract import extract_rust  # noqa: E402
from rust_rewards.verify.bench import DEFAULT_CORPUS, load_corpus  # noqa: E402
from rust_rewards.verify.config import VerifierConfig  # noqa: E402
from rust_rewards.verify.single import verify_code  # noqa: E402

SPENT = {"seconds": 0.0, "calls": 0}
_TOKENIZE = lexer.tokenize


def timed_tokenize(source: str) -> list[lexer.Token]:
    """``lexer.tokenize``, its calls and seconds added to ``SPENT``."""
    start = time.perf_counter()
    try:
        return _TOKENIZE(source)
    finally:
        SPENT["seconds"] += time.perf_counter() - start
        SPENT["calls"] += 1


def install_timer() -> None:
    """Every module of the package that imported ``tokenize`` calls the timed one."""
    for name, module in list(sys.modules.items()):
        if name.startswith("rust_rewards") and getattr(module, "tokenize", None) is _TOKENIZE:
            module.tokenize = timed_tokenize


def measure(label: str, items: list[tuple[str, object]], config: VerifierConfig) -> None:
    SPENT.update(seconds=0.0, calls=0)
    wall, cpu = time.perf_counter(), time.process_time()
    for code, hidden in items:
        verify_code(code, hidden, config)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label}: {len(items)} verifications in {wall:.1f} s; tokenize {SPENT['calls'] / len(items):.1f} calls "
          f"per verification, {100 * SPENT['seconds'] / wall:.1f} % of the wall time; this process's CPU "
          f"{100 * cpu / wall:.1f} %", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20, help="medium-tier tasks whose references are verified")
    args = parser.parse_args(argv)
    install_timer()
    tasks = load_tasks(str(MEDIUM_TASKS))[: args.tasks]
    corpus = [(extract_rust(text), None) for _, text in load_corpus(DEFAULT_CORPUS)]
    references = [(t.reference_code, t.hidden_tests()) for t in tasks]
    config = VerifierConfig()
    measure("bench corpus (no hidden tests)", corpus, config)
    measure("medium references, first of their task", references, config)
    measure("the same again (task caches warm)", references, config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
