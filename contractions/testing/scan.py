"""AST scanners: the vocabulary and the call sites of a source tree, without importing it.

Every suite of the evidence harness is fed by these two scans, so a grouped string is covered
the moment it is written; there is no hand inventory to go stale. The scanned code is parsed
with `ast`, never imported or executed.

>>> import pathlib, tempfile
>>> src = "from contractions import contract as c\\ny = c('WCa,Caib,WCi->WCb', x, g, z)\\n"
>>> root = pathlib.Path(tempfile.mkdtemp()); _ = (root / "m.py").write_text(src)
>>> [v.subscripts for v in scan_vocabulary([root])]
['WCa,Caib,WCi->WCb']
>>> site, = scan_call_sites([root]); (site.line, site.subscripts, site.n_operands)
(2, 'WCa,Caib,WCi->WCb', 3)
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "IGNORE_PRAGMA",
    "CallSite",
    "ScanError",
    "VocabularyEntry",
    "distinct_subscripts",
    "is_grouped_subscripts",
    "iter_python_files",
    "normalize_subscripts",
    "scan_call_sites",
    "scan_vocabulary",
]

#: A line carrying this comment contributes nothing to either scan: no vocabulary string and no
#: call site (for deliberate misuse, e.g. a demo of the underdetermined error, or strings that
#: only look like subscripts).
IGNORE_PRAGMA = "# contractions: ignore"

# The dialect's alphabet (SPEC §1): letters, ',', '-', '>' and whitespace. A grouped string
# additionally has '->' and at least one uppercase group.
_DIALECT_CHARS = re.compile(r"[A-Za-z,\->\s]*")
_UPPERCASE = re.compile(r"[A-Z]")
_LETTER = re.compile(r"[A-Za-z]")

# Directories never worth scanning (caches, virtual environments, VCS metadata).
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "build", "dist", "site-packages"})


class ScanError(ValueError):
    """A scanned file could not be read or parsed as Python."""


@dataclass(frozen=True)
class VocabularyEntry:
    """One occurrence of a grouped subscripts literal: `subscripts` at `path`:`line`."""

    subscripts: str
    path: str
    line: int

    @property
    def key(self) -> str:
        """The whitespace-free form the identifiability table is keyed on."""
        return normalize_subscripts(self.subscripts)


@dataclass(frozen=True)
class CallSite:
    """One `contract(...)` call found by the scan.

    `subscripts` is the literal first argument, or None when it is not a string literal
    (`is_dynamic`). `len_keywords` maps each `len_*` keyword passed to its literal int value,
    or None when the value is not an int literal. `splats_kwargs` is True when the call passes
    `**something` (its supplements are then not visible in the source). `n_operands` is the
    number of positional operands after the subscripts, or None when `*args` is splatted.
    `other_keywords` lists any remaining keyword names (e.g. `precision`).
    """

    path: str
    line: int
    callee: str
    subscripts: str | None
    len_keywords: tuple[tuple[str, int | None], ...]
    splats_kwargs: bool
    n_operands: int | None
    other_keywords: tuple[str, ...] = ()

    @property
    def is_dynamic(self) -> bool:
        return self.subscripts is None

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def supplements(self) -> dict[str, int | None]:
        """The `len_*` keywords as a dict (keyword name -> literal value or None)."""
        return dict(self.len_keywords)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready description (`subscripts` is the string "dynamic" when not literal)."""
        return {
            "path": self.path,
            "line": self.line,
            "callee": self.callee,
            "subscripts": "dynamic" if self.subscripts is None else self.subscripts,
            "len_keywords": dict(self.len_keywords),
            "splats_kwargs": self.splats_kwargs,
            "n_operands": self.n_operands,
            "other_keywords": list(self.other_keywords),
        }


def is_grouped_subscripts(text: str) -> bool:
    """True when `text` looks like a grouped subscripts string (SPEC §6.1).

    >>> is_grouped_subscripts('WCa,Caib,WCi->WCb'), is_grouped_subscripts('ij,jk->ik')
    (True, False)
    >>> is_grouped_subscripts('see W->C above.'), is_grouped_subscripts('->C')
    (False, False)
    """
    return (
        "->" in text
        and _DIALECT_CHARS.fullmatch(text) is not None
        and _UPPERCASE.search(text) is not None
        # input terms are non-empty: this also skips fragments such as "->C" that code
        # appends to a string it builds dynamically
        and _LETTER.search(text.split("->", 1)[0]) is not None
    )


def normalize_subscripts(subscripts: str) -> str:
    """Remove all whitespace (it is insignificant in the dialect).

    >>> normalize_subscripts(' WCa , Caib -> WCb ')
    'WCa,Caib->WCb'
    """
    return "".join(subscripts.split())


def iter_python_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    """Every `.py` file under `paths` (files given directly are taken as they are), sorted.

    Hidden directories (`.git`, `.venv`, ...) and caches are skipped.
    """
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            yield path
        elif path.is_dir():
            found: list[Path] = []
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(
                    d for d in dirnames if not d.startswith(".") and d not in _SKIPPED_DIRS
                )
                found.extend(Path(dirpath) / f for f in filenames if f.endswith(".py"))
            yield from sorted(found)
        else:
            raise ScanError(f"no such file or directory to scan: {str(path)!r}")


def _parse(path: Path) -> tuple[ast.Module, list[str]]:
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScanError(f"{path}: cannot read: {exc}") from exc
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ScanError(f"{path}:{exc.lineno}: not valid Python: {exc.msg}") from exc
    return tree, source.splitlines()


def _fstring_parts(tree: ast.AST) -> set[int]:
    """ids of the constant fragments of f-strings (not whole literals, so not vocabulary)."""
    return {
        id(value)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for value in node.values
    }


def scan_vocabulary(paths: Iterable[str | os.PathLike[str]]) -> tuple[VocabularyEntry, ...]:
    """Every grouped subscripts string literal under `paths`, with file and line, in file order.

    Docstrings and other prose never qualify (they contain characters outside the dialect);
    f-string fragments are skipped; a line carrying `# contractions: ignore` is skipped.
    """
    entries: list[VocabularyEntry] = []
    for path in iter_python_files(paths):
        tree, lines = _parse(path)
        fragments = _fstring_parts(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in fragments
                and is_grouped_subscripts(node.value)
                and not _ignored(lines, node)
            ):
                entries.append(VocabularyEntry(node.value, str(path), node.lineno))
    entries.sort(key=lambda e: (e.path, e.line, e.subscripts))
    return tuple(entries)


def _ignored(lines: list[str], node: ast.expr) -> bool:
    """Does any source line of `node` carry the ignore pragma?"""
    last = getattr(node, "end_lineno", None) or node.lineno
    return any(IGNORE_PRAGMA in line for line in lines[node.lineno - 1 : last])


def distinct_subscripts(entries: Iterable[VocabularyEntry]) -> dict[str, list[VocabularyEntry]]:
    """Group vocabulary occurrences by their whitespace-free string (first-seen order)."""
    grouped: dict[str, list[VocabularyEntry]] = {}
    for entry in entries:
        grouped.setdefault(entry.key, []).append(entry)
    return grouped


# --- call sites --------------------------------------------------------------------------


def _is_contractions_module(module: str | None, level: int, path: Path) -> bool:
    """Does `from <module> import ...` (with `level` leading dots) import from contractions?"""
    if level == 0:
        return module is not None and (module == "contractions" or module.startswith("contractions."))
    # A relative import counts when the importing file lives inside a `contractions` package.
    return "contractions" in path.resolve().parts


@dataclass
class _Aliases:
    """Names that refer to `contract` or to the contractions package (module-wide, unscoped)."""

    functions: set[str]  # bare names bound to contractions.contract
    modules: set[str]  # dotted names bound to the contractions package or a submodule


def _collect_aliases(tree: ast.Module, path: Path) -> _Aliases:
    aliases = _Aliases(functions=set(), modules=set())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "contractions" or alias.name.startswith("contractions."):
                    if alias.asname:
                        aliases.modules.add(alias.asname)
                    else:
                        # `import contractions.api` binds `contractions`, reachable as both.
                        aliases.modules.add("contractions")
                        aliases.modules.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and _is_contractions_module(
            node.module, node.level, path
        ):
            for alias in node.names:
                bound = alias.asname or alias.name
                if alias.name == "contract":
                    aliases.functions.add(bound)
                elif alias.name == "api" or (node.module is None and node.level > 0):
                    # `from contractions import api` / `from . import api`: api.contract(...)
                    aliases.modules.add(bound)
    return aliases


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _callee(call: ast.Call, aliases: _Aliases) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id in aliases.functions:
        return func.id
    if isinstance(func, ast.Attribute) and func.attr == "contract":
        base = _dotted_name(func.value)
        # `ct.contract`, and submodule paths under an alias (`contractions.api.contract`).
        if base is not None and (base in aliases.modules or base.split(".")[0] in aliases.modules):
            return f"{base}.contract"
    return None


def _literal_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, (ast.USub, ast.UAdd))
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    return None


def _call_site(call: ast.Call, callee: str, path: Path) -> CallSite:
    positional = list(call.args)
    subscripts_node: ast.expr | None = None
    keywords = list(call.keywords)
    if positional and not isinstance(positional[0], ast.Starred):
        subscripts_node = positional.pop(0)
    else:
        for kw in keywords:
            if kw.arg == "subscripts":
                subscripts_node = kw.value
        keywords = [kw for kw in keywords if kw.arg != "subscripts"]
    subscripts = (
        subscripts_node.value
        if isinstance(subscripts_node, ast.Constant) and isinstance(subscripts_node.value, str)
        else None
    )
    n_operands = None if any(isinstance(a, ast.Starred) for a in positional) else len(positional)
    len_keywords = tuple(
        (kw.arg, _literal_int(kw.value))
        for kw in keywords
        if kw.arg is not None and kw.arg.startswith("len_")
    )
    other = tuple(
        kw.arg for kw in keywords if kw.arg is not None and not kw.arg.startswith("len_")
    )
    return CallSite(
        path=str(path),
        line=call.lineno,
        callee=callee,
        subscripts=subscripts,
        len_keywords=len_keywords,
        splats_kwargs=any(kw.arg is None for kw in keywords),
        n_operands=n_operands,
        other_keywords=other,
    )


def scan_call_sites(paths: Iterable[str | os.PathLike[str]]) -> tuple[CallSite, ...]:
    """Every `contract(...)` call under `paths`, in file order.

    Recognised callees: a bare name imported from contractions (`from contractions import
    contract [as c]`, relative imports inside the package), and `<m>.contract` where `<m>` is
    bound by `import contractions [as m]` (or a submodule such as `contractions.api`).
    Import scoping is not modelled: an alias bound anywhere in a module counts everywhere in it.
    A call with `# contractions: ignore` on any of its lines is left out (deliberate misuse).
    """
    sites: list[CallSite] = []
    for path in iter_python_files(paths):
        tree, lines = _parse(path)
        aliases = _collect_aliases(tree, path)
        if not (aliases.functions or aliases.modules):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                callee = _callee(node, aliases)
                if callee is not None and not _ignored(lines, node):
                    sites.append(_call_site(node, callee, path))
    sites.sort(key=lambda s: (s.path, s.line))
    return tuple(sites)
