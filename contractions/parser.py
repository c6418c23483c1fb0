"""Stage 1 of the pipeline: parse a grouped subscripts string.

Pure and array-free: this module only reads text.  The result is a frozen
`ParsedSubscripts` that every later stage (solve, expand, plan) keys its caches on.

>>> p = parse('WCa, Caib ,WCi -> WCb')
>>> p.inputs, p.output, p.groups
(('WCa', 'Caib', 'WCi'), 'WCb', ('W', 'C'))
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .errors import SubscriptsSyntaxError, caret_line

__all__ = ["ParsedSubscripts", "parse", "is_group", "PARSE_CACHE_SIZE"]

PARSE_CACHE_SIZE = 4096

_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")


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
        f"invalid subscripts {subscripts!r}: {problem}\n{caret_line(subscripts, positions)}\n{fix}"
    )


def parse(subscripts: str) -> ParsedSubscripts:
    """Parse and validate ``subscripts``; raise `SubscriptsSyntaxError` with a caret on error.

    >>> parse('Wii->W').inputs
    ('Wii',)
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"subscripts must be a str, got {type(subscripts).__name__}")
    return _parse(subscripts)


@functools.lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse(s: str) -> ParsedSubscripts:
    # Character classes first: the caret points at the first offending run.
    for pos, ch in enumerate(s):
        if ch in _UPPER or ch in _LOWER or ch in ",->" or ch.isspace():
            continue
        if ch == ".":
            end = pos
            while end < len(s) and s[end] == ".":
                end += 1
            what = "'...' (ellipsis) is" if end - pos == 3 else "'.' is"
            raise _fail(s, range(pos, end), f"{what} not part of this dialect",
                        "An uppercase group replaces '...': write e.g. 'Wij,jk->Wik' "
                        "where W stands for any number of leading axes.")
        raise _fail(s, [pos], f"character {ch!r} is not allowed",
                    "Use A-Z for groups of axes, a-z for single axes, ',' between inputs "
                    "and one '->' before the output.")
    arrows = [i for i in range(len(s) - 1) if s[i:i + 2] == "->"]
    for pos, ch in enumerate(s):
        if ch == "-" and pos not in arrows:
            raise _fail(s, [pos], "'-' must be followed by '>'", "Write the arrow as '->'.")
        if ch == ">" and pos - 1 not in arrows:
            raise _fail(s, [pos], "'>' must follow '-'", "Write the arrow as '->'.")
    if not arrows:
        raise _fail(s, [len(s)], "the output is missing (implicit output is not supported)",
                    "Write the output explicitly after '->', e.g. 'WCa,Caib->WCb'; "
                    "an empty output ('ij,ij->') sums everything.")
    if len(arrows) > 1:
        raise _fail(s, [arrows[1], arrows[1] + 1], "more than one '->'",
                    "A subscripts string has exactly one '->' before the output term.")
    arrow = arrows[0]

    # Split input terms, keeping the position of every symbol for carets.
    input_terms: list[list[tuple[int, str]]] = [[]]
    comma_positions: list[int] = []
    for pos in range(arrow):
        ch = s[pos]
        if ch == ",":
            input_terms.append([])
            comma_positions.append(pos)
        elif not ch.isspace():
            input_terms[-1].append((pos, ch))
    output_term: list[tuple[int, str]] = []
    for pos in range(arrow + 2, len(s)):
        ch = s[pos]
        if ch == ",":
            raise _fail(s, [pos], "',' in the output term",
                        "The output is a single term; list all its symbols without commas.")
        if not ch.isspace():
            output_term.append((pos, ch))

    for k, term in enumerate(input_terms):
        if not term:
            # Point at the delimiters around the empty slot.
            where = [comma_positions[k - 1]] if k > 0 else []
            where.append(comma_positions[k] if k < len(comma_positions) else arrow)
            raise _fail(s, where, f"input term {k} is empty",
                        "Every operand needs a non-empty term; a scalar operand is not "
                        "expressible (use a group that is empty at this call, e.g. 'S').")
        seen: dict[str, int] = {}
        for pos, ch in term:
            if is_group(ch) and ch in seen:
                raise _fail(s, [seen[ch], pos], f"group {ch!r} appears twice in input term {k}",
                            "A group may appear at most once per term; for a diagonal over a "
                            "group's axes spell its axes with lowercase letters.")
            seen.setdefault(ch, pos)

    in_symbols = {ch for term in input_terms for _, ch in term}
    out_seen: dict[str, int] = {}
    for pos, ch in output_term:
        if ch in out_seen:
            raise _fail(s, [out_seen[ch], pos], f"{ch!r} appears twice in the output",
                        "Each output symbol may appear once (a repeated output letter is not a "
                        "diagonal here).")
        if ch not in in_symbols:
            raise _fail(s, [pos], f"output symbol {ch!r} does not appear in any input",
                        "Every output symbol must come from some input term.")
        out_seen[ch] = pos

    inputs = tuple("".join(ch for _, ch in term) for term in input_terms)
    output = "".join(ch for _, ch in output_term)
    groups: list[str] = []
    for text in inputs + (output,):
        for ch in text:
            if is_group(ch) and ch not in groups:
                groups.append(ch)
    return ParsedSubscripts(subscripts=s, inputs=inputs, output=output, groups=tuple(groups))
