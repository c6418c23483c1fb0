"""The contenders, each built once per case and then called with the operands.

    contract        contractions.contract(subscripts, *ops, **minimal len_G)  -- the library
    einsum          np.einsum(hand-expanded string, *ops)         (numpy default: one C loop)
    einsum_greedy   np.einsum(expanded, *ops, optimize=True)      (numpy's own pairwise path;
                    optimize=True *is* optimize='greedy' in numpy: einsum_path maps True to
                    'greedy', same memory limit -- also the replaced library's policy)
    opt_einsum      opt_einsum.contract_expression(expanded, *shapes)(*ops)  (path precomputed)
    cotengra        cotengra.einsum_expression(expanded, *shapes)(*ops)  (default optimize='auto',
                    path and contractor built once per case; on numpy it runs each pair as a
                    batched matmul of its own)
    einx            einx.dot('W0 W1 C0 C1 a, ...', *ops)  where einx can say it
    flatten         the old named-function style: reshape each group to one axis, run the fixed
                    grouped string as an einsum (optimize='greedy'), reshape the result back;
                    reshape targets are precomputed (kinder to it than a hand-written body)

A contender that cannot run a case is given as a ``Skip`` with the reason; one whose first call
may run for seconds is given as ``Capped`` (bench/run.py runs that call in a forked child and
records the contender as timed out past ``CALL_CAP_SECONDS``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import cotengra
import numpy as np
import opt_einsum
from vocabulary import Case

import contractions

# np.einsum without optimize runs one nested loop over every label (einx.dot on numpy compiles to
# exactly that call): past this many iterations a call takes ~0.1-1 s and would eat the run's time
# budget, so both contenders are skipped there (they are never the fastest there; the table says
# which strings and why).
NAIVE_EINSUM_MAX_ITERATIONS = 5e7

# np.einsum(optimize='greedy') plans with a memory limit (the largest input); when every pairwise
# intermediate would exceed it, the rest of the contraction falls back to ONE nested loop (the
# failure mode the mid-size goals watch for).  np.einsum_path's "Optimized FLOP count" predicts it: at 1.6e10 a
# mid-size call took 55 s.  Past this count the greedy-based contenders (greedy, flatten) are
# ``Capped``: their first call runs in a forked child and the contender is recorded as timed out
# if it takes more than CALL_CAP_SECONDS; below the count they are timed directly.
GREEDY_MAX_FLOPS = 3e8
CALL_CAP_SECONDS = 2.0

METHODS = ("contract", "einsum", "einsum_greedy", "opt_einsum", "cotengra", "einx", "flatten")
# The peers the goals are judged against: the per-string fastest of these.
PEERS = ("einsum", "einsum_greedy", "opt_einsum", "cotengra", "flatten")
# The earlier goals' peers (numpy/opt_einsum only), still reported for continuity.
NUMPY_PEERS = ("einsum", "einsum_greedy", "opt_einsum", "flatten")


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass(frozen=True)
class Capped:
    """A contender whose first call may take seconds: run it under CALL_CAP_SECONDS first."""

    func: Callable[..., object]
    prediction: str


def naive_iterations(case: Case) -> int:
    lhs, _ = case.expanded.split("->")
    extents: dict[str, int] = {}
    for term, shape in zip(lhs.split(","), case.shapes):
        for symbol, n in zip(term, shape):
            extents[symbol] = max(extents.get(symbol, 1), n)
    return math.prod(extents.values())


def greedy_flops(subscripts: str, shapes) -> float:
    """np.einsum_path's FLOP count for the greedy path np.einsum(optimize='greedy') would run."""
    arrays = [np.empty(shape) for shape in shapes]
    _, info = np.einsum_path(subscripts, *arrays, optimize="greedy")
    match = re.search(r"Optimized FLOP count:\s*([0-9.e+-]+)", info)
    return float(match.group(1)) if match else 0.0


def _einx_expression(case: Case) -> str | Skip:
    lhs, out = case.subscripts.split("->")
    terms = lhs.split(",")
    if len(terms) < 2:
        return Skip("einx.dot needs two or more operands (this is a transpose/reduction)")
    if any(len(set(term)) != len(term) for term in terms):
        return Skip("einx.dot cannot express a repeated axis (diagonal/trace)")
    groups = dict(case.group_axes)

    def names(term: str) -> str:
        parts = []
        for c in term:
            parts.extend(f"{c}{k}" for k in range(len(groups[c]))) if c.isupper() else parts.append(c)
        return " ".join(parts)

    return ", ".join(names(t) for t in terms) + " -> " + names(out)


def _flat_shapes(case: Case) -> list[tuple[int, ...]]:
    groups = dict(case.group_axes)
    lower = dict(case.lower)
    lhs = case.subscripts.split("->")[0]
    return [tuple(math.prod(groups[c]) if c.isupper() else lower[c] for c in t) for t in lhs.split(",")]


def _flatten_function(case: Case) -> Callable[..., np.ndarray]:
    flat_shapes = _flat_shapes(case)
    out_shape = case.output_shape
    subscripts = case.subscripts

    def flattened(*ops):
        flat = [op.reshape(shape) for op, shape in zip(ops, flat_shapes)]
        return np.einsum(subscripts, *flat, optimize="greedy").reshape(out_shape)

    return flattened


def build_methods(case: Case) -> dict[str, Callable[..., object] | Skip | Capped]:
    subscripts, expanded, kwargs = case.subscripts, case.expanded, case.kwargs
    contract = contractions.contract
    methods: dict[str, Callable[..., object] | Skip | Capped] = {}
    methods["contract"] = lambda *ops: contract(subscripts, *ops, **kwargs)
    iterations = naive_iterations(case)
    if iterations > NAIVE_EINSUM_MAX_ITERATIONS:
        methods["einsum"] = Skip(f"one nested loop of {iterations:.1e} iterations (seconds per call)")
    else:
        methods["einsum"] = lambda *ops: np.einsum(expanded, *ops)
    flops = greedy_flops(expanded, case.shapes)

    def greedy(*ops):
        return np.einsum(expanded, *ops, optimize=True)

    methods["einsum_greedy"] = (
        Capped(greedy, f"greedy path predicted at {flops:.1e} flops") if flops > GREEDY_MAX_FLOPS else greedy
    )
    expression = opt_einsum.contract_expression(expanded, *case.shapes)
    methods["opt_einsum"] = lambda *ops: expression(*ops)
    # a new user's call: the default optimizer ('auto': exact search below its hardness cutoff,
    # which every vocabulary string is, a few ms per case; otherwise a bounded random-greedy
    # hyper-search), built once outside timing like the opt_einsum expression
    tensor_network = cotengra.einsum_expression(expanded, *case.shapes)
    methods["cotengra"] = lambda *ops: tensor_network(*ops)
    einx_expression = _einx_expression(case)
    if not isinstance(einx_expression, Skip) and iterations > NAIVE_EINSUM_MAX_ITERATIONS:
        einx_expression = Skip(f"einx.dot runs np.einsum without a path: {iterations:.1e} iterations")
    if isinstance(einx_expression, Skip):
        methods["einx"] = einx_expression
    else:
        import einx

        methods["einx"] = lambda *ops: einx.dot(einx_expression, *ops)
    flat_flops = greedy_flops(case.subscripts, _flat_shapes(case))
    flatten = _flatten_function(case)
    if flat_flops > GREEDY_MAX_FLOPS:
        methods["flatten"] = Capped(flatten, f"greedy path predicted at {flat_flops:.1e} flops")
    else:
        methods["flatten"] = flatten
    return methods
