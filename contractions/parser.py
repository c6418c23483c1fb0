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
from typing import Any, NoReturn

from .caching import byte_bounded_cache, weight
from .errors import CARET_WINDOW, SubscriptsSyntaxError, caret_line, quoted

__all__ = ["ParsedSubscripts", "parse", "is_group", "is_axis_letter", "ELLIPSIS", "PARSE_CACHE_SIZE",
           "parsed_weight", "weight_with_parses",
           "PARSE_CACHE_BYTES"]

PARSE_CACHE_SIZE = 4096
PARSE_CACHE_BYTES = 64 * 2**20
"""Bytes the parse cache may hold (strings and their parses); see `contractions.caching`."""

_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


ELLIPSIS = "."
"""How a term of `ParsedSubscripts` spells the ellipsis ``...`` (one character per term)."""


def is_group(symbol: str) -> bool:
    """True for an uppercase group symbol (``'W'``), False for a single axis (``'a'``)."""
    return symbol in _UPPER


def is_axis_letter(symbol: str) -> bool:
    """True for a single-axis label: any letter (``str.isalpha``) but the ASCII uppercase
    groups, e.g. ``'a'``, ``'é'``, ``'Ω'``.

    >>> is_axis_letter('a'), is_axis_letter('Ω'), is_axis_letter('W'), is_axis_letter('.')
    (True, True, False, False)
    """
    return symbol.isalpha() and symbol not in _UPPER


@dataclass(frozen=True)
class ParsedSubscripts:
    """A syntactically valid grouped subscripts string.

    ``inputs`` and ``output`` are the terms with whitespace removed and each ``...`` written
    as the one character `ELLIPSIS` (``'.'``); ``groups`` lists the uppercase groups in order
    of first appearance (inputs, then output).  ``implicit`` is True when the string had no
    ``->`` and ``output`` was derived by numpy's rule.
    """

    subscripts: str
    inputs: tuple[str, ...]
    output: str
    groups: tuple[str, ...]
    implicit: bool = False

    @property
    def has_ellipsis(self) -> bool:
        """True when some input term has ``...``."""
        return any(ELLIPSIS in term for term in self.inputs)

    @property
    def terms(self) -> tuple[str, ...]:
        """All terms, the output last."""
        return self.inputs + (self.output,)

    def lowercase_count(self, index: int) -> int:
        """Number of single-axis letters in input term ``index``, repeats counted."""
        return sum(1 for s in self.inputs[index] if not is_group(s) and s != ELLIPSIS)


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


# Anything but the dialect's ASCII characters (``\s`` is exactly ``str.isspace`` on str
# patterns); a non-ASCII character is allowed when it is a letter (`is_axis_letter`).
_BAD_CHARACTER = re.compile(r"[^A-Za-z,\->.\s]")
# A '-' not followed by '>' or a '>' not preceded by '-': a broken arrow.
_BROKEN_ARROW = re.compile(r"-(?!>)|(?<!-)>")
_DOTS = re.compile(r"\.+")
_GROUP = re.compile(r"[A-Z]")
_NOT_GROUP = re.compile(r"[^A-Z,]")
_SYMBOL = re.compile(r"\S")


# Fast paths for ASCII text (bytes.translate and str.count run at memory speed); the regular
# expressions above decide the rest and find the position of an error.
_ASCII_SPACE = "".join(ch for ch in map(chr, range(128)) if ch.isspace())
_ASCII_ALLOWED = (string.ascii_letters + ",->." + _ASCII_SPACE).encode("ascii")
_NOT_GROUP_BYTES = (string.ascii_lowercase + ".").encode("ascii")


def _bad_character(s: str) -> re.Match[str] | int | None:
    """The first character outside the dialect: a regex match (ASCII), a position, or None."""
    if s.isascii():
        return _BAD_CHARACTER.search(s) if s.encode("ascii").translate(None, _ASCII_ALLOWED) else None
    for pos, ch in enumerate(s):
        if not (ch.isalpha() or ch.isspace() or ch in ",->."):
            return pos
    return None


def _has_space(s: str) -> bool:
    return not s.isascii() or any(ch in s for ch in _ASCII_SPACE)


def _term_spans(s: str, stop: int) -> list[tuple[int, int]]:
    """``(start, stop)`` in ``s`` of each input term (the text before ``stop``, the arrow)."""
    spans, start = [], 0
    for piece in s[:stop].split(","):
        spans.append((start, start + len(piece)))
        start += len(piece) + 1
    return spans


def implicit_output(inputs: tuple[str, ...]) -> str:
    """numpy's output for a string without ``->``: the ellipsis first (if any input has one),
    then every symbol that occurs exactly once in the inputs, by code point (so groups, the
    ASCII uppercase letters, come before the lowercase letters).

    >>> implicit_output(('ij', 'jk')), implicit_output(('.ij', 'Wj')), implicit_output(('ii',))
    ('ik', '.Wi', '')
    """
    counts: dict[str, int] = {}
    for term in inputs:
        for ch in term:
            counts[ch] = counts.get(ch, 0) + 1
    head = ELLIPSIS if ELLIPSIS in counts else ""
    return head + "".join(sorted(ch for ch, n in counts.items() if n == 1 and ch != ELLIPSIS))


#: A parse holds its string many times over (terms, output, groups, letters): `weight` counts
#: about 9 bytes of it per byte of a short string and 16 of a long one.
PARSED_WEIGHT_PER_STRING = 16


def parsed_weight(parsed: ParsedSubscripts) -> int:
    """What a cache entry holding ``parsed`` is counted as (its string's weight times
    `PARSED_WEIGHT_PER_STRING`): a new string's first call weighs its parse in several caches,
    and walking the parse each time cost a quarter of the planning of a small call."""
    return PARSED_WEIGHT_PER_STRING * weight(parsed.subscripts)


def weight_with_parses(args: tuple[Any, ...]) -> int:
    """A later stage's cache arguments (`contractions.caching`), a parse among them counted by
    `parsed_weight`; such a cache counts an entry as twice this, its result (lengths, runs, an
    expansion) being no heavier than the parse it came from."""
    return sum(parsed_weight(a) if type(a) is ParsedSubscripts else weight(a) for a in args)


def _parse_weight(args: tuple[Any, ...]) -> int:
    # (the cache counts an entry as twice this: the string, and its parse)
    return PARSED_WEIGHT_PER_STRING // 2 * weight(args)


@byte_bounded_cache(maxsize=PARSE_CACHE_SIZE, maxbytes=PARSE_CACHE_BYTES, weigh_results=False,
                    weigh_args=_parse_weight)
def _parse(s: str) -> ParsedSubscripts:
    # Character classes first: the caret points at the first offending run.
    bad = _bad_character(s)
    if bad is not None:
        pos = bad if isinstance(bad, int) else bad.start()
        raise _fail(s, [pos], f"character {s[pos]!r} is not allowed",
                    "Use A-Z for groups of axes, other letters for single axes, '...' for "
                    "numpy's broadcast axes, ',' between inputs and '->' before the output.")
    if "." in s:
        for run in _DOTS.finditer(s):
            if run.end() - run.start() != 3:
                n = run.end() - run.start()
                what = "'.'" if n == 1 else f"a run of {n} dots"
                # Carets past the echoed window are not shown: do not hand them over.
                raise _fail(s, range(run.start(), min(run.end(), run.start() + CARET_WINDOW)),
                            f"{what} is not an ellipsis",
                            "An ellipsis is exactly three dots, '...', at most once per term.")
    arrows = s.count("->")
    broken = _BROKEN_ARROW.search(s) if s.count("-") != arrows or s.count(">") != arrows else None
    if broken is not None:
        if broken.group() == "-":
            raise _fail(s, [broken.start()], "'-' must be followed by '>'", "Write the arrow as '->'.")
        raise _fail(s, [broken.start()], "'>' must follow '-'", "Write the arrow as '->'.")
    arrow = s.find("->")
    implicit = arrow < 0
    if implicit:
        arrow = len(s)
    else:
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
    if "." in s:
        left, output = left.replace("...", ELLIPSIS), output.replace("...", ELLIPSIS)
    inputs = left.split(",")
    # A group (or the ellipsis) repeated inside a term: checked once per distinct term, on
    # its groups only.
    if left.isascii():
        term_groups = left.encode("ascii").translate(None, _NOT_GROUP_BYTES).decode().split(",")
    else:
        term_groups = _NOT_GROUP.sub("", left).split(",")
    distinct = list(dict.fromkeys(term_groups))
    if list(map(len, map(set, distinct))) != list(map(len, distinct)):
        k = min(term_groups.index(t) for t in distinct if len(set(t)) != len(t))
        _repeated_group_error(s, arrow, k)
    if ELLIPSIS in left:
        for k, term in enumerate(inputs):
            if term.count(ELLIPSIS) > 1:
                a, b = _term_spans(s, arrow)[k]
                dots = [m.start() for m in _DOTS.finditer(s, a, b)]
                raise _fail(s, [p + i for p in dots[:2] for i in range(3)],
                            f"'...' appears twice in input term {k}",
                            "An ellipsis may appear at most once per term.")
    if implicit:
        output = implicit_output(tuple(inputs))
    else:
        _check_output(s, arrow, left)
        if ELLIPSIS in output and ELLIPSIS not in left:
            output = output.replace(ELLIPSIS, "")
    # Every output symbol occurs in an input, so first appearance in the inputs is the order.
    if len(left) < 64:   # (a short string: one pass; a long one: 26 scans at C speed)
        groups = tuple(dict.fromkeys(ch for ch in left if ch in _UPPER))
    else:
        first = {g: left.find(g) for g in _UPPER}
        groups = tuple(sorted((g for g, at in first.items() if at >= 0), key=first.__getitem__))
    return ParsedSubscripts(subscripts=s, inputs=tuple(inputs), output=output, groups=groups,
                            implicit=implicit)


def _check_output(s: str, arrow: int, left: str) -> None:
    """Every output symbol once, and from some input (the ellipsis included)."""
    in_symbols = set(left)
    out_seen: dict[str, int] = {}
    matches = _SYMBOL.finditer(s, arrow + 2)
    for match in matches:  # a valid output has each symbol once
        pos, ch = match.start(), match.group()
        if ch == ".":  # the three dots of an ellipsis (runs of dots are checked already)
            next(matches), next(matches)
            ch = ELLIPSIS
            if ch in out_seen:
                raise _fail(s, [*range(out_seen[ch], out_seen[ch] + 3), *range(pos, pos + 3)],
                            "'...' appears twice in the output",
                            "An ellipsis may appear at most once per term.")
            out_seen[ch] = pos  # with no input '...' it stands for no axes, as in numpy
            continue
        if ch in out_seen:
            raise _fail(s, [out_seen[ch], pos], f"{ch!r} appears twice in the output",
                        "Each output symbol may appear once (a repeated output letter is not a "
                        "diagonal here).")
        if ch not in in_symbols:
            raise _fail(s, [pos], f"output symbol {ch!r} does not appear in any input",
                        "Every output symbol must come from some input term.")
        out_seen[ch] = pos


def _repeated_group_error(s: str, arrow: int, k: int) -> NoReturn:
    """Raise the error for the first group repeated in input term ``k`` (error path only)."""
    start, stop = _term_spans(s, arrow)[k]
    seen: dict[str, int] = {}
    for match in _GROUP.finditer(s, start, stop):  # at most 27 groups before a repeat
        pos, ch = match.start(), match.group()
        if ch in seen:
            raise _fail(s, [seen[ch], pos], f"group {ch!r} appears twice in input term {k}",
                        "A group may appear at most once per term; for a diagonal over a "
                        "group's axes spell its axes with lowercase letters.")
        seen[ch] = pos
    raise AssertionError("unreachable: the term has no repeated group")  # pragma: no cover
