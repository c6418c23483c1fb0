"""The exception hierarchy.

Every failure of `contract` and its introspection helpers is a `ContractionError`
(a `ValueError`), except keyword misuse, which is a `TypeError` as Python users expect.
Messages always quote the subscripts string; syntax errors echo it with a caret line.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Iterable

__all__ = [
    "ContractionError",
    "SubscriptsSyntaxError",
    "UnderdeterminedError",
    "InconsistentError",
    "OperandCountError",
    "SizeMismatchError",
    "SupplementError",
    "MemoryLimitError",
    "OptionError",
    "PathError",
    "KeywordError",
    "caret_line",
    "numpy_reading",
    "uppercase_hint",
    "quoted",
    "QUOTE_LIMIT",
    "CARET_WINDOW",
]


class ContractionError(ValueError):
    """Root of every error this library raises about a subscripts string or its operands."""


class SubscriptsSyntaxError(ContractionError):
    """The subscripts string is not in the grouped-einsum dialect."""


class UnderdeterminedError(ContractionError):
    """The string alone cannot decide how many axes some group has; a `len_<G>=` is needed."""


class InconsistentError(ContractionError):
    """The operands' ndims (and any `len_<G>=`) admit no non-negative integer group lengths."""


class OperandCountError(ContractionError):
    """The number of operands differs from the number of input terms."""


class SizeMismatchError(ContractionError):
    """One axis (a lowercase letter or a group sub-axis) has incompatible extents."""


class SupplementError(ContractionError, TypeError):
    """A `len_<G>=` keyword is wrong for this string (unknown group, negative length).

    It is both a `ContractionError` and a `TypeError` (keyword misuse), so either
    ``except`` clause catches it.
    """


class MemoryLimitError(ContractionError):
    """A ``memory_limit`` the schedule cannot keep (not even within the most blocks it allows).

    ``smallest_limit`` is the smallest limit, in elements, that the schedule can keep for
    this call (None when no blocking helps), which the message also names.
    """

    def __init__(self, message: str, smallest_limit: int | None = None) -> None:
        super().__init__(message)
        self.smallest_limit = smallest_limit


class OptionError(ContractionError):
    """A keyword option has a value outside its documented set: an unknown ``optimize=``
    preset or ``backend=`` name, a ``memory_limit=`` that is not a positive finite size, a
    group length that is not a whole number of axes, or more axes than can be named."""


class PathError(ContractionError, TypeError, IndexError, RuntimeError):
    """An explicit ``optimize=`` path is invalid for this many operands.

    Also a `TypeError` and a `RuntimeError` (what np.einsum raises for a path it cannot follow,
    and for one that leaves operands uncontracted) and an `IndexError` (what opt_einsum
    raises), so code written for either catches it.
    """


class KeywordError(ContractionError, TypeError):
    """A keyword the verb does not take: a misspelt one (``optimise=``: the message names the
    close match, ``optimize=``; ``lenW=``: ``len_W=``), or ``out=`` or ``backend=`` to
    `contract_expression`, which belong to the expression's call.

    Both a `TypeError` (keyword misuse, as Python raises for an unknown keyword) and a
    `ContractionError`, so a `ValueError` (what opt_einsum raises there).
    """


QUOTE_LIMIT = 120
"""Longest subscripts string a message quotes whole; longer ones are quoted by their start."""

CARET_WINDOW = 72
"""Most characters of the subscripts a caret line echoes (a window around the culprit)."""

_CARET_CONTEXT = 32  # characters shown before the first culprit when the string is cut


def quoted(subscripts: str) -> str:
    """``repr(subscripts)``, or for a long string its start and its length.

    >>> quoted('WCa,Caib->WCb')
    "'WCa,Caib->WCb'"
    >>> quoted('Wa,' * 100 + 'Wa->W')
    "'Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,Wa,'... (305 characters)"
    """
    if len(subscripts) <= QUOTE_LIMIT:
        return repr(subscripts)
    return f"{subscripts[:QUOTE_LIMIT // 2]!r}... ({len(subscripts)} characters)"


_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_TO_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def numpy_reading(subscripts: str) -> str | None:
    """The lowercase string with numpy's meaning (one axis per letter) of a string written
    with UPPERCASE letters only, as numpy accepts them; None when the string has a
    single-axis letter (it is written in this dialect, not for numpy).

    >>> numpy_reading('IJ,JK->IK'), numpy_reading('WCa,Caib->WCb')
    ('ij,jk->ik', None)
    """
    if any(ch.isalpha() and ch not in _UPPER for ch in subscripts):
        return None
    return subscripts.translate(_TO_LOWER)


def uppercase_hint(subscripts: str, one_axis_each: bool | None = None) -> str:
    """For a string written with UPPERCASE letters only (`numpy_reading`), what they mean here
    and how numpy's meaning is written; ``one_axis_each``: whether every operand has one axis
    per letter of its term (then the lowercase string runs), None when the operands are not
    known (`contractions check`).  Empty for any other string.

    >>> uppercase_hint('IJ,JK->IK')
    "UPPERCASE letters are groups of zero or more axes here, not numpy's single axes; for numpy's meaning, one axis per letter, write the lowercase 'ij,jk->ik'"
    """
    lowercase = numpy_reading(subscripts)
    if lowercase is None:
        return ""
    groups = "UPPERCASE letters are groups of zero or more axes here, not numpy's single axes"
    if one_axis_each is False:
        return (f"{groups} (numpy's are lowercase letters, but these operands do not have one "
                "axis per letter either)")
    these = " (as these operands have)" if one_axis_each else ""
    return f"{groups}; for numpy's meaning, one axis per letter{these}, write the lowercase {lowercase!r}"


def _rendered(ch: str, quote: str) -> tuple[str, int]:
    """How ``repr`` spells ``ch`` inside a string quoted with ``quote``, and its width in
    terminal columns (wide East Asian characters take two; a combining mark, which would
    stack on its neighbour, is spelt as its escape instead)."""
    if ch == quote or ch == "\\":
        return "\\" + ch, 2
    text = repr(ch)[1:-1]
    if text != ch:  # escaped by repr: plain ASCII
        return text, len(text)
    if unicodedata.combining(ch):
        text = ch.encode("unicode_escape").decode("ascii")
        return text, len(text)
    return ch, 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def caret_line(subscripts: str, positions: Iterable[int]) -> str:
    """Echo ``subscripts`` as ``repr`` does, with a line of carets under ``positions``.

    A position equal to ``len(subscripts)`` marks the end (the closing quote).  Characters
    ``repr`` escapes (tabs, newlines, quotes, non-printables) get as many carets as their
    escape has characters, so the carets stay under the culprit.  A string longer than
    `CARET_WINDOW` is echoed as a window around the first position, with ``...`` outside the
    quotes where it is cut.

    >>> print(caret_line('Wa...->W', range(2, 5)))
        'Wa...->W'
           ^^^
    >>> print(caret_line('W\\ta1->W', [3]))
        'W\\ta1->W'
             ^
    """
    n = len(subscripts)
    places = sorted(set(positions))
    if places and places[-1] > n:  # past the end means the end
        places = places[:bisect.bisect_right(places, n)] + [n]
    lo, hi = 0, n
    if n > CARET_WINDOW:
        first = max(places[0], 0) if places else 0
        lo = max(0, min(first - _CARET_CONTEXT, n - CARET_WINDOW))
        hi = lo + CARET_WINDOW
    text = subscripts[lo:hi]
    quote = '"' if "'" in text and '"' not in text else "'"
    before = "..." if lo > 0 else ""
    after = "..." if hi < n else ""
    pieces: list[str] = []
    marks: list[str] = []
    wanted = set(places[bisect.bisect_left(places, lo):bisect.bisect_right(places, hi)])
    for i, ch in enumerate(text, start=lo):
        piece, width = _rendered(ch, quote)
        pieces.append(piece)
        marks.append(("^" if i in wanted else " ") * width)
    if n in wanted and hi == n:
        marks.append("^")  # the end of the string: under the closing quote
    echo = f"{before}{quote}{''.join(pieces)}{quote}{after}"
    indent = " " * (len(before) + 1)
    return f"    {echo}\n    {indent}{''.join(marks)}".rstrip()
