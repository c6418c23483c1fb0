"""The documentation's examples run, so they cannot rot.

- Every fenced ```python block in README.md, docs/*.md and the contributor notes listed in
  `CONTRIBUTOR_NOTES` is executed, top to bottom, all blocks of one file in one shared
  namespace. A block whose first line starts with ``>>>`` is run as a doctest (its printed
  output and exception messages are compared, with ELLIPSIS and NORMALIZE_WHITESPACE so long
  messages may wrap); any other block is executed as a script and checks itself with
  ``assert``. A block preceded by the line ``<!-- no-run -->`` is skipped.
- A block that imports an optional library (`OPTIONAL_FRAMEWORKS`: jax, torch, dask, einx,
  cotengra, ...) when it is not installed is skipped, and so is
  every later block of the file that uses a name only a skipped block defined; the other blocks
  still run, and the file's test then reports a skip naming what was left out and why.
- The docstring examples of the engine's modules pass ``doctest.testmod`` (what
  ``python -m doctest`` runs).
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import re
import subprocess
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
OPTIONAL_FRAMEWORKS = ("jax", "torch", "dask", "distributed", "array_api_strict", "einx", "cotengra")
ENGINE_MODULES = (
    "contractions",
    "contractions.parser",
    "contractions.arguments",
    "contractions.solver",
    "contractions.expand",
    "contractions.plan",
    "contractions.schedule",
    "contractions.schedule.memory",
    "contractions.schedule.paths",
    "contractions.schedule.lowering",
    "contractions.schedule.blocking",
    "contractions.schedule.describe",
    "contractions.model.host",
    "contractions.model.profile",
    "contractions.model.numpy_prices",
    "contractions.model.layout",
    "contractions.calibrate",
    "contractions.backends",
    "contractions.backends.compile",
    "contractions.backends.numpy_backend",
    "contractions.compat",
    "contractions.api",
    "contractions.errors",
    "contractions.caching",
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
    return [name for name in wanted if _absent(name)]


def _absent(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):  # a parent package hidden or broken
        return True


def _source(block: CodeBlock) -> str:
    """The block's Python source (a doctest block's ``>>>`` examples, joined)."""
    if block.is_doctest:
        return "".join(ex.source for ex in doctest.DocTestParser().get_examples(block.code))
    return block.code


def _names(block: CodeBlock) -> tuple[set[str], set[str]]:
    """(names the block binds, names it reads before binding them itself), from its AST.

    Statement by statement, so ``import torch`` then ``torch.ones(2)`` in one block reads
    nothing from earlier blocks. Deliberately coarse inside a statement (a name bound
    anywhere in it counts as bound): good enough to tell which blocks lean on a skipped one.
    """
    try:
        tree = ast.parse(_source(block))
    except SyntaxError:
        return set(), set()
    bound: set[str] = set()
    free: set[str] = set()
    for statement in tree.body:
        binds: set[str] = set()
        reads: set[str] = set()
        updated: set[str] = set()  # `s += 1` reads s before binding it
        for node in ast.walk(statement):
            if isinstance(node, ast.Name):
                (reads if isinstance(node.ctx, ast.Load) else binds).add(node.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                updated.add(node.target.id)
            elif isinstance(node, ast.alias):
                binds.add(node.asname or node.name.split(".")[0])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                binds.add(node.name)
            elif isinstance(node, ast.arg):
                binds.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                binds.add(node.name)
        free |= (reads - bound - binds) | (updated - bound)
        bound |= binds
    return bound, free


@dataclass(frozen=True)
class MarkdownRun:
    """What `run_markdown` did: how many blocks ran, and each skipped block with its reason."""

    ran: int
    skipped: tuple[str, ...]


def run_markdown(path: Path) -> MarkdownRun:
    """Run every runnable python block of ``path`` in order, in one namespace.

    A block importing a framework that is not installed (`OPTIONAL_FRAMEWORKS`) is skipped,
    and so is every later block that reads a name only skipped blocks bound (until a block
    that ran binds it again); the other blocks still run. Each skip is also warned about.
    """
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    ran = 0
    skipped: list[str] = []
    unavailable: set[str] = set()  # names bound only by skipped blocks
    for block in python_blocks(path):
        if not block.runnable:
            continue
        bound, free = _names(block)
        missing = _missing_frameworks(block)
        leaned_on = sorted(free & unavailable)
        if missing or leaned_on:
            reason = (f"needs {', '.join(missing)}, not installed" if missing else
                      f"uses {', '.join(leaned_on)} from a skipped block")
            skipped.append(f"{block.label()} {reason}")
            warnings.warn(f"{block.label()} skipped: {reason}", stacklevel=2)
            unavailable |= bound
            continue
        run_block(block, namespace)
        unavailable -= bound
        ran += 1
    return MarkdownRun(ran, tuple(skipped))


def documentation_files() -> list[Path]:
    # README.md and the contributor notes are deliverables: listed even if missing, so their
    # absence fails (FileNotFoundError) instead of passing vacuously.
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *(ROOT / note for note in CONTRIBUTOR_NOTES)]


@pytest.mark.parametrize("path", documentation_files(),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_python_blocks_run(path: Path) -> None:
    result = run_markdown(path)
    if result.skipped:
        pytest.skip(f"{result.ran} blocks ran; skipped (a framework is missing): "
                    + "; ".join(result.skipped))


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
    assert run_markdown(page) == MarkdownRun(2, ())  # the no-run block would have raised


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
    assert run_markdown(page).ran == 1
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
        result = run_markdown(page)
    assert result.ran == 1 and len(result.skipped) == 1
    assert result.skipped[0].endswith("page.md:2 needs not_an_installed_framework_xyz, not installed")


LEANING_PAGE = """\
```python
import fake_framework_xyz as ff
x = ff.ones(3)
```

```python
y = x + 1          # leans on the skipped block: skipped too
```

```python
>>> ff.zeros(2)    # so does this doctest
```

```python
import numpy as np
z = np.ones(2)     # independent: runs
```

```python
x = 5              # binds x again, from a block that ran ...
```

```python
assert x == 5      # ... so this one runs
assert z.sum() == 2
```
"""


def test_blocks_leaning_on_a_skipped_block_are_skipped_too(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "OPTIONAL_FRAMEWORKS", ("fake_framework_xyz",))
    page = tmp_path / "page.md"
    page.write_text(LEANING_PAGE, encoding="utf-8")
    with pytest.warns(UserWarning):
        result = run_markdown(page)
    assert result.ran == 3
    assert [r.split("page.md:")[1] for r in result.skipped] == [
        "2 needs fake_framework_xyz, not installed",
        "7 uses x from a skipped block",
        "11 uses ff from a skipped block",
    ]


def test_a_page_with_skipped_blocks_is_reported_as_skipped(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "OPTIONAL_FRAMEWORKS", ("fake_framework_xyz",))
    page = tmp_path / "page.md"
    page.write_text(LEANING_PAGE, encoding="utf-8")
    with pytest.warns(UserWarning), pytest.raises(pytest.skip.Exception,
                                                  match="3 blocks ran; skipped .*fake_framework_xyz"):
        test_markdown_python_blocks_run(page)


def test_names_are_read_statement_by_statement() -> None:
    block = CodeBlock(Path("page.md"), "python",
                      "import torch.nn as nn\nfrom a import b\nnn.f(b, c)\nfor i in r: s += i\n"
                      "def f(u):\n    return u + v\n", 1, True)
    bound, free = _names(block)
    assert bound == {"nn", "b", "i", "s", "f", "u"}
    assert free == {"c", "r", "s", "v"}


@pytest.mark.parametrize("hidden", ["torch", pytest.param("jax", marks=pytest.mark.slow)])
def test_docs_skip_rather_than_fail_when_a_framework_is_hidden(hidden: str) -> None:
    """With one framework made unimportable, every page passes or skips with a reason naming it."""
    if _absent("jax" if hidden == "torch" else "torch"):
        pytest.skip("needs the other framework installed, so that its blocks run")
    # A finder that refuses the framework, as if it were not installed (nothing lands in
    # sys.modules, unlike the `sys.modules[name] = None` idiom).
    code = ("import sys\n"
            "class Hide:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            f"        if name.partition('.')[0] == {hidden!r}:\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Hide())\n"
            "import pytest\n"
            "raise SystemExit(pytest.main(['-q', '-rs', '-p', 'no:cacheprovider', '-W', "
            "'ignore::DeprecationWarning', "
            "'tests/test_docs.py::test_markdown_python_blocks_run[docs/transforms.md]', "
            "'tests/test_docs_transforms.py']))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert re.search(rf"SKIPPED .*docs/transforms\.md.* needs {hidden}, not installed", out), out
    assert " failed" not in out and " passed" in out, out


# ---- what the documents cite and how they say to install ---------------------------------------
MARKDOWN_FILES = ("README.md", "CLAUDE.md", "CHANGELOG.md", "CONTRIBUTING.md", "docs/**/*.md", "dev/*.md",
                  "bench/*.md")
CITING_FILES = (*MARKDOWN_FILES, "examples/*.py", "tests/*.py", "tests/*.txt", "bench/*.py",
                "contractions/**/*.py")
# Built from parts so that this file does not match itself.
UNSHIPPED_CITATION = re.compile("\u00a7|\\b" + "SP" + r"EC\b(?!\s*=)|(?i:\bissue\s+#?\d+)")
_LINK = re.compile(r"\]\(([^()\s]+)\)")


def _files(patterns: tuple[str, ...]) -> list[Path]:
    return sorted({p for pattern in patterns for p in ROOT.glob(pattern) if p.is_file()})


def test_documents_cite_only_documents_that_ship() -> None:
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            for path in _files(CITING_FILES)
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if UNSHIPPED_CITATION.search(line) and not line.lstrip().startswith(("SPEC =", "SPEC="))]
    assert not hits, "cite docs/dialect.md, docs/solver.md, docs/harness.md, dev/decisions.md ...:\n" + (
        "\n".join(hits))


def test_relative_links_point_at_files_that_ship() -> None:
    broken = []
    for path in _files(MARKDOWN_FILES):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for target in _LINK.findall(line):
                if re.match(r"[a-z]+:|#|<", target):
                    continue
                if not (path.parent / target.split("#", 1)[0]).exists():
                    broken.append(f"{path.relative_to(ROOT)}:{n}: {target}")
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)


# `pip install grouped-einsum[...]` from an index: not published yet (a `name @ git+URL` is fine).
INDEX_INSTALL = re.compile(r"pip install\s+(?:-\S+\s+)*['\"]?grouped-einsum(?![\w\[\],-]*\s*@)")


def test_install_instructions_work_from_a_checkout() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for text in (readme, index):
        assert "pip install ." in text and "git+" in text
        assert "unrelated" in text and "PyPI" in text  # the index name `contractions` is not ours
    assert "## Install" in readme
    wrong = [f"{path.relative_to(ROOT)}:{n}" for path in _files(MARKDOWN_FILES)
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if INDEX_INSTALL.search(line)]
    assert not wrong, f"install from a clone ('.[extra]'), the index has no grouped-einsum: {wrong}"


@pytest.mark.parametrize("line,flagged", [
    ("pip install 'grouped-einsum[jax]'", True), ('pip install -U "grouped-einsum"', True),
    ("pip install grouped-einsum", True), ("pip install 'grouped-einsum[jax] @ git+<URL>'", False),
    ("pip install 'grouped-einsum @ git+https://x/y.git'", False), ("pip install '.[jax]'", False)])
def test_index_install_pattern(line: str, flagged: bool) -> None:
    assert bool(INDEX_INSTALL.search(line)) is flagged
