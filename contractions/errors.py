"""The exception hierarchy.

Every failure of `contract` and its introspection helpers is a `ContractionError`
(a `ValueError`), except keyword misuse, which is a `TypeError` as Python users expect.
Messages always quote the subscripts string; syntax errors echo it with a caret line.
"""

from __future__ import annotations

__all__ = [
    "ContractionError",
    "SubscriptsSyntaxError",
    "UnderdeterminedError",
    "InconsistentError",
    "OperandCountError",
    "SizeMismatchError",
    "SupplementError",
    "caret_line",
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


def caret_line(subscripts: str, positions: list[int] | tuple[int, ...] | range) -> str:
    """Return ``subscripts`` with a line of carets under ``positions``.

    >>> print(caret_line('Wa...->W', range(2, 5)))
        'Wa...->W'
           ^^^
    """
    marks = [" "] * (len(subscripts) + 1)
    for p in positions:
        marks[min(p, len(subscripts))] = "^"
    return f"    {subscripts!r}\n     " + "".join(marks).rstrip()
