"""Stage 3 of the pipeline: expand groups into single-axis symbols.

Given the solved number of axes of every group, each group becomes that many fresh
single-axis symbols, handed out in order of first appearance (inputs left to right, then
the output).  Lowercase letters keep their own letters; fresh symbols come from ``A``-``Z``
first (so an expansion reads as "uppercase = group axes"), then unused lowercase letters,
then, past 52 symbols, the non-ASCII characters from U+00C0 on that `opt_einsum.get_symbol`
uses, skipping the surrogates U+D800-U+DFFF (which no text can hold alone).  Those are for
``jnp.einsum``, not for people: `Expansion.readable` writes them as ``[label]``.  An empty
group vanishes.  Because symbols are handed out by position, every split of a co-travelling run
expands to the very same string.

>>> expansion('WCa,Caib,WCi->WCb', {'W': 2, 'C': 1}).einsum
'ABCa,Caib,ABCi->ABCb'
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass

from .caching import byte_bounded_cache
from .errors import InconsistentError, SupplementError, quoted
from .parser import ELLIPSIS, ParsedSubscripts, is_group, parse, weight_with_parses

__all__ = ["Expansion", "expansion", "expand", "ellipsis_ranks", "symbol_past_letters",
           "EXPAND_CACHE_SIZE"]

EXPAND_CACHE_SIZE = 4096
EXPAND_CACHE_BYTES = 64 * 2**20  # keys hold the caller's subscripts (contractions/caching.py)


@dataclass(frozen=True)
class Expansion:
    """A grouped string with every group replaced by its single axes.

    ``inputs``/``output`` hold integer axis labels (0, 1, ... in first-appearance order);
    ``symbols[label]`` is the label's character in ``einsum``; ``group_labels`` maps each
    group to its labels (empty for an empty group) and ``letter_labels`` each lowercase
    letter to its label.
    """

    subscripts: str
    lengths: tuple[tuple[str, int], ...]
    einsum: str
    inputs: tuple[tuple[int, ...], ...]
    output: tuple[int, ...]
    symbols: tuple[str, ...]
    group_labels: tuple[tuple[str, tuple[int, ...]], ...]
    letter_labels: tuple[tuple[str, int], ...]
    ellipsis_labels: tuple[int, ...] = ()

    @property
    def readable(self) -> str:
        """``einsum`` for display: the same string while every symbol is an ASCII letter;
        past the 52 letters each other axis is written ``[label]`` (its integer label), so
        nothing unprintable, combining or look-alike reaches a reader.

        >>> e = expansion('Wa,Xa->WX', {'W': 26, 'X': 27})   # X's last 2 axes are past 'z'
        >>> e.readable[-12:]
        'wxyz[52][53]'
        >>> expansion('WCa,Caib,WCi->WCb', {'W': 2, 'C': 1}).readable
        'ABCa,Caib,ABCi->ABCb'
        """
        name = self.readable_symbol
        inputs = ",".join("".join(map(name, term)) for term in self.inputs)
        return inputs + "->" + "".join(map(name, self.output))

    def readable_symbol(self, label: int) -> str:
        """How `readable` writes ``label``: its letter, or ``[label]`` past the letters."""
        symbol = self.symbols[label]
        return symbol if symbol in _LETTERS else f"[{label}]"

    @property
    def n_axes(self) -> int:
        """Number of distinct single axes after expansion."""
        return len(self.symbols)

    def owner(self, label: int) -> tuple[str, int]:
        """``(group, sub-axis index)`` for a group axis, ``(letter, 0)`` for a letter,
        ``('...', index)`` for a broadcast axis of the ellipsis."""
        if label in self.ellipsis_labels:
            return "...", self.ellipsis_labels.index(label)
        for g, labels in self.group_labels:
            if label in labels:
                return g, labels.index(label)
        for letter, lab in self.letter_labels:
            if lab == label:
                return letter, 0
        raise KeyError(label)


_LETTERS = frozenset(string.ascii_letters)
_SURROGATES = range(0xD800, 0xE000)


def symbol_past_letters(k: int) -> str:
    """The ``k``-th fresh symbol (``k >= 52``): ``chr(k + 140)`` as `opt_einsum.get_symbol`,
    but moved past the surrogates, which a str can hold but no encoding can write.

    >>> symbol_past_letters(52), symbol_past_letters(0xD7FF - 140)
    ('À', '\ud7ff')
    >>> hex(ord(symbol_past_letters(0xD800 - 140)))
    '0xe000'
    """
    code = k + 140
    return chr(code + len(_SURROGATES) if code >= _SURROGATES.start else code)


def _fresh_symbols(used_letters: set[str]):
    for ch in string.ascii_uppercase:
        yield ch
    for ch in string.ascii_lowercase:
        if ch not in used_letters:
            yield ch
    k = 52
    while True:
        symbol = symbol_past_letters(k)
        if symbol not in used_letters:  # a non-ASCII letter the string uses for an axis
            yield symbol
        k += 1


def ellipsis_ranks(parsed: ParsedSubscripts, lengths: tuple[int, ...],
                   ndims: tuple[int, ...]) -> tuple[int, ...]:
    """How many axes the ``...`` of each input term stands for (0 for a term without one):
    the operand's ndim less its term's letters and groups.  ``()`` when no term has one.

    >>> ellipsis_ranks(parse('...ij,j...->...'), (), (4, 2))
    (2, 1)
    """
    if not parsed.has_ellipsis:
        return ()
    length_of = dict(zip(parsed.groups, lengths))
    ranks = []
    for k, (term, nd) in enumerate(zip(parsed.inputs, ndims)):
        if ELLIPSIS not in term:
            ranks.append(0)
            continue
        fixed = sum(length_of[ch] if is_group(ch) else 1 for ch in term if ch != ELLIPSIS)
        if nd < fixed:
            raise InconsistentError(
                f"inconsistent operands for {quoted(parsed.subscripts)}: operand {k} has ndim {nd}, "
                f"but its term {parsed.inputs[k].replace(ELLIPSIS, '...')!r} needs at least {fixed} "
                "axes besides its '...'. Check the operand order and each operand's ndim.")
        ranks.append(nd - fixed)
    return tuple(ranks)


@byte_bounded_cache(maxsize=EXPAND_CACHE_SIZE, maxbytes=EXPAND_CACHE_BYTES, weigh_results=False,
                    weigh_args=weight_with_parses)
def expand(parsed: ParsedSubscripts, lengths: tuple[int, ...],
           ranks: tuple[int, ...] = ()) -> Expansion:
    """Expand ``parsed`` with ``lengths`` given in ``parsed.groups`` order (cached).

    ``ranks`` (from `ellipsis_ranks`) gives each term's number of ``...`` axes.  As in numpy,
    the ellipses broadcast right-aligned: ``...`` expands to as many fresh axes as the largest
    rank, a term of rank ``r`` takes the last ``r`` of them, and an output without ``...``
    sums them.
    """
    length_of = dict(zip(parsed.groups, lengths))
    used = {ch for ch in parsed.subscripts if ch.isalpha() and not is_group(ch)}
    fresh = _fresh_symbols(used)
    symbols: list[str] = []
    group_labels: dict[str, tuple[int, ...]] = {}
    letter_labels: dict[str, int] = {}
    rank_of = dict(enumerate(ranks))
    width = max(ranks, default=0)
    ellipsis: list[tuple[int, ...]] = []

    def labels_of(term: str, k: int) -> tuple[int, ...]:
        out: list[int] = []
        for ch in term:
            if ch == ELLIPSIS:
                if not ellipsis:
                    start = len(symbols)
                    symbols.extend(next(fresh) for _ in range(width))
                    ellipsis.append(tuple(range(start, len(symbols))))
                r = width if k < 0 else rank_of.get(k, 0)
                out.extend(ellipsis[0][width - r:])
            elif is_group(ch):
                if ch not in group_labels:
                    start = len(symbols)
                    for _ in range(length_of[ch]):
                        symbols.append(next(fresh))
                    group_labels[ch] = tuple(range(start, len(symbols)))
                out.extend(group_labels[ch])
            else:
                if ch not in letter_labels:
                    letter_labels[ch] = len(symbols)
                    symbols.append(ch)
                out.append(letter_labels[ch])
        return tuple(out)

    inputs = tuple(labels_of(term, k) for k, term in enumerate(parsed.inputs))
    output = labels_of(parsed.output, -1)
    einsum = ",".join("".join(symbols[label] for label in term) for term in inputs)
    einsum += "->" + "".join(symbols[label] for label in output)
    return Expansion(
        subscripts=parsed.subscripts,
        lengths=tuple(zip(parsed.groups, lengths)),
        einsum=einsum,
        inputs=inputs,
        output=output,
        symbols=tuple(symbols),
        group_labels=tuple((g, group_labels[g]) for g in parsed.groups),
        letter_labels=tuple(letter_labels.items()),
        ellipsis_labels=ellipsis[0] if ellipsis else (),
    )


def expansion(subscripts: str, lengths: Mapping[str, int]) -> Expansion:
    """Expand ``subscripts`` for explicit group lengths (every group must be given).

    >>> expansion('Wii->W', {'W': 0}).einsum
    'ii->'
    """
    parsed = parse(subscripts)
    if not isinstance(lengths, Mapping):
        raise TypeError(f"expansion: lengths must be a mapping of group to number of axes, e.g. "
                        f"{{'W': 2}}, not {type(lengths).__name__}")
    missing = [g for g in parsed.groups if g not in lengths]
    if missing:
        raise SupplementError(f"expansion: no length given for group(s) {', '.join(missing)} of "
                              f"{quoted(subscripts)}; pass every group's number of axes")
    extra = [g for g in lengths if g not in parsed.groups]
    if extra:
        raise SupplementError(f"expansion: {', '.join(map(repr, extra))} is not a group of "
                              f"{quoted(subscripts)} (its groups: {', '.join(parsed.groups) or 'none'})")
    values = []
    for g in parsed.groups:
        n = lengths[g]
        if isinstance(n, bool) or not hasattr(type(n), "__index__"):
            raise TypeError(f"expansion: the length of group {g} must be an int number of axes, "
                            f"got {type(n).__name__} ({n!r:.40})")
        if n < 0:
            raise SupplementError(f"expansion: group {g} has length {n}; a group has 0 or more axes")
        values.append(int(n))
    return expand(parsed, tuple(values))

