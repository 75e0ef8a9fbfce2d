"""How ``make test`` splits the suite: the modules that share the repository's run folders (``SHARED_OUTPUTS`` in
tests/conftest.py) run in one process after nbval, the others on two processes."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED_OUTPUTS

TESTS = Path(__file__).resolve().parent


def test_every_listed_module_exists():
    assert [name for name in SHARED_OUTPUTS if not (TESTS / name).is_file()] == []


def collected(path: str, expression: str) -> list[str]:
    listing = subprocess.run([sys.executable, "-m", "pytest", path, "--co", "-q", "-m", expression],
                             capture_output=True, text=True, cwd=TESTS.parent)
    return [line for line in listing.stdout.splitlines() if "::" in line]


@pytest.mark.integration
def test_a_listed_module_is_selected_only_by_shared_outputs_and_another_only_by_its_negation():
    listed, other = "tests/demo/test_demo_cache.py", "tests/test_suite_split.py"
    assert len(collected(listed, "shared_outputs")) >= 1 and collected(listed, "not shared_outputs") == []
    assert collected(other, "shared_outputs") == [] and len(collected(other, "not shared_outputs")) >= 2
