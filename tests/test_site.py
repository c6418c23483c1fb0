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


def _titles() -> dict[str, str]:
    """Each page of docs/ (and each page the hooks add) -> its first heading."""
    pages = {p.relative_to(ROOT).as_posix(): p for p in (ROOT / "docs").rglob("*.md")}
    pages.update({repo: ROOT / repo for repo in _hooks()._extra_files() if repo.endswith(".md")})
    titles = {}
    for name, path in pages.items():
        heading = re.search(r"^#{1,6} (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
        assert heading, f"{name} has no heading"
        titles[name] = heading[1].strip()
    return titles


def test_pages_and_navigation_entries_have_distinct_titles() -> None:
    # Two pages once both read "API reference" (the guide and the generated reference), and two
    # "Coming from np.einsum" pages overlapped: a reader could not tell which to open.
    titles = _titles()
    seen: dict[str, str] = {}
    for name, title in sorted(titles.items()):
        assert title.lower() not in seen, f"{name} and {seen[title.lower()]} are both titled {title!r}"
        seen[title.lower()] = name
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    labels = re.findall(r"^\s+- ([^:\n]+): \S+\.md$", config, re.MULTILINE)
    assert len(labels) == len(set(labels)), f"repeated navigation labels: {sorted(labels)}"
    assert [t for t in titles.values() if t == "API reference"] == ["API reference"]


def test_getting_started_comes_first_and_covers_a_newcomers_path() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.md)$", config, re.MULTILINE)
    assert nav[:3] == ["index.md", "getting-started.md", "numpy-compat.md"], nav[:3]
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    for heading in ("## Install", "## A first call", "## Groups", "## The first error you will meet",
                    "## Where next"):
        assert heading in text, heading


def test_every_image_in_docs_is_shown_on_a_page() -> None:
    shown = {target for page in (ROOT / "docs").rglob("*.md")
             for target in re.findall(r"!\[[^\]]*\]\(([^()\s]+)\)", page.read_text(encoding="utf-8"))}
    images = {p.name for p in (ROOT / "docs").glob("*.png")}
    assert images <= shown, f"images no page embeds: {sorted(images - shown)}"


def test_the_api_guide_error_tree_lists_every_error_class() -> None:
    from contractions import errors

    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = text[text.index("## Errors"):]
    tree = section[section.index("```text"):section.index("```\n", section.index("```text") + 7)]
    entries: dict[str, str] = {}  # class name -> its line(s) in the tree
    current = None
    for line in tree.splitlines()[1:]:
        name = re.search(r"(?:└──|├──)\s+(\w+)", line)
        if name:
            current = name[1]
            entries[current] = line
        elif current and line.strip(" │"):
            entries[current] += " " + line.strip(" │")
    classes = {name: cls for name, cls in vars(errors).items()
               if isinstance(cls, type) and issubclass(cls, errors.ContractionError)}
    assert set(entries) == set(classes), (
        f"docs/api.md's error tree lacks {sorted(set(classes) - set(entries))}, "
        f"names classes that do not exist {sorted(set(entries) - set(classes))}")
    for name, cls in classes.items():
        for base in cls.__bases__:
            if base.__module__ == "builtins" and base is not ValueError:
                assert base.__name__ in entries[name], f"the error tree omits that {name} is also a {base.__name__}"


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
    for page in ("index.html", "getting-started/index.html", "numpy-compat/index.html",
                 "reference/contract/index.html",
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
