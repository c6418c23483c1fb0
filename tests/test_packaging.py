"""The distribution: license metadata, what the sdist carries, and which floors .ci/floors tests.

The full check (build an sdist, install it with its test extra in a fresh venv, run the suite
there) needs the network and minutes; README.md says how. These tests guard its preconditions.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
# What the test suite reads from the source tree, so what an sdist must carry for it to run.
READ_BY_TESTS = ("tests/identifiability_table.txt", "tests/conftest.py", "README.md", "CLAUDE.md",
                 "docs/index.md", "docs/transforms.md", "dev/decisions.md", "dev/internals.md",
                 "examples/tensor_train.py", "contractions/testing/oracle.py", "pyproject.toml",
                 "LICENSE", "mkdocs.yml", "dev/mkdocs_hooks.py", "docs/reference/contract.md",
                 "docs/getting-started.md", "contractions/py.typed", "contractions/_version.py")


def test_license_is_mit_in_pep_639_form():
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")
    assert re.search(r'^license = "MIT"$', PYPROJECT, re.MULTILINE)
    assert re.search(r'^license-files = \["LICENSE"\]$', PYPROJECT, re.MULTILINE)
    assert "License ::" not in PYPROJECT  # a license classifier beside an SPDX expression is an error
    requires = re.search(r'^requires = \["setuptools>=([0-9.]+),<([0-9]+)"\]$', PYPROJECT, re.MULTILINE)
    assert requires is not None and tuple(map(int, requires[1].split(".")[:2])) >= (77, 0)


def test_manifest_grafts_what_the_tests_read():
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8").split()
    for directory in ("contractions", "tests", "examples", "docs", "dev"):
        assert directory in manifest, f"MANIFEST.in does not graft {directory}/"
    for name in ("LICENSE", "README.md", "CLAUDE.md", "CHANGELOG.md", "CONTRIBUTING.md", "mkdocs.yml"):
        assert name in manifest, f"MANIFEST.in does not include {name}"


def test_sdist_carries_what_the_tests_read_and_builds_without_deprecations(tmp_path: Path):
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:  # pip builds with the declared backend
        pytest.skip(f"setuptools {setuptools.__version__} here; the build backend needs >= 77")
    # setuptools' own PEP 517 hook, in a subprocess from the repo root: no network, no isolation.
    code = ("import sys; from setuptools import build_meta; "
            "print(build_meta.build_sdist(sys.argv[1]))")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Deprecat" not in result.stderr, result.stderr
    name = result.stdout.strip().splitlines()[-1]
    with tarfile.open(tmp_path / name) as archive:
        members = {m.split("/", 1)[1] for m in archive.getnames() if "/" in m}
    missing = [path for path in READ_BY_TESTS if path not in members]
    assert not missing, f"the sdist lacks {missing}"
    assert not [m for m in members if m.endswith(".pyc")]


def _declared_floors() -> dict[str, str]:
    """{name: floor} for the runtime dependencies and the test extra."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads(PYPROJECT)["project"]
    floors = {}
    for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
        match = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)>=([0-9.]+)", requirement)
        assert match, f"{requirement!r}: declare a floor as name>=version"
        floors[match[1]] = match[2]
    return floors


def test_every_declared_floor_is_installed_by_ci_floors():
    script = (ROOT / ".ci" / "floors").read_text(encoding="utf-8")
    assert (ROOT / ".ci" / "floors").stat().st_mode & 0o111, ".ci/floors is not executable"
    listed = set()
    for array in ("base_names", "optional_names"):
        match = re.search(rf"^{array}=\((.*)\)$", script, re.MULTILINE)
        assert match, f".ci/floors has no {array}=(...) line"
        listed |= {name.strip("'") for name in match[1].split()}
    for name in _declared_floors():
        assert name in listed, f"{name} has a floor in pyproject.toml that .ci/floors does not install"
    assert 'requires-python = ">=' in PYPROJECT and "python_floor" in script


def test_ci_floors_reads_each_floor_from_pyproject():
    floor = re.search(r"^floor\(\) \{\n.*?^\}\n", (ROOT / ".ci" / "floors").read_text(encoding="utf-8"),
                      re.MULTILINE | re.DOTALL)
    assert floor is not None
    names = list(_declared_floors())
    script = floor[0] + "".join(f"floor '{name}'\n" for name in names)
    result = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [f"{name}=={v}" for name, v in _declared_floors().items()]


def test_classifiers_name_every_python_ci_tests():
    # CI runs the suite on the requires-python floor (.ci/floors) and on the interpreter running
    # this test; both must be classified, and no classified version may lie below the floor.
    floor = re.search(r'^requires-python = ">=([0-9]+)\.([0-9]+)"$', PYPROJECT, re.MULTILINE)
    assert floor is not None
    listed = {tuple(map(int, v)) for v in re.findall(r'"Programming Language :: Python :: (\d+)\.(\d+)"',
                                                      PYPROJECT)}
    floor_version = (int(floor[1]), int(floor[2]))
    assert floor_version in listed
    assert sys.version_info[:2] in listed, f"no classifier for Python {sys.version_info[:2]}"
    assert min(listed) == floor_version


def test_metadata_carries_no_placeholder():
    assert "<" not in "".join(re.findall(r'^(?:Homepage|Repository|Documentation|Issues) = .*$', PYPROJECT,
                                         re.MULTILINE))
    assert "example.com" not in PYPROJECT and "<repository" not in PYPROJECT
    assert re.search(r'^authors = \[', PYPROJECT, re.MULTILINE)
