"""The documentation site: the API reference covers every public name, the navigation every
page, and (where mkdocs is installed) ``mkdocs build --strict`` passes.

.ci/run builds the site strictly in a venv of its own; these tests say what the reference must
hold and run the build where the ``docs`` extra is installed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import contractions
import contractions.testing

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"
_DIRECTIVE = re.compile(r"^::: (\S+)$", re.MULTILINE)


def _documented() -> set[str]:
    return {m for page in REFERENCE.glob("*.md") for m in _DIRECTIVE.findall(page.read_text(encoding="utf-8"))}


def test_reference_documents_every_public_name() -> None:
    documented = _documented()
    missing = [name for name in contractions.__all__
               if name != "__version__" and f"contractions.{name}" not in documented]
    assert not missing, f"docs/reference/*.md has no '::: contractions.NAME' for {missing}"
    exports = contractions.testing._EXPORTS  # name -> defining submodule (loaded lazily)
    missing = [name for name in contractions.testing.__all__
               if f"contractions.testing.{exports[name]}.{name}" not in documented]
    assert not missing, f"docs/reference/testing.md lacks {missing}"
    # __version__ has no docstring of its own; the page says where it comes from
    assert "__version__" in (REFERENCE / "contract.md").read_text(encoding="utf-8")


def test_reference_documents_only_names_that_exist() -> None:
    import importlib

    for target in sorted(_documented()):
        module_name, _, attribute = target.rpartition(".")
        module = importlib.import_module(module_name)
        assert hasattr(module, attribute), f"{target} does not exist"


def test_every_page_is_in_the_navigation() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.md)$", config, re.MULTILINE))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages <= listed, f"add to the nav of mkdocs.yml: {sorted(pages - listed)}"
    for page in sorted(listed - pages):  # the pages dev/mkdocs_hooks.py adds from outside docs/
        assert page.startswith(("dev/", "project/")), f"mkdocs.yml lists {page}, which does not exist"
        if page.startswith("dev/"):
            assert (ROOT / page).is_file(), f"mkdocs.yml lists {page}, which does not exist"


@pytest.mark.slow
def test_site_builds_strictly(tmp_path: Path) -> None:
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:
            found = False
        if not found:
            pytest.skip(f"{module} is not installed (pip install -e '.[docs]')")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    site = tmp_path / "site"
    for page in ("index.html", "coming-from/index.html", "reference/contract/index.html",
                 "dev/internals/index.html", "project/changelog/index.html", "search/search_index.json"):
        assert (site / page).is_file(), page
    contract_page = (site / "reference" / "contract" / "index.html").read_text(encoding="utf-8")
    assert "Evaluate a grouped einsum." in contract_page
    assert "&gt;&gt;&gt;" in contract_page and "<blockquote>" not in contract_page  # fenced doctests
