"""Fixtures shared by the real-podman integration tests."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


@pytest.fixture(scope="session")
def bluebox_bin():
    return os.environ.get("BLUEBOX_BIN", str(REPO / "build" / "bluebox"))
