"""Stage 1 of the pipeline: parse a grouped subscripts string.

Pure and array-free: this module only reads text.  The result is a frozen
`ParsedSubscripts` that every later stage (solve, expand, plan) keys its caches on.

>>> p = parse('WCa, Caib ,WCi -> WCb')
>>> p.inputs, p.output, p.groups
(('WCa', 'Caib', 'WCi'), 'WCb', ('W', 'C'))
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import NoReturn

from .caching import byte_bounded_cache
from .errors import CARET_WINDOW, SubscriptsSyntaxError, caret_line, quoted

__all__ = ["ParsedSubscripts", "parse", "is_group", "PARSE_CACHE_SIZE", "PARSE_CACHE_BYTES"]

PARSE_CACHE_SIZE = 4096
PARSE_CACHE_BYTES = 64 * 2**20
"""Bytes the parse cache may hold (strings and their parses); see `contractions.caching`."""

_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def is_group(symbol: str) -> bool:
    """True for an uppercase group symbol (``'W'``), False for a single axis (``'a'``)."""
    return symbol in _UPPER


@dataclass(frozen=True)
class ParsedSubscripts:
    """A syntactically valid grouped subscripts string.

    ``inputs`` and ``output`` are the terms with whitespace removed; ``groups`` lists
    the uppercase groups in order of first appearance (inputs, then output).
    """

    subscripts: str
    inputs: tuple[str, ...]
    output: str
    groups: tuple[str, ...]

    @property
    def terms(self) -> tuple[str, ...]:
        """All terms, the output last."""
        return self.inputs + (self.output,)

    def lowercase_count(self, index: int) -> int:
        """Number of single-axis letters in input term ``index``, repeats counted."""
        return sum(1 for s in self.inputs[index] if not is_group(s))


def _fail(subscripts: str, positions, problem: str, fix: str) -> SubscriptsSyntaxError:
    return SubscriptsSyntaxError(
        f"invalid subscripts {quoted(subscripts)}: {problem}\n"
        f"{caret_line(subscripts, positions)}\n{fix}"
    )


def parse(subscripts: str) -> ParsedSubscripts:
    """Parse and validate ``subscripts``; raise `SubscriptsSyntaxError` with a caret on error.

    Linear in the length of the string: every scan is a regular expression or a string
    method, and the Python-level loops run over the output term or only on the error path.

    >>> parse('Wii->W').inputs
    ('Wii',)
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"subscripts must be a str, got {type(subscripts).__name__}")
    return _parse(subscripts)


# Anything but the dialect's characters (``\s`` is exactly ``str.isspace`` on str patterns).
_BAD_CHARACTER = re.compile(r"[^A-Za-z,\->\s]")
# A '-' not followed by '>' or a '>' not preceded by '-': a broken arrow.
_BROKEN_ARROW = re.compile(r"-(?!>)|(?<!-)>")
# An input term that is empty or only whitespace (searched in the inputs only).
_EMPTY_TERM = re.compile(r"(?:^|,)\s*(?=,|\Z)")
_DOTS = re.compile(r"\.+")
_GROUP = re.compile(r"[A-Z]")
_SYMBOL = re.compile(r"\S")


# Fast paths for ASCII text (bytes.translate and str.count run at memory speed); the regular
# expressions above decide the rest and find the position of an error.
_ASCII_SPACE = "".join(ch for ch in map(chr, range(128)) if ch.isspace())
_ASCII_ALLOWED = (string.ascii_letters + ",->" + _ASCII_SPACE).encode("ascii")
_LOWERCASE = string.ascii_lowercase.encode("ascii")


def _has_bad_character(s: str) -> bool:
    return not s.isascii() or bool(s.encode("ascii").translate(None, _ASCII_ALLOWED))


def _has_space(s: str) -> bool:
    return not s.isascii() or any(ch in s for ch in _ASCII_SPACE)


@byte_bounded_cache(maxsize=PARSE_CACHE_SIZE, maxbytes=PARSE_CACHE_BYTES)
def _parse(s: str) -> ParsedSubscripts:
    # Character classes first: the caret points at the first offending run.
    bad = _BAD_CHARACTER.search(s) if _has_bad_character(s) else None
    if bad is not None:
        pos, ch = bad.start(), bad.group()
        if ch == ".":
            end = _DOTS.match(s, pos).end()  # type: ignore[union-attr]
            what = "'...' (ellipsis) is" if end - pos == 3 else "'.' is"
            # Carets past the echoed window are not shown: do not hand them over.
            raise _fail(s, range(pos, min(end, pos + CARET_WINDOW)), f"{what} not part of this dialect",
                        "An uppercase group replaces '...': write e.g. 'Wij,jk->Wik' "
                        "where W stands for any number of leading axes.")
        raise _fail(s, [pos], f"character {ch!r} is not allowed",
                    "Use A-Z for groups of axes, a-z for single axes, ',' between inputs "
                    "and one '->' before the output.")
    arrows = s.count("->")
    broken = _BROKEN_ARROW.search(s) if s.count("-") != arrows or s.count(">") != arrows else None
    if broken is not None:
        if broken.group() == "-":
            raise _fail(s, [broken.start()], "'-' must be followed by '>'", "Write the arrow as '->'.")
        raise _fail(s, [broken.start()], "'>' must follow '-'", "Write the arrow as '->'.")
    arrow = s.find("->")
    if arrow < 0:
        raise _fail(s, [len(s)], "the output is missing (implicit output is not supported)",
                    "Write the output explicitly after '->', e.g. 'WCa,Caib->WCb'; "
                    "an empty output ('ij,ij->') sums everything.")
    second = s.find("->", arrow + 2)
    if second >= 0:
        raise _fail(s, [second, second + 1], "more than one '->'",
                    "A subscripts string has exactly one '->' before the output term.")
    comma = s.find(",", arrow + 2)
    if comma >= 0:
        raise _fail(s, [comma], "',' in the output term",
                    "The output is a single term; list all its symbols without commas.")

    left, output = s[:arrow], s[arrow + 2:]
    if _has_space(s):  # str.split() splits on exactly the str.isspace characters
        left, output = "".join(left.split()), "".join(output.split())
    inputs = left.split(",")
    empty = inputs.index("") if "" in inputs else len(inputs)
    # A group repeated inside a term: checked once per distinct term, on its groups only
    # (``left`` is ASCII letters and commas by now).
    term_groups = left.encode("ascii").translate(None, _LOWERCASE).split(b",")
    distinct = list(dict.fromkeys(term_groups))
    if list(map(len, map(set, distinct))) != list(map(len, distinct)):
        k = min(term_groups.index(t) for t in distinct if len(set(t)) != len(t))
        if k < empty:
            _repeated_group_error(s, arrow, k)
    if empty < len(inputs):
        # Point at the delimiters around the empty slot (',' before it, ',' or '->' after).
        slot = _EMPTY_TERM.search(s, 0, arrow)
        assert slot is not None
        where = [slot.start()] if empty > 0 else []
        where.append(slot.end())
        raise _fail(s, where, f"input term {empty} is empty",
                    "Every operand needs a non-empty term; a scalar operand is not "
                    "expressible (use a group that is empty at this call, e.g. 'S').")

    in_symbols = set(left)
    out_seen: dict[str, int] = {}
    for match in _SYMBOL.finditer(s, arrow + 2):  # a valid output has at most 52 symbols
        pos, ch = match.start(), match.group()
        if ch in out_seen:
            raise _fail(s, [out_seen[ch], pos], f"{ch!r} appears twice in the output",
                        "Each output symbol may appear once (a repeated output letter is not a "
                        "diagonal here).")
        if ch not in in_symbols:
            raise _fail(s, [pos], f"output symbol {ch!r} does not appear in any input",
                        "Every output symbol must come from some input term.")
        out_seen[ch] = pos

    # Every output symbol occurs in an input, so first appearance in the inputs is the order.
    first = {g: left.find(g) for g in _UPPER}
    groups = tuple(sorted((g for g, at in first.items() if at >= 0), key=first.__getitem__))
    return ParsedSubscripts(subscripts=s, inputs=tuple(inputs), output=output, groups=groups)


def _repeated_group_error(s: str, arrow: int, k: int) -> NoReturn:
    """Raise the error for the first group repeated in input term ``k`` (error path only)."""
    raw = s[:arrow].split(",")
    start = sum(map(len, raw[:k])) + k
    stop = start + len(raw[k])
    seen: dict[str, int] = {}
    for match in _GROUP.finditer(s, start, stop):  # at most 27 groups before a repeat
        pos, ch = match.start(), match.group()
        if ch in seen:
            raise _fail(s, [seen[ch], pos], f"group {ch!r} appears twice in input term {k}",
                        "A group may appear at most once per term; for a diagonal over a "
                        "group's axes spell its axes with lowercase letters.")
        seen[ch] = pos
    raise AssertionError("unreachable: the term has no repeated group")  # pragma: no cover
