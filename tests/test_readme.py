"""README's commands are the ones CI runs, and the project is lint-clean."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bash_blocks(text: str) -> list[str]:
    return [line.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
            for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_quick_start_commands_are_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = _bash_blocks(quick)
    assert len(commands) == 3, commands
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    for command in commands:
        assert command in ci_lines, f"README command not run by .ci/run: {command}"


def test_ruff_clean():
    res = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
