"""The frozen identifiability table: a human-edited file, subscripts string -> required supplement.

Format (one entry per line; blank lines and `#` comments ignored)::

    # subscripts (no spaces)      required supplement
    WCa,Caib,WCi->WCb             -
    WCo,WCa->Cao                  len_W
    WCa,KCaib->WKCib              len_K

The first field is the subscripts string with whitespace removed (whitespace is insignificant
in the dialect, so ``'WCa, Caib -> WCb'`` in source is looked up as ``WCa,Caib->WCb``). The
rest of the line is the supplement the string requires: ``-`` when it needs none, otherwise
the ``len_<G>`` keyword(s), separated by spaces or commas. Each entry is decided by reading
the string (docs/solver.md: a ``len_<G>`` is needed iff some co-travelling run's total is not
fixed by the input terms' equations); no tool writes entries.

>>> table = parse_table("WCo,WCa->Cao  len_W   # boundary of W|C observable\\nWKCi,Cio->WKCo -\\n")
>>> table.supplement("WCo, WCa -> Cao"), table.supplement("WKCi,Cio->WKCo")
(('W',), ())
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .oracle import split_terms
from .scan import is_grouped_subscripts, normalize_subscripts

__all__ = ["IdentifiabilityTable", "TableEntry", "TableError", "load_table", "parse_table"]

_SUPPLEMENT_TOKEN = re.compile(r"len_([A-Z])")
_NONE_TOKENS = frozenset({"-", "''", '""'})


class TableError(ValueError):
    """The table file is malformed (the message names the file and line)."""


@dataclass(frozen=True)
class TableEntry:
    """One decided entry: `subscripts` needs `len_<G>` for each G in `groups` (empty: none)."""

    subscripts: str
    groups: tuple[str, ...]
    source: str
    line: int

    @property
    def keywords(self) -> tuple[str, ...]:
        """The supplement as keyword names, e.g. ('len_W',)."""
        return tuple(f"len_{g}" for g in self.groups)

    def describe(self) -> str:
        return " ".join(self.keywords) or "-"


@dataclass(frozen=True)
class IdentifiabilityTable:
    """The parsed table: entries keyed by whitespace-free subscripts."""

    entries: tuple[TableEntry, ...]
    source: str
    _by_key: dict[str, TableEntry] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A lookup index over `entries` (frozen dataclass, so set once here).
        object.__setattr__(self, "_by_key", {e.subscripts: e for e in self.entries})

    def __contains__(self, subscripts: object) -> bool:
        return isinstance(subscripts, str) and normalize_subscripts(subscripts) in self._by_key

    def __len__(self) -> int:
        return len(self.entries)

    def entry(self, subscripts: str) -> TableEntry | None:
        return self._by_key.get(normalize_subscripts(subscripts))

    def supplement(self, subscripts: str) -> tuple[str, ...] | None:
        """The groups whose `len_<G>` the string requires, or None when it has no entry."""
        found = self.entry(subscripts)
        return None if found is None else found.groups


def parse_table(text: str, source: str = "<table>") -> IdentifiabilityTable:
    """Parse the table format (see the module docstring); malformed lines raise TableError."""
    entries: list[TableEntry] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split(None, 1)
        key = fields[0]
        where = f"{source}:{lineno}"
        if not is_grouped_subscripts(key):
            raise TableError(
                f"{where}: {key!r} is not a grouped subscripts string (write it without spaces, "
                "then the supplement: '-' or len_<G>)"
            )
        if len(fields) == 1:
            raise TableError(
                f"{where}: {key!r} has no supplement column; write '-' if it needs none, "
                "else the len_<G> it needs"
            )
        tokens = [t for t in re.split(r"[\s,]+", fields[1]) if t]
        if len(tokens) == 1 and tokens[0] in _NONE_TOKENS:
            groups: tuple[str, ...] = ()
        else:
            bad = [t for t in tokens if not _SUPPLEMENT_TOKEN.fullmatch(t)]
            if bad:
                raise TableError(
                    f"{where}: supplement {fields[1]!r} for {key!r}: expected '-' or len_<G> "
                    f"keywords, got {bad}"
                )
            groups = tuple(t[len("len_"):] for t in tokens)
            if len(set(groups)) != len(groups):
                raise TableError(f"{where}: {key!r} lists a supplement twice: {fields[1]!r}")
            try:
                present = set(split_terms(key).groups)
            except ValueError as exc:
                raise TableError(f"{where}: {exc}") from exc
            absent = [g for g in groups if g not in present]
            if absent:
                raise TableError(
                    f"{where}: {key!r} has no group(s) {absent} for its supplement {fields[1]!r}"
                )
        if key in seen:
            raise TableError(f"{where}: duplicate entry for {key!r} (first at line {seen[key]})")
        seen[key] = lineno
        entries.append(TableEntry(key, groups, source, lineno))
    return IdentifiabilityTable(tuple(entries), source)


def load_table(path: str | os.PathLike[str]) -> IdentifiabilityTable:
    """Read and parse the table file at `path`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TableError(
            f"cannot read the identifiability table {str(path)!r}: {exc}. Create it (see "
            "contractions.testing.table for the format) and decide each entry by hand."
        ) from exc
    return parse_table(text, source=str(path))
