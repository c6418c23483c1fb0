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
    added = set(_hooks()._extra_files().values())  # what dev/mkdocs_hooks.py brings from outside docs/
    assert listed - pages <= added, f"mkdocs.yml lists pages that do not exist: {sorted(listed - pages - added)}"
    assert {p for p in added if p.endswith(".md")} <= listed, "every page the hooks add is in the nav"


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "dev" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_site_links_map_repository_paths_to_site_paths() -> None:
    hooks = _hooks()
    hooks._site_of.update({"docs/index.md": "index.md", "dev/internals.md": "dev/internals.md",
                           "README.md": "project/readme.md", "docs/reference/contract.md":
                           "reference/contract.md"})
    assert hooks._rewrite("../dev/internals.md#stages", "docs", "", "docs/index.md") == "dev/internals.md#stages"
    assert hooks._rewrite("../README.md#install", "docs", "", "docs/index.md") == "project/readme.md#install"
    assert hooks._rewrite("../docs/index.md", "dev", "dev", "dev/internals.md") == "../index.md"
    assert hooks._rewrite("../../dev/internals.md", "docs/reference", "reference", "x") == "../dev/internals.md"
    assert hooks._rewrite("https://example.org/a.md", "docs", "", "x") == "https://example.org/a.md"
    assert hooks._rewrite("#install", "docs", "", "x") == "#install"


def test_doctest_examples_are_fenced_for_the_reference() -> None:
    fence = _hooks().fence_doctests
    text = "Summary.\n\n    >>> 1 + 1\n    2\n\nAfter.\n\n```python\n>>> kept\n```"
    assert fence(text) == ("Summary.\n\n    ```pycon\n    >>> 1 + 1\n    2\n    ```\n\nAfter.\n\n"
                           "```python\n>>> kept\n```")


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


def test_a_link_outside_the_site_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    hooks = _hooks()
    hooks._site_of.clear()
    with caplog.at_level("WARNING", logger="mkdocs.hooks.repository_links"):
        assert hooks._rewrite("../tests/identifiability_table.txt", "docs", "", "docs/x.md") == (
            "../tests/identifiability_table.txt")
    assert "tests/identifiability_table.txt in the repository), which is not part of the site" in caplog.text
