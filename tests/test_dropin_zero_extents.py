"""Extents of 0, and calls whose every operand has one element, under every ``optimize=`` and
every ``memory_limit=`` down to 1: numpy's answer, from a schedule with no blocks.

Such a call has nothing to multiply (a zero extent makes the result all zeros, maybe empty), so
it runs as one einsum call, which allocates nothing beyond its result: no path search beyond
the trivial one and no block search, whose sizes mean nothing on an empty extent (it used to
loop there for minutes). The schedule's ``blocking`` being None is that construction, checked;
the answers are checked against np.einsum.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import contract, contract_expression, contract_path, explanation

LETTERS = "abcdef"
OPTIMIZERS = ["auto", "greedy", "optimal", "dp", "branch-2", "branch-all", "random-greedy",
              "auto-hq", False, True, None]
LIMITS = [1, 2, 3, 64, "max_input", "default", None]


@st.composite
def trivial_calls(draw):
    """(subscripts, operand shapes, an explicit path): some extent 0, or every extent 1."""
    n = draw(st.integers(1, 4))
    terms = [draw(st.text(LETTERS, min_size=0, max_size=3)) for _ in range(n)]
    used = sorted(set("".join(terms)))
    output = "".join(draw(st.permutations(used))[:draw(st.integers(0, len(used)))])
    if draw(st.booleans()) and used:
        extents = {ch: draw(st.integers(0, 3)) for ch in used}
        extents[draw(st.sampled_from(used))] = 0
    else:
        extents = dict.fromkeys(used, 1)
    shapes = [tuple(extents[ch] for ch in term) for term in terms]
    path, left = [], n
    while left > 1:
        i = draw(st.integers(0, left - 1))
        j = draw(st.integers(0, left - 2))
        path.append((i, j + (j >= i)))
        left -= 1
    return ",".join(terms) + "->" + output, shapes, path


def _operands(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) if s else np.float64(rng.standard_normal()) for s in shapes]


@settings(max_examples=150, deadline=None)
@given(trivial_calls(), st.sampled_from([*OPTIMIZERS, "explicit path"]), st.sampled_from(LIMITS),
       st.integers(0, 2**16))
def test_nothing_to_multiply_gives_numpys_answer_unblocked(call, optimize, limit, seed):
    subscripts, shapes, path = call
    if optimize == "explicit path":
        optimize = path or [(0,)]
    ops = _operands(shapes, seed)
    want = np.einsum(subscripts, *ops)
    got = contract(subscripts, *ops, optimize=optimize, memory_limit=limit)
    assert np.shape(got) == np.shape(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    report = explanation(subscripts, *ops, optimize=optimize, memory_limit=limit)
    assert report.blocking is None
    assert report.peak_extra == 0      # one einsum call: nothing beyond the result


ISSUE_CALLS = [
    ("cx,xxx,bm,b->cm", [(1, 4), (4, 4, 4), (0, 1), (0,)], {"optimize": "dp"}),
    ("a,b->", [(0,), (2,)], {"optimize": "greedy", "memory_limit": 1}),
    ("m,ddb->d", [(2,), (5, 5, 0)], {"optimize": "dp", "memory_limit": 1}),
    ("f,h,hh->f", [(0,), (2,), (2, 2)], {"optimize": "dp"}),
    ("ij,jk,kl->il", [(30, 0), (0, 40), (40, 50)], {"optimize": "greedy", "memory_limit": 1}),
]


@pytest.mark.parametrize("subscripts, shapes, kwargs", ISSUE_CALLS)
def test_zero_extents_that_hung_or_raised(subscripts, shapes, kwargs):
    ops = [np.ones(s) for s in shapes]
    want = np.einsum(subscripts, *ops)
    got = contract(subscripts, *ops, **kwargs)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_array_equal(got, want)
    expr = contract_expression(subscripts, *shapes, **kwargs)
    np.testing.assert_array_equal(expr(*ops), want)
    path, info = contract_path(subscripts, *ops, **kwargs)
    assert info.opt_cost >= 0 and len(path) == len(shapes) - 1


def test_all_scalar_calls_under_a_bound():
    operands = (np.complex128(1 + 2j), 1.0, np.float32(3))
    want = np.einsum(",,->", *operands)
    for optimize in ("greedy", "dp", [(0, 1), (0, 1)], False):
        for limit in ("max_input", 1):
            got = contract(",,->", *operands, optimize=optimize, memory_limit=limit)
            assert type(got) is type(want) and got == want
