"""environment.yml and pyproject.toml pin the same versions of the same packages."""

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    pins = {}
    for requirement in requirements:
        name, sep, version = requirement.partition("==")
        assert sep, f"pyproject.toml: {requirement!r} is not pinned with =="
        pins[normalise(name)] = version
    return pins


def environment_pins() -> dict[str, str]:
    """Conda pins (``name=version``) and pip pins (``name==version``) of environment.yml."""
    spec = yaml.safe_load((REPO / "environment.yml").read_text())
    pins = {}
    for entry in spec["dependencies"]:
        if isinstance(entry, dict):
            for requirement in entry["pip"]:
                if requirement != "-e .":
                    name, sep, version = requirement.partition("==")
                    assert sep, f"environment.yml: pip entry {requirement!r} is not pinned with =="
                    pins[normalise(name)] = version
            continue
        if entry == "pip" or entry.startswith("python="):
            continue
        name, sep, version = entry.partition("=")
        assert sep, f"environment.yml: {entry!r} is not pinned"
        pins[normalise(name)] = version
    return pins


def test_environment_and_pyproject_pin_the_same_versions():
    assert environment_pins() == pyproject_pins()


def test_environment_installs_the_package_itself():
    spec = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = [e for e in spec["dependencies"] if isinstance(e, dict)]
    assert len(pip_section) == 1 and pip_section[0]["pip"][-1] == "-e ."
