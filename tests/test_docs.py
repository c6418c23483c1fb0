"""The documentation's examples run, so they cannot rot.

- Every fenced ```python block in README.md, docs/*.md and the contributor notes listed in
  `CONTRIBUTOR_NOTES` is executed, top to bottom, all blocks of one file in one shared
  namespace. A block whose first line starts with ``>>>`` is run as a doctest (its printed
  output and exception messages are compared, with ELLIPSIS and NORMALIZE_WHITESPACE so long
  messages may wrap); any other block is executed as a script and checks itself with
  ``assert``. A block preceded by the line ``<!-- no-run -->`` is skipped, and so is a block
  that imports jax or torch when that framework is not installed.
- The docstring examples of the engine's modules pass ``doctest.testmod`` (what
  ``python -m doctest`` runs).
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NO_RUN_MARKER = "<!-- no-run -->"
PYTHON_INFO_STRINGS = frozenset({"python", "py", "pycon"})
CONTRIBUTOR_NOTES = ("dev/internals.md", "dev/decisions.md")
DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
OPTIONAL_FRAMEWORKS = ("jax", "torch")
ENGINE_MODULES = (
    "contractions",
    "contractions.parser",
    "contractions.arguments",
    "contractions.solver",
    "contractions.expand",
    "contractions.plan",
    "contractions.api",
    "contractions.errors",
)

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its language, its code, and the 1-based line of its first code line."""

    path: Path
    language: str
    code: str
    first_line: int
    runnable: bool

    @property
    def is_doctest(self) -> bool:
        first = next((ln for ln in self.code.splitlines() if ln.strip()), "")
        return first.lstrip().startswith(">>>")

    def label(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.first_line}"


def extract_blocks(path: Path) -> list[CodeBlock]:
    """Every fenced code block of a markdown file, in order (python or not)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        language = (opening["info"].strip().split() or [""])[0].lower()
        previous = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if (closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= len(fence)
                    and not closing["info"].strip()):
                break
            # Content lines lose at most the opening fence's indentation (CommonMark).
            line = lines[j]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
            j += 1
        blocks.append(CodeBlock(path, language, "\n".join(body) + "\n", i + 2,
                                runnable=previous != NO_RUN_MARKER))
        i = j + 1
    return blocks


def python_blocks(path: Path) -> list[CodeBlock]:
    return [b for b in extract_blocks(path) if b.language in PYTHON_INFO_STRINGS]


def run_block(block: CodeBlock, namespace: dict) -> None:
    """Run one block in ``namespace``; raise AssertionError (with the file:line) on failure."""
    if block.is_doctest:
        test = doctest.DocTestParser().get_doctest(
            block.code, namespace, block.label(), str(block.path), block.first_line - 1)
        report: list[str] = []
        runner = doctest.DocTestRunner(optionflags=DOCTEST_FLAGS, verbose=False)
        result = runner.run(test, out=report.append, clear_globs=False)
        namespace.update(test.globs)  # DocTest ran on a copy; later blocks see its names
        if result.failed:
            raise AssertionError(f"doctest block at {block.label()} failed:\n" + "".join(report))
        return
    # Pad with blank lines so tracebacks point at the markdown file's own line numbers.
    source = "\n" * (block.first_line - 1) + block.code
    exec(compile(source, str(block.path), "exec"), namespace)  # noqa: S102 - running docs is the point


def _missing_frameworks(block: CodeBlock) -> list[str]:
    wanted = [name for name in OPTIONAL_FRAMEWORKS
              if re.search(rf"^\s*(?:>>>\s*)?(?:import|from)\s+{name}\b", block.code, re.MULTILINE)]
    return [name for name in wanted if importlib.util.find_spec(name) is None]


def run_markdown(path: Path) -> int:
    """Run every runnable python block of ``path`` in one namespace; return how many ran.

    A block importing jax or torch when that framework is not installed is skipped on its own
    (with a warning) and the rest still run, so later blocks must not depend on its names.
    """
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    ran = 0
    for block in python_blocks(path):
        if not block.runnable:
            continue
        missing = _missing_frameworks(block)
        if missing:
            warnings.warn(f"{block.label()} skipped: needs {', '.join(missing)}, not installed",
                          stacklevel=2)
            continue
        run_block(block, namespace)
        ran += 1
    return ran


def documentation_files() -> list[Path]:
    # README.md and the contributor notes are deliverables: listed even if missing, so their
    # absence fails (FileNotFoundError) instead of passing vacuously.
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *(ROOT / note for note in CONTRIBUTOR_NOTES)]


@pytest.mark.parametrize("path", documentation_files(),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_python_blocks_run(path: Path) -> None:
    run_markdown(path)


@pytest.mark.parametrize("name", ["dialect.md", "solver.md", "api.md"])
def test_core_pages_carry_checked_examples(name: str) -> None:
    # A page whose blocks all went no-run (or vanished) would pass the test above vacuously.
    path = ROOT / "docs" / name
    assert path.is_file(), f"docs/{name} is missing"
    runnable = [b for b in python_blocks(path) if b.runnable]
    assert len(runnable) >= 3, f"docs/{name} has only {len(runnable)} runnable python blocks"


@pytest.mark.parametrize("module_name", ENGINE_MODULES)
def test_module_docstring_examples(module_name: str) -> None:
    module = importlib.import_module(module_name)
    report: list[str] = []
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(verbose=False)
    for test in finder.find(module, module_name):
        runner.run(test, out=report.append)
    assert runner.tries > 0, f"{module_name} has no docstring examples"
    assert runner.failures == 0, f"docstring examples of {module_name} failed:\n" + "".join(report)


# ---- the extractor itself --------------------------------------------------------------------
SAMPLE = """\
# Title

```python
x = 1
```

<!-- no-run -->

```python
raise RuntimeError("never runs")
```

```bash
echo not python
```

  ```py
  >>> x + 1
  2
  ```
"""


def test_extractor_finds_blocks_languages_lines_and_no_run_marker(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(SAMPLE, encoding="utf-8")
    blocks = extract_blocks(page)
    assert [(b.language, b.first_line, b.runnable) for b in blocks] == [
        ("python", 4, True), ("python", 10, False), ("bash", 14, True), ("py", 18, True)]
    assert blocks[3].code == ">>> x + 1\n2\n" and blocks[3].is_doctest
    assert run_markdown(page) == 2  # the no-run block would have raised


def test_blocks_share_one_namespace_and_failures_name_the_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\n>>> y = 2\n```\n\n```python\nassert y == 3\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError) as info:
        run_markdown(page)  # y from the doctest block reaches the script block, which fails
    assert info.traceback[-1].lineno + 1 == 6  # pytest's lineno is 0-based
    assert str(info.traceback[-1].path) == str(page)


def test_wrong_doctest_output_fails_with_the_block_location(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\n>>> 1 + 1\n3\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match=r"page\.md:4 failed:(.|\n)*Expected:\s+3\s+Got:\s+2"):
        run_markdown(page)


def test_doctest_blocks_compare_wrapped_exception_messages(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\n>>> raise ValueError('a long message that the page wraps')\n"
        "Traceback (most recent call last):\n    ...\nValueError: a long message\n"
        "    that the page wraps\n```\n", encoding="utf-8")
    assert run_markdown(page) == 1
    page.write_text(
        "```python\n>>> raise ValueError('the real message')\n"
        "Traceback (most recent call last):\n    ...\nValueError: a different message\n```\n",
        encoding="utf-8")
    with pytest.raises(AssertionError, match="failed"):
        run_markdown(page)


def test_block_needing_an_absent_framework_is_skipped_alone(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "OPTIONAL_FRAMEWORKS",
                        ("not_an_installed_framework_xyz",))
    page = tmp_path / "page.md"
    page.write_text("```python\nimport not_an_installed_framework_xyz\n```\n\n"
                    "```python\n>>> 2 + 2\n4\n```\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="not_an_installed_framework_xyz, not installed"):
        assert run_markdown(page) == 1
