"""How ``make test`` splits the suite: the modules that share the repository's run folders (``SHARED_OUTPUTS`` in
tests/conftest.py) run in one process after nbval, the others beside it on two processes."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED_OUTPUTS

TESTS = Path(__file__).resolve().parent


def test_every_listed_module_exists():
    assert [name for name in SHARED_OUTPUTS if not (TESTS / name).is_file()] == []


@pytest.mark.integration
def test_shared_outputs_selects_the_listed_modules_and_no_other():
    listed, other = "tests/demo/test_demo_cache.py", "tests/test_suite_split.py"
    listing = subprocess.run([sys.executable, "-m", "pytest", listed, other, "--co", "-q", "-m", "shared_outputs"],
                             capture_output=True, text=True, cwd=TESTS.parent)
    modules = {line.split("::")[0] for line in listing.stdout.splitlines() if "::" in line}
    assert modules == {listed}, listing.stdout + listing.stderr
