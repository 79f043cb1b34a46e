"""start_marimo.sh: a token-protected headless editor whose token never shows in ``ps``."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from browser import REPO, free_port, http_get, serve

SCRIPT = REPO / "start_marimo.sh"
TOKEN = "s3cret-token-for-tests-7781"


def _ps() -> str:
    return subprocess.run(["ps", "-eww", "-o", "pid,args"], capture_output=True, text=True, check=True).stdout


def _token_files(ps_text: str) -> list[Path]:
    """Token files named on the command lines of marimo processes."""
    files = []
    for line in ps_text.splitlines():
        if "--token-password-file" in line:
            files.append(Path(line.split("--token-password-file", 1)[1].split()[0]))
    return files


def test_script_header() -> None:
    text = SCRIPT.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert os.access(SCRIPT, os.X_OK)
    assert "--token-password-file" in text and "--token-password " not in text
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_editor_needs_the_token(tmp_path: Path) -> None:
    port = free_port()
    env = {"MARIMO_PORT": str(port), "MARIMO_HOST": "127.0.0.1", "MARIMO_TOKEN": TOKEN}
    with serve(["bash", str(SCRIPT)], port, tmp_path / "server.log", env=env) as server:
        status, headers = http_get(f"{server.url}/")
        assert status in (303, 401), status
        if status == 303:
            assert "/auth/login" in headers.get("location", "")
        assert http_get(f"{server.url}/", {"Authorization": "Bearer wrong-token"})[0] in (303, 401)
        assert http_get(f"{server.url}/", {"Authorization": f"Bearer {TOKEN}"})[0] == 200

        processes = _ps()
        assert f"--port {port}" in processes
        assert TOKEN not in processes
        files = [f for f in _token_files(processes) if f.exists() and f.read_text() == TOKEN]
        assert len(files) == 1
        assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert server.process.returncode is not None
    assert not files[0].exists(), "token file left behind"
    assert f"--port {port}" not in _ps(), "marimo still running after the process group was stopped"


def test_refuses_network_host_with_default_token(tmp_path: Path) -> None:
    env = {**os.environ, "MARIMO_HOST": "0.0.0.0", "MARIMO_PORT": str(free_port())}
    env.pop("MARIMO_TOKEN", None)
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert "default token" in done.stderr


def test_an_empty_token_is_refused_not_replaced_by_the_default() -> None:
    env = {**os.environ, "MARIMO_HOST": "127.0.0.1", "MARIMO_PORT": str(free_port()), "MARIMO_TOKEN": ""}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2 and "MARIMO_TOKEN is empty" in done.stderr
