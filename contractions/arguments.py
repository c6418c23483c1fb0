"""Argument checks every stage shares: ``len_<G>=`` keywords and operand counts.

This module sits beside the parser at the bottom of the pipeline (it imports nothing but the
parser's dataclass and the errors), so the solver, the plan and the public verbs all validate
their arguments the same way without importing one another.

>>> normalise_supplements({'len_W': 2, 'len_C': 0})
(('C', 0), ('W', 2))
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

from .errors import OperandCountError, SupplementError, quoted
from .parser import ParsedSubscripts

__all__ = ["NUMPY_EINSUM_KEYWORDS", "normalise_supplements", "check_operand_count"]


#: np.einsum keywords that contract does not take, with what to do instead.
NUMPY_EINSUM_KEYWORDS = {
    "order": "the result's memory layout is the one its last step produces; apply "
             "np.ascontiguousarray or np.asfortranarray to the result for a given order",
    "casting": "operands are promoted as np.result_type does (or converted to dtype=); cast "
               "them yourself first for another casting rule",
}


def normalise_supplements(len_groups: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """Check ``len_<G>=n`` keywords; return sorted ``((G, n), ...)``.

    Unknown keywords and non-integer values are `TypeError`; a negative length is a
    `SupplementError`.  Whether ``G`` occurs in the string is checked by the solver.

    >>> normalise_supplements({'len_W': True})
    Traceback (most recent call last):
    ...
    TypeError: len_W must be an int number of axes, not bool (True)
    """
    out = []
    for key, value in len_groups.items():
        if key in NUMPY_EINSUM_KEYWORDS:
            raise TypeError(f"{key}= is not supported: {NUMPY_EINSUM_KEYWORDS[key]}")
        if not (len(key) == 5 and key.startswith("len_") and "A" <= key[4] <= "Z"):
            raise TypeError(
                f"unexpected keyword argument {key!r}; group lengths are passed as len_<G>=n "
                "with G one uppercase group letter of the subscripts, e.g. len_W=2"
            )
        # bool is an int subclass (and numpy's bool_ has __index__): both are refused.
        if isinstance(value, bool) or type(value).__name__ == "bool_":
            raise TypeError(f"{key} must be an int number of axes, not bool ({value!r})")
        try:
            n = operator.index(value)
        except TypeError:
            raise TypeError(
                f"{key} must be an int number of axes, got {type(value).__name__} ({value!r})"
            ) from None
        if n < 0:
            raise SupplementError(f"{key}={n}: a group has zero or more axes, never a negative number")
        out.append((key[4], n))
    out.sort()
    return tuple(out)


def check_operand_count(parsed: ParsedSubscripts, count: int, what: str = "operand") -> None:
    """Raise `OperandCountError` unless ``count`` (operands, shapes or ndims) fits the terms."""
    if count != len(parsed.inputs):
        raise OperandCountError(
            f"{quoted(parsed.subscripts)} has {len(parsed.inputs)} input term"
            f"{'s' if len(parsed.inputs) != 1 else ''} but {count} {what}"
            f"{'s were' if count != 1 else ' was'} given; pass one {what} per term, in order."
        )
