"""The documentation's examples run, so they cannot rot, and each runs where a reader pastes it.

Pages (README.md and docs/*.md):

- Every fenced ```python block runs, in page order. A block whose first line starts with ``>>>``
  is a doctest (printed output and exception messages are compared, with ELLIPSIS and
  NORMALIZE_WHITESPACE so long messages may wrap); any other block is a script that checks
  itself with ``assert``. A block preceded by the line ``<!-- no-run -->`` is skipped.
- Every block runs in a fresh namespace. It either binds every name it reads, so it runs when
  pasted alone, or its first line is the comment ``# run "Setup for this page" first`` (any
  title starting "Setup for"), naming the first block under a heading of that title earlier on
  the page: that setup block runs again, alone, just before it. So a reader who pastes the setup
  block and then any one block gets what the page shows.
- A block that needs a package the base install lacks (`pip install .` brings numpy and
  opt_einsum; `OPTIONAL_PACKAGES` lists the others) says so twice: a visible line above it that
  starts with "Needs" and names the package, and the marker ``<!-- needs: torch -->`` (several
  names separated by commas) between that line and the fence. Where one of its packages cannot
  be imported, the block is skipped; no other block is ever skipped.
  `test_markdown_blocks_declare_what_they_need` fails for a block that imports an optional
  package without the marker, reads a name it does not bind, or leans on a setup block that
  needs more than it declares. `test_docs_pass_on_a_base_install` runs every page with each
  installed distribution the base install would not bring hidden from import (nothing is
  uninstalled), so a block that needs an optional package indirectly and is not marked fails.

The contributor notes (`CONTRIBUTOR_NOTES`) run their blocks in order in one shared namespace;
the marker rules apply to them too. The docstring examples of the engine's modules pass
``doctest.testmod`` (what ``python -m doctest`` runs).
"""

from __future__ import annotations

import ast
import builtins
import doctest
import importlib
import importlib.util
import json
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
# Importable names of the packages a base install lacks; a block importing one carries
# `<!-- needs: NAME -->`. pytest and hypothesis come with the test extra only.
OPTIONAL_PACKAGES = ("jax", "torch", "dask", "distributed", "cupy", "matplotlib", "cotengra", "einx",
                     "array_api_strict", "pytest", "hypothesis")
SETUP_PREFIX = "Setup for"
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
    "contractions.calls.remembered",
    "contractions.calls.tiers",
    "contractions.model.host",
    "contractions.model.profile",
    "contractions.model.numpy_prices",
    "contractions.model.layout",
    "contractions.calibrate",
    "contractions.backends",
    "contractions.backends.compile",
    "contractions.backends.numpy_backend",
    "contractions.compat",
    "contractions.checks",
    "contractions.api",
    "contractions.explaining",
    "contractions.expressions",
    "contractions.errors",
    "contractions.caching",
)

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(?P<title>.+?)(?:\s+#+)?\s*$")
_HTML_COMMENT = re.compile(r"^<!--.*-->$")
_NEEDS = re.compile(r"^<!--\s*needs:(?P<names>[^>]*?)-->$")
_SETUP_NOTE = re.compile(r'^(?:>>>\s*)?#\s*run "(?P<title>' + SETUP_PREFIX + r'[^"]*)" first')
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its language, its code, the 1-based line of its first code line, and
    what the lines above it say (``<!-- no-run -->``, ``<!-- needs: ... -->``, a setup heading)."""

    path: Path
    language: str
    code: str
    first_line: int
    runnable: bool
    needs: tuple[str, ...] = ()
    needs_line: str = ""  # the last line of text above the block's markers
    setup_title: str | None = None  # the "Setup for ..." heading this block is the setup block of

    @property
    def is_doctest(self) -> bool:
        first = next((ln for ln in self.code.splitlines() if ln.strip()), "")
        return first.lstrip().startswith(">>>")

    @property
    def after_setup(self) -> str | None:
        """The setup block's title when the block starts with ``# run "Setup for ..." first``."""
        first = next((ln.strip() for ln in self.code.splitlines() if ln.strip()), "")
        note = _SETUP_NOTE.match(first)
        return note["title"] if note else None

    def label(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.first_line}"


def _above(lines: list[str], i: int) -> tuple[list[str], str]:
    """The HTML comment lines just above line ``i`` (blank lines between allowed) and the
    nearest line of text above them."""
    markers: list[str] = []
    k = i - 1
    while k >= 0:
        line = lines[k].strip()
        if line and not _HTML_COMMENT.match(line):
            return markers, line
        if line:
            markers.append(line)
        k -= 1
    return markers, ""


def extract_blocks(path: Path) -> list[CodeBlock]:
    """Every fenced code block of a markdown file, in order (python or not)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[CodeBlock] = []
    heading: str | None = None
    python_since_heading = 0
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            title = _HEADING.match(lines[i])
            if title:
                heading, python_since_heading = title["title"], 0
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        language = (opening["info"].strip().split() or [""])[0].lower()
        markers, text_above = _above(lines, i)
        needs = sorted({name.strip() for marker in markers if (found := _NEEDS.match(marker))
                        for name in found["names"].split(",") if name.strip()})
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
        is_python = language in PYTHON_INFO_STRINGS
        setup = (heading if is_python and python_since_heading == 0 and heading is not None
                 and heading.startswith(SETUP_PREFIX) else None)
        blocks.append(CodeBlock(path, language, "\n".join(body) + "\n", i + 2,
                                runnable=NO_RUN_MARKER not in markers, needs=tuple(needs),
                                needs_line=text_above if needs else "", setup_title=setup))
        python_since_heading += is_python
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


def _imported(block: CodeBlock) -> set[str]:
    """The top-level packages the block imports (by its AST; by a line match if it does not parse)."""
    try:
        tree = ast.parse(_source(block))
    except SyntaxError:
        return set(re.findall(r"^\s*(?:>>>\s*)?(?:import|from)\s+(\w+)", block.code, re.MULTILINE))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.partition(".")[0])
    return found


def _names(block: CodeBlock) -> tuple[set[str], set[str]]:
    """(names the block binds, names it reads before binding them itself), from its AST.

    Statement by statement, so ``import torch`` then ``torch.ones(2)`` in one block reads
    nothing from earlier blocks. Deliberately coarse inside a statement (a name bound
    anywhere in it counts as bound): good enough to tell which blocks lean on others.
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


def _is_contributor_note(path: Path) -> bool:
    return path.resolve() in {(ROOT / note).resolve() for note in CONTRIBUTOR_NOTES}


def _announces(line: str, needs: tuple[str, ...]) -> bool:
    """Whether the visible line says "Needs ..." and names every package in ``needs``."""
    text = line.lstrip("*_> ").lower()
    return text.startswith("needs") and all(
        name.lower() in text or name.lower().replace("_", "-") in text for name in needs)


def markdown_problems(path: Path, *, shared: bool | None = None) -> list[str]:
    """What is wrong with the blocks' declarations (see the module docstring); empty if nothing.

    ``shared``: the blocks run in one namespace (the contributor notes' way), so a block may
    read what an earlier block bound, but must then declare every package that block needs.
    """
    shared = _is_contributor_note(path) if shared is None else shared
    problems: list[str] = []
    setups: dict[str, tuple[CodeBlock, set[str]]] = {}
    needs_of_name: dict[str, set[str]] = {}  # shared namespace: name -> needs of its last binder
    for block in python_blocks(path):
        where, needs = block.label(), set(block.needs)
        unknown = needs - set(OPTIONAL_PACKAGES)
        if unknown:
            problems.append(f"{where}: '<!-- needs: ... -->' names {', '.join(sorted(unknown))}, "
                            f"which is not one of {OPTIONAL_PACKAGES}")
        undeclared = (_imported(block) & set(OPTIONAL_PACKAGES)) - needs
        if undeclared:
            problems.append(
                f"{where}: imports {', '.join(sorted(undeclared))}, which the base install lacks: "
                f"put '<!-- needs: {', '.join(sorted(needs | undeclared))} -->' on the line before "
                "the block, below a visible line such as 'Needs torch.'")
        if needs and not _announces(block.needs_line, block.needs):
            problems.append(f"{where}: the line above its needs marker must say so to a reader, "
                            f"e.g. 'Needs {' and '.join(block.needs)}.'; it reads {block.needs_line!r}")
        if not block.runnable:
            continue
        bound, free = _names(block)
        free -= _BUILTINS
        if shared:
            leaned = sorted(n for n in free if needs_of_name.get(n, set()) - needs)
            if leaned:
                more = set().union(*(needs_of_name[n] for n in leaned)) - needs
                problems.append(f"{where}: reads {', '.join(leaned)} from a block that needs "
                                f"{', '.join(sorted(more))}: mark this block as needing it too")
            needs_of_name.update({name: needs for name in bound})
            continue
        title = block.after_setup
        if block.setup_title is not None and title is not None:
            problems.append(f"{where}: a setup block must not rely on another setup block")
        elif title is not None:
            if title not in setups:
                problems.append(f'{where}: starts with # run "{title}" first, but no block under a '
                                f'heading "{title}" comes before it on this page')
                continue
            setup, setup_bound = setups[title]
            missing = free - setup_bound
            if missing:
                problems.append(f"{where}: reads {', '.join(sorted(missing))}, which neither it nor "
                                f"its setup block ({setup.label()}) binds: bind them in one of the two")
            more = set(setup.needs) - needs
            if more:
                problems.append(f"{where}: its setup block needs {', '.join(sorted(more))}: mark this "
                                "block as needing it too")
        elif free:
            problems.append(
                f"{where}: reads {', '.join(sorted(free))} without binding them, so it fails when "
                f"pasted alone: bind them in the block, or move them into a block under a heading "
                f"'{SETUP_PREFIX} this page' and start this block with "
                f"'# run \"{SETUP_PREFIX} this page\" first'")
        if block.setup_title is not None:
            setups[block.setup_title] = (block, bound)
    return problems


@dataclass(frozen=True)
class MarkdownRun:
    """What `run_markdown` did: how many blocks ran, and each skipped block with its reason."""

    ran: int
    skipped: tuple[str, ...]


def run_markdown(path: Path, *, shared: bool | None = None) -> MarkdownRun:
    """Run every runnable python block of ``path``, in page order.

    Each block runs in a fresh namespace, after its setup block when it names one (see the
    module docstring); with ``shared`` (the contributor notes' default), all blocks run in one
    namespace instead. A block whose ``<!-- needs: ... -->`` names a package that cannot be
    imported is skipped, with a warning; every other block runs.
    """
    shared = _is_contributor_note(path) if shared is None else shared
    fresh = lambda: {"__name__": f"docs_{path.stem}"}  # noqa: E731
    namespace = fresh()
    setups: dict[str, CodeBlock] = {}
    ran = 0
    skipped: list[str] = []
    for block in python_blocks(path):
        if not block.runnable:
            continue
        missing = [name for name in block.needs if _absent(name)]
        if missing:
            reason = f"needs {', '.join(missing)}, not installed"
            skipped.append(f"{block.label()} {reason}")
            warnings.warn(f"{block.label()} skipped: {reason}", stacklevel=2)
            continue
        if not shared:
            namespace = fresh()
            title = block.after_setup
            if title is not None and block.setup_title is None:
                if title not in setups:
                    raise AssertionError(f'{block.label()} runs after "{title}", which no earlier '
                                         "block on the page is the setup block of")
                run_block(setups[title], namespace)
        run_block(block, namespace)
        if block.setup_title is not None:
            setups[block.setup_title] = block
        ran += 1
    return MarkdownRun(ran, tuple(skipped))


def documentation_files() -> list[Path]:
    # README.md and the contributor notes are deliverables: listed even if missing, so their
    # absence fails (FileNotFoundError) instead of passing vacuously.
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *(ROOT / note for note in CONTRIBUTOR_NOTES)]


def _page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", documentation_files(), ids=_page_id)
def test_markdown_python_blocks_run(path: Path) -> None:
    result = run_markdown(path)
    if result.skipped:
        pytest.skip(f"{result.ran} blocks ran; skipped (a package is missing): "
                    + "; ".join(result.skipped))


@pytest.mark.parametrize("path", documentation_files(), ids=_page_id)
def test_markdown_blocks_declare_what_they_need(path: Path) -> None:
    problems = markdown_problems(path)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ["getting-started.md", "dialect.md", "solver.md", "api.md"])
def test_core_pages_carry_checked_examples(name: str) -> None:
    # A page whose blocks all went no-run (or vanished) would pass the tests above vacuously.
    path = ROOT / "docs" / name
    assert path.is_file(), f"docs/{name} is missing"
    runnable = [b for b in python_blocks(path) if b.runnable and not b.needs]
    assert len(runnable) >= 3, f"docs/{name} has only {len(runnable)} runnable base-install blocks"


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


# ---- the base install, simulated -------------------------------------------------------------
def _distribution(requirement: str) -> str:
    """The normalised distribution name a requirement string starts with."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert name, requirement
    return re.sub(r"[-_.]+", "-", name[1]).lower()


def base_install_hidden() -> set[str]:
    """Top-level modules of the installed distributions that `pip install .` would not bring
    (pyproject.toml's dependencies and theirs, followed through the installed metadata)."""
    from importlib import metadata

    listed = re.search(r"^dependencies\s*=\s*\[(.*?)\]", (ROOT / "pyproject.toml").read_text(encoding="utf-8"),
                       re.MULTILINE | re.DOTALL)
    assert listed, "pyproject.toml has no dependencies list"
    todo = [_distribution(r) for r in re.findall(r"\"([^\"]+)\"", listed[1])]
    base = {"grouped-einsum", "pip", "setuptools", "wheel"}  # the installer's own are in any venv
    while todo:
        name = todo.pop()
        if name in base:
            continue
        base.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_distribution(r) for r in requires if "extra" not in r.partition(";")[2]]
    return {module for module, dists in metadata.packages_distributions().items()
            if module.isidentifier() and not {_distribution(d) for d in dists} & base}


_BASE_INSTALL_RUN = """\
import json, sys, traceback, warnings
sys.path.insert(0, sys.argv[1])
from tests import test_docs as docs
hidden = set(json.loads(sys.argv[2]))
for name in [m for m in sys.modules if m.partition('.')[0] in hidden]:
    del sys.modules[name]          # pytest, imported by the runner's module: hidden from the blocks
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.partition('.')[0] in hidden:
            raise ModuleNotFoundError(f'No module named {name!r} (hidden: not in the base install)',
                                      name=name)
sys.meta_path.insert(0, Hide())
warnings.simplefilter('ignore')
report = {}
for path in docs.documentation_files():
    try:
        run = docs.run_markdown(path)
        report[docs._page_id(path)] = {'ran': run.ran, 'skipped': list(run.skipped)}
    except BaseException as exc:
        where = [f'{frame.filename}:{frame.lineno}' for frame in traceback.extract_tb(exc.__traceback__)
                 if frame.filename.endswith('.md')]
        report[docs._page_id(path)] = {'error': f'{where[-1] + ": " if where else ""}'
                                                f'{type(exc).__name__}: {exc}'}
print(json.dumps(report))
"""


def test_docs_pass_on_a_base_install() -> None:
    """Every page, with whatever `pip install .` would not bring hidden from import: every block
    runs except those marked as needing a hidden package, and every one that runs passes."""
    hidden = base_install_hidden()
    assert {"jax", "torch", "pytest"} <= hidden or _absent("jax") or _absent("torch"), sorted(hidden)
    result = subprocess.run([sys.executable, "-c", _BASE_INSTALL_RUN, str(ROOT), json.dumps(sorted(hidden))],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    failed = {page: r["error"] for page, r in report.items() if "error" in r}
    assert not failed, "on a base install (mark what a block needs with <!-- needs: NAME -->):\n" + (
        "\n".join(f"{page}: {error}" for page, error in failed.items()))
    marked = {b.label(): set(b.needs) for path in documentation_files() for b in python_blocks(path)}
    unavailable = hidden | {name for name in OPTIONAL_PACKAGES if _absent(name)}
    for r in report.values():
        for entry in r["skipped"]:
            label = entry.split(" ", 1)[0]
            assert marked[label] & unavailable, entry  # skipped only for a marked, missing package
    assert sum(r["ran"] for r in report.values()) >= 80  # no vacuous pass: most blocks need nothing more


# ---- the runner and the checks themselves ------------------------------------------------------
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
  >>> 1 + 1
  2
  ```
"""


def test_extractor_finds_blocks_languages_lines_and_no_run_marker(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(SAMPLE, encoding="utf-8")
    blocks = extract_blocks(page)
    assert [(b.language, b.first_line, b.runnable) for b in blocks] == [
        ("python", 4, True), ("python", 10, False), ("bash", 14, True), ("py", 18, True)]
    assert blocks[3].code == ">>> 1 + 1\n2\n" and blocks[3].is_doctest
    assert run_markdown(page) == MarkdownRun(2, ())  # the no-run block would have raised


def test_shared_blocks_see_one_namespace_and_failures_name_the_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\n>>> y = 2\n```\n\n```python\nassert y == 3\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError) as info:
        run_markdown(page, shared=True)  # y from the doctest block reaches the script block, which fails
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


SETUP_PAGE = """\
# A page

## Setup for this page

```python
import numpy as np
data = [1, 2]
```

## Use

```python
# run "Setup for this page" first
data.append(3)
assert data == [1, 2, 3]   # the setup ran again: the block before did not leak into this one
```

```python
>>> # run "Setup for this page" first
>>> data + [3]
[1, 2, 3]
```

```python
z = 4
```

```python
assert z == 4          # z is not bound here: fails alone
```
"""


def test_each_block_runs_alone_or_after_its_setup_block(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(SETUP_PAGE, encoding="utf-8")
    blocks = python_blocks(page)
    assert [b.setup_title for b in blocks] == ["Setup for this page", None, None, None, None]
    assert [b.after_setup for b in blocks] == [None, "Setup for this page", "Setup for this page", None, None]
    with pytest.raises(NameError, match="'z' is not defined"):
        run_markdown(page)
    assert markdown_problems(page) == [
        f"{blocks[4].label()}: reads z without binding them, so it fails when pasted alone: bind "
        "them in the block, or move them into a block under a heading 'Setup for this page' and "
        "start this block with '# run \"Setup for this page\" first'"]
    page.write_text(SETUP_PAGE.replace("assert z == 4          # z", "z = 4\nassert z == 4   # "),
                    encoding="utf-8")
    assert run_markdown(page) == MarkdownRun(5, ()) and markdown_problems(page) == []


def test_a_block_may_read_only_what_its_setup_block_binds(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("## Setup for the examples\n\n<!-- no-run -->\n\n```python\nq = 1\n```\n\n"
                    "## Setup for this page\n\n```python\nx = 1\n```\n\n"
                    "```python\n# run \"Setup for this page\" first\nassert x + y == 3\n```\n\n"
                    "```python\n# run \"Setup for nothing\" first\n```\n", encoding="utf-8")
    problems = markdown_problems(page)
    assert len(problems) == 2
    assert "page.md:16: reads y, which neither it nor its setup block (" in problems[0]
    assert 'page.md:21: starts with # run "Setup for nothing" first, but no block' in problems[1]


NEEDS_PAGE = """\
## Setup for this page

Needs not_an_installed_package_xyz (and a reader can see it).

<!-- needs: not_an_installed_package_xyz -->
```python
import not_an_installed_package_xyz as pkg
```

```python
# run "Setup for this page" first
pkg.run()
```

```python
>>> 2 + 2
4
```
"""


def test_marked_blocks_are_skipped_where_the_package_is_missing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "OPTIONAL_PACKAGES", ("not_an_installed_package_xyz",))
    page = tmp_path / "page.md"
    page.write_text(NEEDS_PAGE, encoding="utf-8")
    (setup, user, plain) = python_blocks(page)
    assert setup.needs == ("not_an_installed_package_xyz",) and user.needs == () == plain.needs
    assert setup.needs_line.startswith("Needs not_an_installed_package_xyz")
    # The block that leans on the setup block does not say it needs the package: a problem ...
    assert markdown_problems(page) == [
        f"{user.label()}: its setup block needs not_an_installed_package_xyz: mark this block as "
        "needing it too"]
    with pytest.warns(UserWarning), pytest.raises(AssertionError, match="no earlier block on the page"):
        run_markdown(page)  # ... and, run, it fails rather than being skipped
    page.write_text(NEEDS_PAGE.replace('```python\n# run', 'Needs not_an_installed_package_xyz too.\n'
                                       '<!-- needs: not_an_installed_package_xyz -->\n```python\n# run'),
                    encoding="utf-8")
    assert markdown_problems(page) == []
    with pytest.warns(UserWarning, match="not_an_installed_package_xyz, not installed"):
        result = run_markdown(page)
    assert result.ran == 1 and [s.split("page.md:")[1] for s in result.skipped] == [
        "7 needs not_an_installed_package_xyz, not installed",
        "13 needs not_an_installed_package_xyz, not installed"]
    with pytest.warns(UserWarning), pytest.raises(pytest.skip.Exception, match="1 blocks ran; skipped"):
        test_markdown_python_blocks_run(page)


@pytest.mark.parametrize("text,problem", [
    ("```python\nimport torch\n```\n", "imports torch, which the base install lacks: put "
                                       "'<!-- needs: torch -->' on the line before the block"),
    ("```python\n>>> from jax import numpy as jnp\n```\n", "imports jax"),
    ("<!-- no-run -->\n```python\nimport cupy\n```\n", "imports cupy"),     # pasted, it still needs it
    ("Some text.\n\n<!-- needs: torch -->\n```python\nimport torch\n```\n",
     "the line above its needs marker must say so to a reader, e.g. 'Needs torch.'"),
    ("Needs torch.\n\n<!-- needs: torch, jax -->\n```python\nimport torch\n```\n",
     "e.g. 'Needs jax and torch.'"),
    ("Needs tensorflow.\n\n<!-- needs: tensorflow -->\n```python\npass\n```\n", "names tensorflow, which is not one of"),
])
def test_what_a_block_needs_is_declared(tmp_path: Path, text: str, problem: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    (found,) = markdown_problems(page)
    assert problem in found, found


def test_declared_needs_pass_and_a_no_run_marker_may_sit_beside_them(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Needs CuPy and a GPU.\n\n<!-- no-run -->\n<!-- needs: cupy -->\n```python\n"
                    "import cupy\n```\n\n*Needs PyTorch and JAX.*\n<!-- needs: jax, torch -->\n```python\n"
                    "import torch, jax\n```\n", encoding="utf-8")
    assert markdown_problems(page) == []
    blocks = python_blocks(page)
    assert [(b.runnable, b.needs) for b in blocks] == [(False, ("cupy",)), (True, ("jax", "torch"))]


def test_shared_namespace_blocks_inherit_what_their_sources_need(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "OPTIONAL_PACKAGES", ("fake_framework_xyz",))
    page = tmp_path / "page.md"
    page.write_text("Needs fake_framework_xyz.\n<!-- needs: fake_framework_xyz -->\n```python\n"
                    "import fake_framework_xyz as ff\nx = ff.ones(3)\n```\n\n```python\ny = x + 1\n```\n\n"
                    "```python\nx = 5\n```\n\n```python\nassert x == 5\n```\n", encoding="utf-8")
    (problem,) = markdown_problems(page, shared=True)
    assert problem.endswith("page.md:9: reads x from a block that needs fake_framework_xyz: mark "
                            "this block as needing it too")


def test_names_are_read_statement_by_statement() -> None:
    block = CodeBlock(Path("page.md"), "python",
                      "import torch.nn as nn\nfrom a import b\nnn.f(b, c)\nfor i in r: s += i\n"
                      "def f(u):\n    return u + v\n", 1, True)
    bound, free = _names(block)
    assert bound == {"nn", "b", "i", "s", "f", "u"}
    assert free == {"c", "r", "s", "v"}


def test_base_install_hides_the_optional_packages_and_keeps_the_dependencies() -> None:
    hidden = base_install_hidden()
    assert not {"numpy", "opt_einsum", "platformdirs", "contractions"} & hidden
    installed = [name for name in OPTIONAL_PACKAGES if not _absent(name)]
    assert set(installed) <= hidden, sorted(set(installed) - hidden)


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
    start = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    for text in (readme, start):
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
