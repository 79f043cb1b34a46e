import os
from pathlib import Path

import pytest

from rust_rewards.workspace import ENV

ROOT = Path(__file__).resolve().parent.parent
"""The repository root (tests import it: ``from conftest import ROOT``)."""
os.environ.setdefault(ENV, str(ROOT))  # the notebooks' workspace, wherever pytest is started


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """One warm-started tiny model for the whole test session (building it takes ~25 s)."""
    from rust_rewards.train.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def verifier():
    """A local verifier with 2 workers for one test module, closed after it."""
    from rust_rewards.verify.verifier import Verifier

    v = Verifier(workers=2)
    yield v
    v.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests start servers and a headless chromium: they count as slow (``pytest -m "not slow"``)."""
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(pytest.mark.slow)
