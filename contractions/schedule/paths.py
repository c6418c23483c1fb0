"""``optimize=``: its accepted forms, and the pairwise paths they name (opt_einsum's presets,
an explicit path, a PathOptimizer, cotengra's path, every order of a few operands)."""

from __future__ import annotations

import functools
import importlib.util
import itertools
from collections.abc import Sequence
from typing import Any

from opt_einsum import paths as _opt_paths

from ..errors import PathError
from ..expand import symbol_past_letters
from .ir import EINSUM_LETTERS, Labels


# ------------------------------------------------------------------------------ optimize=
def normalise_optimize(optimize: Any) -> Any:
    """Check an ``optimize=`` value and return a hashable, canonical form.

    Accepted: an opt_einsum preset name (``'auto'``, ``'greedy'``, ``'optimal'``, ``'dp'``,
    ``'branch-2'``, ``'auto-hq'``, ``'random-greedy'``, ...), ``True`` (``'auto'``), ``False``
    (one einsum call, no pairwise path), an explicit path (``[(1, 2), (0, 1)]``, optionally
    led by numpy's ``'einsum_path'``) or an ``opt_einsum.paths.PathOptimizer`` instance (such
    as cotengra's ``HyperOptimizer``).

    >>> normalise_optimize([(1, 2), [0, 1]])
    ((1, 2), (0, 1))
    >>> normalise_optimize(False)
    'direct'
    """
    if optimize is True:
        return "auto"
    if optimize is False:
        return "direct"
    if isinstance(optimize, str):
        name = optimize.lower()
        if name == "direct":
            return name
        try:
            _opt_paths.get_path_fn(name)
        except KeyError:
            known = sorted(_opt_paths._PATH_OPTIONS)  # the registry opt_einsum looks names up in
            raise ValueError(
                f"optimize={optimize!r} names no path optimizer; use one of {known}, an explicit "
                "path such as [(0, 1), (0, 1)], an opt_einsum PathOptimizer, or False for one "
                "einsum call") from None
        return name
    if isinstance(optimize, _opt_paths.PathOptimizer):
        return optimize
    if isinstance(optimize, (list, tuple)):
        items = list(optimize)
        if items and items[0] == "einsum_path":  # numpy's np.einsum_path output
            items = items[1:]
        path = []
        for pair in items:
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence):
                raise TypeError(f"optimize= path entries must be tuples of operand positions, "
                                f"got {pair!r} in {optimize!r}")
            try:
                path.append(tuple(int(k) for k in pair))
            except (TypeError, ValueError):
                raise TypeError(f"optimize= path entries must be tuples of ints, got {pair!r}") from None
        return tuple(path)
    raise TypeError(
        f"optimize= must be a preset name ('auto', 'greedy', 'optimal', 'dp', ...), True/False, "
        f"an explicit path like [(0, 1)] or an opt_einsum PathOptimizer, not {type(optimize).__name__}")


def _optimizer_name(optimize: Any) -> str:
    if isinstance(optimize, str):
        return optimize
    if isinstance(optimize, tuple):
        return "explicit path"
    return type(optimize).__name__


def _find_path(optimize: Any, terms: list[Labels], output: Labels,
               extents: dict[int, int]) -> tuple[tuple[int, ...], ...]:
    if len(terms) == 1:
        return ((0,),)
    if isinstance(optimize, tuple):
        return _checked_path(optimize, len(terms))
    size_dict = {label: extents[label] for term in terms for label in term}
    if 0 in size_dict.values():
        # An extent of 0 makes every order cost nothing (and the result all zeros): no search,
        # whose cost arithmetic some optimizers cannot do on empty sizes ('dp' finds nothing).
        return trivial_path(len(terms))
    if isinstance(optimize, str):
        name = "auto" if optimize == "direct" else optimize
        # (memory_limit=None, passed as opt_einsum passes it: a registered path function
        # takes it positionally; the schedule honours memory_limit= itself)
        found = _opt_paths.get_path_fn(name)([frozenset(t) for t in terms], frozenset(output), size_dict,
                                             None)
    else:
        # A PathOptimizer (cotengra's among them) gets string indices, as from opt_einsum.
        sym = {label: _opt_symbol(label) for label in size_dict}
        found = optimize([tuple(sym[lab] for lab in t) for t in terms],
                         tuple(sym[lab] for lab in output if lab in sym),
                         {sym[lab]: n for lab, n in size_dict.items()})
    return _checked_path(tuple(tuple(int(k) for k in step) for step in found), len(terms))


def trivial_path(n: int) -> tuple[tuple[int, ...], ...]:
    """The left-to-right path of ``n`` operands, in opt_einsum's form.

    >>> trivial_path(3)
    ((0, 1), (0, 1))
    """
    return ((0,),) if n == 1 else ((0, 1),) * (n - 1)


def _opt_symbol(label: int) -> str:
    # opt_einsum's symbol order, past the surrogates that get_symbol would hand out
    return EINSUM_LETTERS[label] if label < len(EINSUM_LETTERS) else symbol_past_letters(label)


def _checked_path(path: tuple[tuple[int, ...], ...], n: int) -> tuple[tuple[int, ...], ...]:
    """Validate a path in opt_einsum's form against ``n`` operands."""
    count = n
    for k, step in enumerate(path):
        if len(step) == 0 or len(set(step)) != len(step) or any(not 0 <= i < count for i in step):
            raise PathError(
                f"optimize= path {list(path)} is invalid at entry {k} {step}: with {count} operands "
                f"left, each entry names distinct positions 0..{count - 1} (contracted operands are "
                "removed and the result appended last, as in opt_einsum)")
        count -= len(step) - 1
    if count != 1:
        raise PathError(
            f"optimize= path {list(path)} leaves {count} operands uncontracted; it must end with one "
            f"(for {n} operands, e.g. {[(0, 1)] * (n - 1)})")
    return path


def _candidate_paths(terms: list[Labels], output: Labels,
                     extents: dict[int, int]) -> list[tuple[tuple[int, ...], ...]]:
    """Paths worth pricing with the time model: every pairwise order up to four operands
    (the FLOP-optimal one among them), else opt_einsum's auto, greedy and dp paths and, when
    it is installed, cotengra's."""
    n = len(terms)
    if n <= 4:
        return list(_all_pairwise_paths(n))
    found: list[tuple[tuple[int, ...], ...]] = []
    for name in ("auto", "greedy", "dp") if n <= 16 else ("auto", "greedy"):
        path = _find_path(name, terms, output, extents)
        if path not in found:
            found.append(path)
    cotengra_path = _cotengra_path(terms, output, extents)
    if cotengra_path is not None and cotengra_path not in found:
        found.append(cotengra_path)
    return found


def _cotengra_path(terms: list[Labels], output: Labels,
                   extents: dict[int, int]) -> tuple[tuple[int, ...], ...] | None:
    """cotengra's own 'auto' path when cotengra is installed (imported on first need, ~0.3 s);
    None without it, or if it fails: it is one candidate among several, never required."""
    if importlib.util.find_spec("cotengra") is None:
        return None
    try:
        cotengra, optimizer = _cotengra()
        found = cotengra.array_contract_path(
            [tuple(t) for t in terms], output=tuple(output),
            size_dict={lab: extents[lab] for t in terms for lab in t}, optimize=optimizer)
        return _checked_path(tuple(tuple(int(k) for k in step) for step in found), len(terms))
    except Exception:  # a candidate source, never a dependency: any failure just drops it
        return None


@functools.cache
def _cotengra() -> tuple[Any, Any]:
    """cotengra and its 'auto' optimizer, searching in this process: its default hands hard searches
    to a pool of forked worker processes, and a fork in a process that runs threads (JAX, torch,
    BLAS) can deadlock the child; it would also leave the workers alive after the call.  Its
    own cache is off: the schedule cache already keeps every path found."""
    import cotengra

    return cotengra, cotengra.AutoOptimizer(parallel=False, cache=False)


def _all_pairwise_paths(n: int):
    if n == 1:
        yield ((0,),)
        return
    if n == 2:
        yield ((0, 1),)
        return
    for pair in itertools.combinations(range(n), 2):
        for rest in _all_pairwise_paths(n - 1):
            yield (pair, *rest)


def _fewest_flops(terms: list[Labels], output: Labels,
                  extents: dict[int, int]) -> tuple[tuple[int, ...], ...]:
    """The candidate path of fewest FLOPs, counted without pricing any step: every pairwise
    order up to four operands (the first of equal counts in `_candidate_paths`' order wins),
    opt_einsum's greedy path past that (its auto/dp/cotengra searches cost more than a quick
    plan may spend).

    Labels are bits and a working term is known by the operands it covers (a bit mask too):
    its labels (those still needed by the output or an operand outside it) and each merge's
    count (opt_einsum's: the size of the labels met, twice that where one is summed) are found
    once and shared by the orders that make them.  Every new string's first call runs this,
    so the orders are walked as the two shapes a path of four takes (a pair then a path of
    three), not as 18 lists.

    >>> _fewest_flops([(0, 1), (1, 2), (2, 3)], (0, 3), {0: 100, 1: 2, 2: 100, 3: 2})
    ((1, 2), (0, 1))
    """
    n = len(terms)
    if n > 4:
        return _find_path("greedy", terms, output, extents)
    if n <= 2:
        return _candidate_paths(terms, output, extents)[0]
    bit: dict[int, int] = {}
    masks = []
    for term in terms:
        mask = 0
        for lab in term:
            found = bit.get(lab)
            if found is None:
                found = bit[lab] = 1 << len(bit)
            mask |= found
        masks.append(mask)
    out = 0
    for lab in output:
        out |= bit.get(lab, 0)
    sizes = {b: extents[lab] for lab, b in bit.items()}
    # by the operands a working term covers (operand k is bit k): the labels they hold, what
    # the output and the operands outside need, and the working term's own labels
    every = [0] * (1 << n)
    for covered in range(1, 1 << n):
        low = covered & -covered
        every[covered] = every[covered ^ low] | masks[low.bit_length() - 1]
    keep = [out | every[covered ^ ((1 << n) - 1)] for covered in range(1 << n)]
    labels_of = [held if covered & (covered - 1) == 0 else held & kept
                 for covered, (held, kept) in enumerate(zip(every, keep))]
    counts: dict[int, int] = {}

    def merge(a: int, b: int) -> int:
        key = (a | b) << 4 | min(a, b)  # (a merge's count is the same either way round)
        found = counts.get(key)
        if found is None:
            both = labels_of[a] | labels_of[b]
            found, rest = 1, both
            while rest:
                low = rest & -rest
                found *= sizes[low]
                rest ^= low
            found = counts[key] = found * (2 if both & ~keep[a | b] else 1)
        return found

    def three(x: int, y: int, z: int) -> tuple[int, int]:
        # the fewest count among a path of three working terms' orders, and which order
        options = (merge(x, y) + merge(z, x | y), merge(x, z) + merge(y, x | z),
                   merge(y, z) + merge(x, y | z))
        pick = min(range(3), key=options.__getitem__)
        return options[pick], pick

    ends = (((0, 1), (0, 1)), ((0, 2), (0, 1)), ((1, 2), (0, 1)))
    if n == 3:
        return ends[three(1, 2, 4)[1]]
    best: tuple[tuple[int, ...], ...] | None = None
    fewest = 0
    for i, j in _PAIRS_OF_FOUR:
        # (the operands a working term covers are bits too: operand k is 1 << k)
        rest = [1 << k for k in range(4) if k != i and k != j]
        total, pick = three(rest[0], rest[1], 1 << i | 1 << j)
        total += merge(1 << i, 1 << j)
        if best is None or total < fewest:
            best, fewest = ((i, j), *ends[pick]), total
    assert best is not None
    return best


_PAIRS_OF_FOUR = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))
