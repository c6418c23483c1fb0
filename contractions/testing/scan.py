"""AST scanners: the vocabulary and the call sites of a source tree, without importing it.

Every suite of the evidence harness is fed by this scan, and so is the `contractions check` /
`contractions scan` command line, so a grouped string is covered the moment it is written;
there is no hand inventory to go stale. The scanned code is parsed with `ast`, never imported
or executed. This module imports only the standard library (the engine's linter uses it).

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
import errno
import fnmatch
import io
import os
import re
import stat
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CHECKED_FUNCTIONS",
    "FILE_CODES",
    "IGNORE_PRAGMA",
    "MAX_FILE_BYTES",
    "SKIPPED_DIRECTORIES",
    "CallSite",
    "Finding",
    "ScanError",
    "ScanReport",
    "Skipped",
    "VocabularyEntry",
    "distinct_subscripts",
    "is_grouped_subscripts",
    "iter_python_files",
    "normalize_subscripts",
    "scan_tree",
    "scan_call_sites",
    "scan_vocabulary",
]

#: A line carrying this comment contributes nothing to either scan: no vocabulary string and no
#: call site (for deliberate misuse, e.g. a demo of the underdetermined error, or strings that
#: only look like subscripts).
IGNORE_PRAGMA = "# contractions: ignore"

# The dialect's alphabet (docs/dialect.md): letters, ',', '-', '>' and whitespace. A grouped
# string additionally has '->' and at least one uppercase group.
_DIALECT_CHARS = re.compile(r"[A-Za-z,\->\s]*")
_UPPERCASE = re.compile(r"[A-Z]")
_LETTER = re.compile(r"[A-Za-z]")

#: Largest source file read, in bytes; a larger one is a finding (FILE_CODES["too large"]),
#: not read: parsing tens of megabytes of Python takes minutes and gigabytes.
MAX_FILE_BYTES = 2_000_000

#: The rule code of each file-level finding (docs/harness.md lists every code).
FILE_CODES: dict[str, str] = {
    "cannot read": "CT901",
    "cannot decode": "CT902",
    "too large": "CT903",
    "out of memory": "CT904",
    "not valid Python": "CT905",
    "cannot list directory": "CT906",
}

#: The library's functions whose call sites are scanned (the subscripts first, then one
#: operand or shape per input term): `contract` sites are `ScanReport.call_sites`, the others
#: `ScanReport.other_call_sites`.
CHECKED_FUNCTIONS = ("contract", "contract_expression", "contract_path", "explain")

#: Directories never scanned, by name, with the reason reported. Besides these, hidden
#: directories (`.git`, `.venv`, `.tox`, ...), any directory holding a `pyvenv.cfg` (a virtual
#: environment under any name), `*.egg-info` and symlinked directories (never followed) are
#: skipped.
SKIPPED_DIRECTORIES: dict[str, str] = {
    "__pycache__": "bytecode cache",
    "node_modules": "installed packages",
    "site-packages": "installed packages",
    "build": "build output",
    "dist": "build output",
}


class ScanError(ValueError):
    """A path to scan does not exist, or (from `scan_vocabulary`/`scan_call_sites`) a file
    could not be read or parsed as Python."""


@dataclass(frozen=True)
class Finding:
    """A problem at a place in the source, printed as `path:line:col: CODE message`
    (`col` counts from 1; `code` is the rule, e.g. CT107, empty for none)."""

    path: str
    line: int
    message: str
    col: int = 1
    code: str = ""

    def __str__(self) -> str:
        code = f"{self.code} " if self.code else ""
        return f"{self.path}:{self.line}:{self.col}: {code}{self.message}"

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready description."""
        return {"path": self.path, "line": self.line, "col": self.col, "code": self.code,
                "message": self.message}


@dataclass(frozen=True)
class Skipped:
    """A path the scan did not look into, and why (`is_dir`: a whole directory)."""

    path: str
    reason: str
    is_dir: bool = False

    def __str__(self) -> str:
        return f"{self.path}{'/' if self.is_dir else ''}: skipped ({self.reason})"


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

    `subscripts` is the literal first argument (a string literal, or a `+` of string
    literals), or None when it is not literal (`is_dynamic`). `len_keywords` maps each
    `len_*` keyword passed to its value when that is an int literal, else None.
    `literal_keywords` holds every keyword whose value is written as a literal (a constant, a
    signed number, or a tuple of those), with that value, whatever its type: `len_W=1.0`
    appears there as 1.0 (and as None in `len_keywords`). `splats_kwargs` is True when the
    call passes `**something` (its supplements are then not visible in the source).
    `n_operands` is the number of positional operands after the subscripts, or None when
    `*args` is splatted. `other_keywords` lists the remaining keyword names (e.g. `precision`).
    `misplaced_subscripts` is a string literal passed after a first argument that is not one
    (``contract(x, 'ij->i')``: the subscripts are not first), else None. `packed_operands`
    lists the positions of operands written as a list or tuple display of names, calls or
    subscripts (``contract(s, [a, b])``: perhaps the operands packed into one).
    """

    path: str
    line: int
    callee: str
    subscripts: str | None
    len_keywords: tuple[tuple[str, int | None], ...]
    splats_kwargs: bool
    n_operands: int | None
    other_keywords: tuple[str, ...] = ()
    literal_keywords: tuple[tuple[str, object], ...] = ()
    col: int = 1
    function: str = "contract"
    misplaced_subscripts: str | None = None
    packed_operands: tuple[int, ...] = ()

    @property
    def is_dynamic(self) -> bool:
        return self.subscripts is None

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def supplements(self) -> dict[str, int | None]:
        """The `len_*` keywords as a dict (keyword name -> int literal value or None)."""
        return dict(self.len_keywords)

    @property
    def literals(self) -> dict[str, object]:
        """`literal_keywords` as a dict (keyword name -> the literal value as written)."""
        return dict(self.literal_keywords)

    def keyword_source(self, name: str) -> str:
        """How keyword `name`'s value reads: its literal repr, or '?' when not a literal."""
        literals = self.literals
        return repr(literals[name]) if name in literals else "?"

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready description (`subscripts` is the string "dynamic" when not literal)."""
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "callee": self.callee,
            "function": self.function,
            "subscripts": "dynamic" if self.subscripts is None else self.subscripts,
            "len_keywords": dict(self.len_keywords),
            "literal_keywords": {k: _json_value(v) for k, v in self.literal_keywords},
            "splats_kwargs": self.splats_kwargs,
            "n_operands": self.n_operands,
            "other_keywords": list(self.other_keywords),
            "misplaced_subscripts": self.misplaced_subscripts,
            "packed_operands": list(self.packed_operands),
        }


def _json_value(value: object) -> object:
    return value if value is None or isinstance(value, (bool, int, float, str)) else repr(value)


@dataclass(frozen=True)
class ScanReport:
    """Everything one scan found: what the code says, and what could not be looked at.

    `unreadable` are findings (a file that cannot be read, decoded or parsed as Python);
    `skipped` are paths deliberately not looked into (excluded or cache directories, FIFOs,
    device files, symlink loops, expressions nested too deeply to parse); `other_call_sites`
    are the call sites of the `CHECKED_FUNCTIONS` other than `contract`.
    """

    files: tuple[str, ...]
    vocabulary: tuple[VocabularyEntry, ...]
    call_sites: tuple[CallSite, ...]
    unreadable: tuple[Finding, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    other_call_sites: tuple[CallSite, ...] = ()

    def raise_for_unreadable(self) -> None:
        """Raise ScanError naming the first unreadable file, if any."""
        if self.unreadable:
            first = self.unreadable[0]
            more = f" (and {len(self.unreadable) - 1} more)" if len(self.unreadable) > 1 else ""
            raise ScanError(f"{first}{more}")


def is_grouped_subscripts(text: str) -> bool:
    """True when `text` looks like a grouped subscripts string (docs/harness.md, Limits).

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


# --- walking the tree ----------------------------------------------------------------------


def _excluded_by(path: Path, root: Path | None, patterns: Sequence[str]) -> str | None:
    """The first pattern matching the path's name, its path relative to the scan root, or
    the path as given (glob syntax; `*` also matches `/`)."""
    if not patterns:
        return None
    candidates = {path.name, path.as_posix()}
    if root is not None:
        try:
            candidates.add(path.relative_to(root).as_posix())
        except ValueError:
            pass
    for pattern in patterns:
        pattern_ = pattern.rstrip("/") or pattern
        if any(fnmatch.fnmatchcase(c, pattern_) for c in candidates):
            return pattern
    return None


def _skipped_directory(path: Path) -> str | None:
    """Why a directory met during a walk is not entered (None: it is)."""
    name = path.name
    if path.is_symlink():
        return "symlink, not followed"
    if name.startswith("."):
        return "hidden"
    if name in SKIPPED_DIRECTORIES:
        return SKIPPED_DIRECTORIES[name]
    if name.endswith(".egg-info"):
        return "build output"
    try:
        if (path / "pyvenv.cfg").is_file():
            return "virtual environment"
    except OSError:  # an unreadable directory: the walk reports it when it tries to list it
        pass
    return None


def _not_a_regular_file(path: Path) -> str | None:
    """Why `path` cannot be read as a source file without blocking or looping (None: it can;
    a path that cannot even be stat-ed for another reason is left to the read to report)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "symlink loop" if exc.errno == errno.ELOOP else None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO, not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file, not a regular file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a regular file"
    return "not a regular file"


def _check_root(path: Path) -> None:
    """A path given to scan must exist and, when it is a directory or a regular file, be
    readable: anything else is a usage error (ScanError), not a finding."""
    if not os.path.lexists(path):
        raise ScanError(f"no such file or directory to scan: {str(path)!r}")
    try:
        if path.is_dir():
            with os.scandir(path):
                pass
        elif _not_a_regular_file(path) is None:
            with open(path, "rb"):
                pass
    except OSError as exc:
        raise ScanError(f"cannot read {str(path)!r} to scan it: {exc.strerror or exc}") from None


def _walk(
    paths: Iterable[str | os.PathLike[str]], exclude: Sequence[str], skipped: list[Skipped],
    unreadable: list[Finding] | None = None,
) -> Iterator[Path]:
    """The files to read, in order: files given directly as they are, `.py` files under
    directories (sorted); everything left out is recorded in `skipped`, directories that
    cannot be listed in `unreadable`."""
    for raw in paths:
        path = Path(raw)
        _check_root(path)
        pattern = _excluded_by(path, None, exclude)
        if pattern is not None:
            skipped.append(Skipped(str(path), f"--exclude {pattern!r}", path.is_dir()))
            continue
        if not path.is_dir():
            reason = _not_a_regular_file(path)
            if reason is None:
                yield path
            else:
                skipped.append(Skipped(str(path), reason))
            continue
        found: list[Path] = []

        def cannot_list(exc: OSError, root: Path = path) -> None:
            if unreadable is not None:
                where = str(exc.filename) if exc.filename is not None else str(root)
                unreadable.append(Finding(where, 1, f"cannot list directory: {exc.strerror or exc}",
                                          code=FILE_CODES["cannot list directory"]))

        for dirpath, dirnames, filenames in os.walk(path, onerror=cannot_list):
            here = Path(dirpath)
            kept = []
            for name in sorted(dirnames):
                sub = here / name
                reason = _skipped_directory(sub)
                if reason is None and (pattern := _excluded_by(sub, path, exclude)) is not None:
                    reason = f"--exclude {pattern!r}"
                if reason is None:
                    kept.append(name)
                else:
                    skipped.append(Skipped(str(sub), reason, is_dir=True))
            dirnames[:] = kept
            for name in sorted(filenames):
                if not name.endswith(".py"):
                    continue
                file = here / name
                reason = _not_a_regular_file(file)
                if reason is None and (pattern := _excluded_by(file, path, exclude)) is not None:
                    reason = f"--exclude {pattern!r}"
                if reason is None:
                    found.append(file)
                else:
                    skipped.append(Skipped(str(file), reason))
        yield from sorted(found)


def iter_python_files(
    paths: Iterable[str | os.PathLike[str]], exclude: Sequence[str] = ()
) -> Iterator[Path]:
    """Every file the scan reads under `paths`: files given directly as they are, and `.py`
    files under directories (sorted), leaving out what `scan_tree` reports as skipped."""
    yield from _walk(paths, exclude, [], [])


# --- reading one file ----------------------------------------------------------------------


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class _Unreadable(Exception):
    def __init__(self, line: int, message: str, kind: str, col: int = 1) -> None:
        # one line per finding: control characters a codec quotes are spelt as escapes
        message = _CONTROL.sub(lambda m: repr(m.group())[1:-1], message)
        super().__init__(message)
        self.line, self.message, self.code, self.col = line, message, FILE_CODES[kind], col


def _read_source(path: Path, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The file's text, decoded as Python decodes source (BOM, PEP 263 coding line); a file
    over ``max_bytes`` is not read."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                raise _Unreadable(1, f"too large: {size:,} bytes, over the {max_bytes:,}-byte "
                                     "limit per file (--max-file-bytes)", "too large")
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise _Unreadable(1, f"cannot read: {exc.strerror or exc}", "cannot read") from exc
    if len(raw) > max_bytes:  # grew while being read
        raise _Unreadable(1, f"too large: over the {max_bytes:,}-byte limit per file "
                             "(--max-file-bytes)", "too large")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:  # an unknown coding, or a BOM contradicting the coding line
        raise _Unreadable(exc.lineno or 1, f"cannot decode: {exc.msg}", "cannot decode") from exc
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise _Unreadable(line, f"cannot decode as {encoding}: {exc.reason}", "cannot decode") from exc
    except LookupError as exc:  # a codec that is not a text encoding (rot13, base64, zlib, ...)
        raise _Unreadable(1, f"cannot decode: the coding declaration names {encoding!r}, which is "
                             f"not a text encoding ({exc})", "cannot decode") from exc
    except (UnicodeError, ValueError) as exc:  # 'undefined', 'punycode', ...: the codec refuses
        raise _Unreadable(1, f"cannot decode as {encoding}: {type(exc).__name__}: {exc}",
                          "cannot decode") from exc


def _parse(path: Path, max_bytes: int = MAX_FILE_BYTES) -> tuple[ast.Module, list[str]]:
    source = _read_source(path, max_bytes)
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise _Unreadable(exc.lineno or 1, f"not valid Python: {exc.msg}", "not valid Python",
                          exc.offset or 1) from exc
    except ValueError as exc:  # e.g. a null byte in the source
        raise _Unreadable(1, f"not valid Python: {exc}", "not valid Python") from exc
    return tree, source.splitlines()


# --- string literals -----------------------------------------------------------------------


def _concatenation_leaves(node: ast.BinOp) -> list[ast.expr]:
    """The operands of a chain of `+` (iteratively: long chains must not recurse)."""
    leaves: list[ast.expr] = []
    stack: list[ast.expr] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.BinOp) and isinstance(current.op, ast.Add):
            stack.extend((current.right, current.left))
        else:
            leaves.append(current)
    return leaves


def _is_str(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


@dataclass
class _Strings:
    """A module's string literals as the code uses them.

    `folded` maps a `+` chain made only of string literals to its value (one string, e.g.
    `'WCo,' + 'WCa->Cao'`); `parts` are the ids of constants that are only part of a string
    (f-string pieces, members of a `+` chain), never strings of their own.
    """

    folded: dict[int, str] = field(default_factory=dict)
    parts: set[int] = field(default_factory=set)

    def value(self, node: ast.expr) -> str | None:
        """The literal string `node` evaluates to, or None when it is not literal."""
        if _is_str(node):
            assert isinstance(node, ast.Constant)
            return str(node.value)
        return self.folded.get(id(node))


def _strings(tree: ast.AST) -> _Strings:
    strings = _Strings()
    inner: set[int] = set()
    chains: list[ast.BinOp] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            strings.parts.update(id(value) for value in node.values)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            chains.append(node)
            inner.update(
                id(child)
                for child in (node.left, node.right)
                if isinstance(child, ast.BinOp) and isinstance(child.op, ast.Add)
            )
    for chain in chains:
        if id(chain) in inner:
            continue  # part of a longer chain, handled from its top
        leaves = _concatenation_leaves(chain)
        strings.parts.update(id(leaf) for leaf in leaves if _is_str(leaf))
        if all(_is_str(leaf) for leaf in leaves):
            strings.folded[id(chain)] = "".join(
                str(leaf.value) for leaf in leaves if isinstance(leaf, ast.Constant)
            )
    return strings


def _ignored(lines: list[str], node: ast.expr) -> bool:
    """Does any source line of `node` carry the ignore pragma?"""
    last = getattr(node, "end_lineno", None) or node.lineno
    return any(IGNORE_PRAGMA in line for line in lines[node.lineno - 1 : last])


def _vocabulary(
    tree: ast.Module, lines: list[str], strings: _Strings, path: Path
) -> list[VocabularyEntry]:
    """Grouped subscripts strings in one module: whole literals and folded `+` chains;
    docstrings and other prose never qualify (they contain characters outside the dialect)."""
    entries = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Constant, ast.BinOp)) or id(node) in strings.parts:
            continue
        text = strings.value(node)
        if text is not None and is_grouped_subscripts(text) and not _ignored(lines, node):
            entries.append(VocabularyEntry(text, str(path), node.lineno))
    return entries


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


def _exports_contract(module: str | None, level: int) -> bool:
    """Does `from <module> import *` bind `contract`? (the package and its `api` do)"""
    if level == 0:
        return module in ("contractions", "contractions.api")
    return module in (None, "api")


@dataclass
class _Aliases:
    """Names that refer to `contract` or to the contractions package (module-wide, unscoped)."""

    functions: dict[str, str]  # bare names bound to a checked function -> its name
    modules: set[str]  # dotted names bound to the contractions package or a submodule


def _collect_aliases(tree: ast.Module, path: Path) -> _Aliases:
    aliases = _Aliases(functions={}, modules=set())
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
                if alias.name == "*":
                    if _exports_contract(node.module, node.level):
                        aliases.functions.update((f, f) for f in CHECKED_FUNCTIONS)
                elif alias.name in CHECKED_FUNCTIONS:
                    aliases.functions[bound] = alias.name
                elif alias.name == "api" or (node.module is None and node.level > 0):
                    # `from contractions import api` / `from . import api`: api.contract(...)
                    aliases.modules.add(bound)
    return aliases


def _dotted_name(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _callee(call: ast.Call, aliases: _Aliases) -> tuple[str, str] | None:
    """``(callee as written, the checked function it is)``, or None."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in aliases.functions:
        return func.id, aliases.functions[func.id]
    if isinstance(func, ast.Attribute) and func.attr in CHECKED_FUNCTIONS:
        base = _dotted_name(func.value)
        # `ct.contract`, and submodule paths under an alias (`contractions.api.contract`).
        if base is not None and (base in aliases.modules or base.split(".")[0] in aliases.modules):
            return f"{base}.{func.attr}", func.attr
    return None


_NOT_LITERAL = object()


def _literal(node: ast.expr, strings: _Strings) -> object:
    """The value of a keyword written as a literal (hashable), else `_NOT_LITERAL`."""
    text = strings.value(node)
    if text is not None:
        return text
    try:
        value = ast.literal_eval(node)
        hash(value)
    except (ValueError, TypeError, SyntaxError, MemoryError):
        return _NOT_LITERAL
    return value


def _call_site(call: ast.Call, callee: tuple[str, str], path: Path, strings: _Strings) -> CallSite:
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
    subscripts = None if subscripts_node is None else strings.value(subscripts_node)
    n_operands = None if any(isinstance(a, ast.Starred) for a in positional) else len(positional)
    literals = tuple(
        (kw.arg, value)
        for kw in keywords
        if kw.arg is not None and (value := _literal(kw.value, strings)) is not _NOT_LITERAL
    )
    written = dict(literals)
    len_keywords = tuple(
        (kw.arg, value if type(value := written.get(kw.arg)) is int else None)
        for kw in keywords
        if kw.arg is not None and kw.arg.startswith("len_")
    )
    other = tuple(
        kw.arg for kw in keywords if kw.arg is not None and not kw.arg.startswith("len_")
    )
    return CallSite(
        path=str(path),
        line=call.lineno,
        col=call.col_offset + 1,
        function=callee[1],
        callee=callee[0],
        subscripts=subscripts,
        len_keywords=len_keywords,
        splats_kwargs=any(kw.arg is None for kw in keywords),
        n_operands=n_operands,
        other_keywords=other,
        literal_keywords=literals,
        misplaced_subscripts=None if subscripts is not None or subscripts_node is None else next(
            (text for node in positional if (text := strings.value(node)) is not None), None),
        packed_operands=tuple(k for k, node in enumerate(positional) if _is_packed(node)),
    )


def _is_packed(node: ast.expr) -> bool:
    """Is ``node`` a list or tuple display of names, calls or subscripts (arrays, perhaps)?"""
    return isinstance(node, (ast.List, ast.Tuple)) and bool(node.elts) and all(
        isinstance(item, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) for item in node.elts)


def _call_sites(
    tree: ast.Module, lines: list[str], strings: _Strings, path: Path
) -> list[CallSite]:
    aliases = _collect_aliases(tree, path)
    if not (aliases.functions or aliases.modules):
        return []
    sites = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = _callee(node, aliases)
            if callee is not None and not _ignored(lines, node):
                sites.append(_call_site(node, callee, path, strings))
    return sites


# --- the scan ----------------------------------------------------------------------------------


def scan_tree(paths: Iterable[str | os.PathLike[str]], exclude: Sequence[str] = (),
              max_file_bytes: int = MAX_FILE_BYTES) -> ScanReport:
    """Scan `paths` once: vocabulary, call sites, unreadable files and skipped paths.

    A path that does not exist or cannot be read raises ScanError (a usage error); a file that
    cannot be read, decoded or parsed (or is over `max_file_bytes`, or exhausts memory) and a
    directory that cannot be listed are findings in `unreadable`, and the scan goes on.
    `exclude` holds glob patterns matched against each file's and directory's name, its path
    relative to the scan root, and its path as given.
    """
    files: list[str] = []
    vocabulary: list[VocabularyEntry] = []
    sites: list[CallSite] = []
    unreadable: list[Finding] = []
    skipped: list[Skipped] = []
    for path in _walk(paths, exclude, skipped, unreadable):
        files.append(str(path))
        try:
            tree, lines = _parse(path, max_file_bytes)
            strings = _strings(tree)
            found_vocabulary = _vocabulary(tree, lines, strings, path)
            found_sites = _call_sites(tree, lines, strings, path)
        except _Unreadable as exc:
            unreadable.append(Finding(str(path), exc.line, exc.message, exc.col, exc.code))
            continue
        except MemoryError:
            unreadable.append(Finding(str(path), 1, "out of memory while parsing it",
                                      code=FILE_CODES["out of memory"]))
            continue
        except RecursionError:
            skipped.append(Skipped(str(path), "expressions nested too deeply to parse"))
            continue
        vocabulary.extend(found_vocabulary)
        sites.extend(found_sites)
    vocabulary.sort(key=lambda e: (e.path, e.line, e.subscripts))
    sites.sort(key=lambda s: (s.path, s.line, s.col))
    return ScanReport(
        tuple(files), tuple(vocabulary), tuple(s for s in sites if s.function == "contract"),
        tuple(unreadable), tuple(skipped), tuple(s for s in sites if s.function != "contract"),
    )


def scan_vocabulary(paths: Iterable[str | os.PathLike[str]]) -> tuple[VocabularyEntry, ...]:
    """Every grouped subscripts string literal under `paths`, with file and line, in file order.

    Docstrings and other prose never qualify (they contain characters outside the dialect);
    f-string fragments and pieces of a `+` concatenation are not strings of their own (a `+`
    of literals only is one string); a line carrying `# contractions: ignore` is skipped.
    Raises ScanError when a file cannot be read or parsed.
    """
    report = scan_tree(paths)
    report.raise_for_unreadable()
    return report.vocabulary


def scan_call_sites(paths: Iterable[str | os.PathLike[str]]) -> tuple[CallSite, ...]:
    """Every `contract(...)` call under `paths`, in file order.

    Recognised callees: a bare name imported from contractions (`from contractions import
    contract [as c]`, `from contractions import *`, relative imports inside the package), and
    `<m>.contract` where `<m>` is bound by `import contractions [as m]` (or a submodule such
    as `contractions.api`). Import scoping is not modelled: an alias bound anywhere in a module
    counts everywhere in it. A call with `# contractions: ignore` on any of its lines is left
    out (deliberate misuse). Raises ScanError when a file cannot be read or parsed.
    """
    report = scan_tree(paths)
    report.raise_for_unreadable()
    return report.call_sites
