"""np.einsum's dialect inside the grouped one: '...', implicit output, 0-d operands, any letter.

The reference is always np.einsum itself, on the very string (numpy reads every letter as one
axis), or the loop oracle.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import (
    ContractionError,
    InconsistentError,
    SizeMismatchError,
    SubscriptsSyntaxError,
    UnderdeterminedError,
    contract,
    expand_subscripts,
    parse,
)

LETTERS = "abcd"
EXTENT = {"a": 2, "b": 3, "c": 1, "d": 2}


def _reference(subscripts, *operands):
    # numpy's C einsum refuses broadcast axes summed away; its pairwise path sums them
    return np.einsum(subscripts, *operands, optimize=True)


# ---------------------------------------------------------------------------- ellipsis
@st.composite
def ellipsis_calls(draw):
    """A random einsum with '...' in some terms, broadcast ranks 0..3 (size-1 axes included)."""
    n = draw(st.integers(1, 3))
    width = draw(st.integers(0, 3))
    full = [draw(st.sampled_from([1, 2, 3])) for _ in range(width)]
    terms, operands = [], []
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    any_ellipsis = False
    for _ in range(n):
        letters = draw(st.lists(st.sampled_from(LETTERS), max_size=3))
        has = draw(st.booleans())
        shape = [EXTENT[c] for c in letters]
        term = "".join(letters)
        if has:
            any_ellipsis = True
            rank = draw(st.integers(0, width))
            # a broadcast axis may be 1 where the others have the full extent
            bshape = [1 if draw(st.booleans()) else e for e in full[width - rank:]]
            at = draw(st.integers(0, len(letters)))
            term = term[:at] + "..." + term[at:]
            shape = shape[:at] + bshape + shape[at:]
        terms.append(term)
        operands.append(rng.standard_normal(tuple(shape)))
    mode = draw(st.sampled_from(["implicit", "explicit"]))
    if mode == "implicit":
        subscripts = ",".join(terms)
    else:
        used = sorted(set("".join(terms).replace(".", "")))
        out = draw(st.permutations(used))
        out = "".join(out[: draw(st.integers(0, len(out)))])
        if any_ellipsis and draw(st.booleans()):
            at = draw(st.integers(0, len(out)))
            out = out[:at] + "..." + out[at:]
        subscripts = ",".join(terms) + "->" + out
    return subscripts, operands


@settings(max_examples=300, deadline=None)
@given(ellipsis_calls())
def test_ellipsis_broadcasts_as_numpy_does(call):
    subscripts, operands = call
    want = _reference(subscripts, *operands)
    got = contract(subscripts, *operands)
    assert np.shape(got) == np.shape(want)
    assert np.allclose(got, want)


@pytest.mark.parametrize(
    "subscripts, shapes",
    [
        ("...ij,...jk->...ik", [(2, 3, 4), (5, 1, 4, 2)]),          # ranks differ, right-aligned
        ("...i,...i", [(4, 1, 3), (5, 3)]),                           # implicit: '...' leads
        ("ij...,j...", [(2, 3, 4), (3, 1)]),
        ("i...->...", [(2, 3, 4)]),
        ("...->", [(2, 3)]),
        ("...,...", [(), (2,)]),                                      # a 0-d operand
        ("...ii->...i", [(2, 3, 3)]),
        ("a...b,b...c->...ac", [(2, 4, 3), (3, 5, 1, 4)]),
    ],
)
def test_ellipsis_examples(subscripts, shapes):
    rng = np.random.default_rng(1)
    ops = [rng.standard_normal(s) for s in shapes]
    assert np.allclose(contract(subscripts, *ops), _reference(subscripts, *ops))


def test_ellipsis_coexists_with_groups():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 2, 3, 5))      # '...' = (4,), W = (2, 3) (from w), then a
    w = rng.standard_normal((2, 3, 5, 6))
    got = contract("...Wa,Wab->...Wb", x, w)
    assert np.allclose(got, np.einsum("zpqa,pqab->zpqb", x, w))
    # broadcast ranks may differ while the group is the same in both (no term without '...'
    # fixes W here, so the call says how many axes it has)
    y = rng.standard_normal((7, 1, 2, 3, 5))
    got = contract("...Wa,...Wa->...W", y, x, len_W=2)
    assert got.shape == (7, 4, 2, 3)
    assert np.allclose(got, np.einsum("uvpqa,vpqa->uvpq", y, x))


def test_a_group_only_beside_ellipses_is_underdetermined():
    with pytest.raises(UnderdeterminedError, match=r"do not determine.*'\.\.\.' fixes no length.*len_W"):
        contract("...W,...W->...", np.ones((2, 3)), np.ones((2, 3)))
    got = contract("...W,...W->...", np.ones((2, 3)), np.ones((2, 3)), len_W=1)
    assert np.allclose(got, np.full(2, 3.0))


def test_ellipsis_errors_quote_the_term():
    with pytest.raises(InconsistentError, match=r"operand 1 \(term '\.\.\.ij'\) has ndim 1, but its term needs at least 2"):
        contract("...ij,...ij->...", np.ones((2, 2)), np.ones(2))
    with pytest.raises(SizeMismatchError, match=r"'\.\.\.' axis 0 \(of 1, right-aligned\)"):
        contract("...i,...i->...", np.ones((2, 3)), np.ones((4, 3)))


def test_expansion_writes_the_ellipsis_as_fresh_axes():
    assert expand_subscripts("...ij,j->...i", 5, 1) == "ABCij,j->ABCi"
    assert expand_subscripts("...ij,...j", (4, 2, 3), (3,)) == "Aij,j->Ai"


# ---------------------------------------------------------------------- implicit output
@pytest.mark.parametrize(
    "subscripts, output",
    [("ij,jk", "ik"), ("ba", "ab"), ("ii", ""), ("i,i", ""), ("...ij,j", ".i"), ("Wba,W", "ab"),
     ("Wb,a", "Wab"), ("βα", "αβ")],
)
def test_implicit_output_is_numpys_rule(subscripts, output):
    assert parse(subscripts).output == output


def test_implicit_output_with_uppercase_matches_numpy():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal(4)
    # numpy sorts by code point: uppercase (groups here) before lowercase
    assert np.allclose(contract("ba,B", a, b), np.einsum("ba,B", a, b))


# ------------------------------------------------------------------------ any letter
def test_non_ascii_letters_are_single_axes():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    assert np.allclose(contract("αβ,βγ->αγ", a, b), a @ b)
    assert np.allclose(contract("Äé,éü", a, b), a @ b)    # non-ASCII uppercase: one axis
    assert np.allclose(contract("Wαβ,βγ->Wαγ", a[None], b), (a @ b)[None])


def test_many_axes_past_the_letters_do_not_collide_with_a_used_symbol():
    # 'À' is the first symbol handed out past the 52 ASCII letters: it is taken here
    x = np.ones((1,) * 53 + (2,))
    got = contract("WÀ->W", x, len_W=53)
    assert got.shape == (1,) * 53 and float(got.ravel()[0]) == 2.0


def test_an_empty_term_is_a_0d_operand():
    assert float(contract(",i->i", 2.0, np.ones(3))[1]) == 2.0
    assert float(contract("", 3.0)) == 3.0
    with pytest.raises(InconsistentError, match="exactly 0 axes"):
        contract(",i->i", np.ones(2), np.ones(3))


# ------------------------------------------------------------ uppercase stays a group
@st.composite
def uppercase_calls(draw):
    """A random einsum over letters numpy reads as single axes, uppercase among them."""
    alphabet = "abAB"
    extent = {"a": 2, "b": 3, "A": 2, "B": 3}
    n = draw(st.integers(1, 3))
    terms = [draw(st.text(st.sampled_from(alphabet), min_size=0, max_size=3)) for _ in range(n)]
    shapes = [[extent[c] for c in t] for t in terms]
    with_ellipsis = draw(st.booleans())
    if with_ellipsis:  # some terms get '...' of rank 0-2, right-aligned against (4, 1)
        for k in range(n):
            if draw(st.booleans()):
                rank, at = draw(st.integers(0, 2)), draw(st.integers(0, len(terms[k])))
                terms[k] = terms[k][:at] + "..." + terms[k][at:]
                shapes[k] = shapes[k][:at] + [4, 1][2 - rank:] + shapes[k][at:]
    if draw(st.booleans()):
        subscripts = ",".join(terms)
    else:
        used = sorted(set("".join(terms).replace(".", "")))
        perm = draw(st.permutations(used))
        out = "".join(perm[: draw(st.integers(0, len(perm)))])
        if any("..." in t for t in terms):
            out += "..."
        subscripts = ",".join(terms) + "->" + out
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    ops = [rng.standard_normal(tuple(shape)) for shape in shapes]
    return subscripts, ops


@settings(max_examples=400, deadline=None)
@given(uppercase_calls())
def test_where_uppercase_reads_differently_the_answer_is_the_same_or_refused(call):
    subscripts, ops = call
    want = np.einsum(subscripts, *ops)
    try:
        got = contract(subscripts, *ops)
    except (UnderdeterminedError, SubscriptsSyntaxError) as err:
        # refused, with advice: a len_<G> to pass or a spelling to change
        assert "len_" in str(err) or "lowercase" in str(err)
        return
    assert np.shape(got) == np.shape(want)
    assert np.allclose(got, want)


def test_a_repeated_uppercase_letter_is_refused_with_advice():
    # numpy takes a diagonal over 'A'; here 'A' is a group, which may appear once per term
    with pytest.raises(SubscriptsSyntaxError, match="spell its axes with lowercase letters"):
        contract("AA->A", np.ones((2, 2)))


def test_every_refusal_is_a_contraction_error():
    with pytest.raises(ContractionError):
        contract("a....->a", np.ones(2))


# ------------------------------------------------------------------ the loop oracle too
@settings(max_examples=150, deadline=None)
@given(ellipsis_calls())
def test_the_loop_oracle_reads_ellipses_as_numpy_does(call):
    from contractions.testing.oracle import loop_contract

    subscripts, operands = call
    want = _reference(subscripts, *operands)
    got = loop_contract(subscripts, operands, {})
    assert np.shape(got) == np.shape(want)
    assert np.allclose(got, want)


def test_the_loop_oracle_with_groups_ellipses_and_any_letter():
    from contractions.testing.oracle import loop_contract

    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 2, 3, 5))
    w = rng.standard_normal((2, 3, 5, 6))
    want = np.einsum("zpqa,pqab->zpqb", x, w)
    assert np.allclose(loop_contract("...Wα,Wαβ->...Wβ", [x, w], {"W": (2, 3)}), want)
    assert np.allclose(contract("...Wα,Wαβ->...Wβ", x, w), want)


@pytest.mark.parametrize("subscripts", ["...Wa,Wab->...Wb", "...a,a...->...", "ij...,j->...i", "...ii->...i"])
def test_the_harness_shape_matrix_covers_ellipses(subscripts):
    from contractions.testing.cases import random_operands, shape_matrix
    from contractions.testing.oracle import loop_contract

    cases = shape_matrix(subscripts)
    assert "ellipsis-broadcast" in [c.name for c in cases]
    for case in cases:
        ops = random_operands(subscripts, case)
        want = loop_contract(subscripts, ops, case.group_shapes)
        got = contract(subscripts, *ops)
        assert np.shape(got) == np.shape(want) and np.allclose(got, want), case.name


def test_the_harness_call_site_and_split_cases_cover_ellipses():
    from contractions.testing.cases import call_site_cases, random_operands, split_case
    from contractions.testing.oracle import loop_contract

    subscripts = "...KCa,Cab->...KCb"
    cases = [*call_site_cases(subscripts, {}), split_case(subscripts, ("K",))[0]]
    for case in cases:
        ops = random_operands(subscripts, case)
        want = loop_contract(subscripts, ops, case.group_shapes)
        got = contract(subscripts, *ops, len_K=len(case.group_shapes["K"]))
        assert np.shape(got) == np.shape(want) and np.allclose(got, want), case.name
