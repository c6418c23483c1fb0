"""Argument checks every stage shares: ``len_<G>=`` keywords and operand counts.

This module sits beside the parser at the bottom of the pipeline (it imports nothing but the
parser's dataclass and the errors), so the solver, the plan and the public verbs all validate
their arguments the same way without importing one another.

>>> normalise_supplements({'len_W': 2, 'len_C': 0})
(('C', 0), ('W', 2))
"""

from __future__ import annotations

import difflib
import inspect
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .errors import KeywordError, OperandCountError, SupplementError, quoted
from .parser import ParsedSubscripts

__all__ = ["NUMPY_EINSUM_KEYWORDS", "normalise_supplements", "check_operand_count", "keyword_hint",
           "keywords_of"]


#: np.einsum keywords that contract does not take, with what to do instead.
NUMPY_EINSUM_KEYWORDS = {
    "order": "the result's memory layout is the one its last step produces; apply "
             "np.ascontiguousarray or np.asfortranarray to the result for a given order",
    "casting": "operands are promoted as np.result_type does (or converted to dtype=); cast "
               "them yourself first for another casting rule",
}


def keywords_of(verb: Callable[..., Any]) -> tuple[str, ...]:
    """The keyword-only parameters of ``verb`` (besides ``len_<G>=n``), read off its signature
    (`contract`'s is set for help()), so the runtime check and `contractions check` agree.

    >>> from contractions import explain
    >>> keywords_of(explain)
    ('optimize', 'backend', 'memory_limit')
    """
    return tuple(p.name for p in inspect.signature(verb).parameters.values()
                 if p.kind is p.KEYWORD_ONLY)


# A name that reads as a group length: len_w, lenW, length_W, LEN_W, lengths_WC, ...
_LENGTH_LIKE = re.compile(r"(?:len(?:gth)?s?|n(?:um)?_?axes)_*([A-Za-z]*)", re.IGNORECASE)


def keyword_hint(name: str, known: Iterable[str] | None) -> str:
    """What to write instead of the keyword ``name``, which is not one of ``known`` nor a
    ``len_<G>``: the close match first (difflib, or the one keyword it begins), then for a
    name that reads as a group length the ``len_<G>`` it means, else every keyword (``known``
    None: the verb's keywords are not known, so only the ``len_<G>`` form is named).

    >>> keyword_hint('optimise', ['optimize', 'memory_limit'])
    'did you mean optimize=?'
    >>> keyword_hint('lenW', ['optimize'])
    'did you mean len_W=? (a group length is written len_<G>=n, G its uppercase group letter)'
    """
    known = None if known is None else tuple(known)
    close = difflib.get_close_matches(name, known or (), n=1, cutoff=0.75)
    if not close:  # (an abbreviation: 'opt', 'memory')
        close = [k for k in known or () if len(name) >= 3 and k.startswith(name)][:2]
    if len(close) == 1:
        return f"did you mean {close[0]}=?"
    rule = "a group length is written len_<G>=n, G its uppercase group letter"
    length = _LENGTH_LIKE.fullmatch(name)
    if length is not None:
        letters = length.group(1)
        if len(letters) == 1:
            return f"did you mean len_{letters.upper()}=? ({rule})"
        if letters:
            each = ", ".join(f"len_{g.upper()}=..." for g in letters)
            return f"{rule}, one keyword per group: {each}"
        return f"{rule}, e.g. len_W=2"
    if known is None:
        return f"{rule}, e.g. len_W=2"
    takes = ", ".join(f"{k}=" for k in known)
    return f"it takes {takes + ' and ' if takes else ''}len_<G>=n (G an uppercase group letter)"


def normalise_supplements(len_groups: Mapping[str, Any], subscripts: Any = None,
                          verb: Callable[..., Any] | None = None) -> tuple[tuple[str, int], ...]:
    """Check ``len_<G>=n`` keywords; return sorted ``((G, n), ...)``.

    Any other keyword is a `KeywordError` naming the close match among ``verb``'s keywords
    (`keyword_hint`; without ``verb``, a `TypeError` naming the ``len_<G>`` form); a
    non-integer value is a `TypeError`, a negative length a `SupplementError`.  Whether ``G``
    occurs in the string is checked by the solver.

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
            name = getattr(verb, "__name__", "")
            call = (f" for {name}({quoted(subscripts)}, ...)" if name and isinstance(subscripts, str)
                    else f" for {name}()" if name else "")
            # (a caller that names no verb gets a plain TypeError: its keywords, hence the
            # close match, and its string are not known here)
            error = KeywordError if verb is not None else TypeError
            raise error(f"unexpected keyword argument {key!r}{call}: "
                        f"{keyword_hint(key, keywords_of(verb) if verb else None)}")
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
