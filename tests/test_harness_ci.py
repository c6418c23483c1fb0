"""`.ci/run`: lint and type-check before the README's test command, which it runs verbatim."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / ".ci" / "run"


def _commands() -> list[str]:
    """The script's executable lines, comments and blank lines dropped."""
    lines = [line.strip() for line in SCRIPT.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_the_script_is_valid_bash() -> None:
    proc = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_ruff_and_mypy_run_before_the_readme_test_command() -> None:
    commands = _commands()

    def index(pattern: str) -> int:
        found = [i for i, line in enumerate(commands) if re.search(pattern, line)]
        assert len(found) == 1, (pattern, found)
        return found[0]

    ruff = index(r"/bin/ruff\"? check contractions tests examples bench$")
    mypy = index(r"/bin/mypy\"? contractions$")
    install = index(r"/bin/pip\"? install .*'ruff==[\d.]+' 'mypy==[\d.]+'")
    readme = index(r'^bash -euo pipefail -c "\$test_cmd"$')
    assert install < ruff < readme and install < mypy < readme
    # The linters live in their own venv: the README's .venv is created by its own command.
    assert index(r"^rm -rf \.venv$") > mypy


def test_the_test_command_is_the_readme_line_after_its_marker() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    marker = readme.index("# install and run the tests")
    test_cmd = readme[marker + 1]
    assert "pytest" in test_cmd and ".venv" in test_cmd
    assert "grep -A1 '^# install and run the tests$' README.md | tail -n 1" in SCRIPT.read_text()
