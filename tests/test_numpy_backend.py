"""The numpy planner/executor on integer labels, against independent references.

References: ``np.einsum`` on a letter string (<= 52 labels), a brute-force loop over every label
assignment, and, for more than 52 labels, a chain of ``np.einsum`` calls on relabelled pieces.
Every case runs both strategies (``direct`` single einsum and ``pairwise`` BLAS steps) so the size
threshold cannot hide a bug in either.  No timings here: speed lives in ``bench/``.
"""

from __future__ import annotations

import itertools
import string

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contractions.backends.numpy_backend import (
    NumpyProgram,
    build_program,
    build_program_with,
)
from contractions.model.numpy_prices import NUMPY_MODEL

LETTERS = string.ascii_lowercase + string.ascii_uppercase
STRATEGIES = ("direct", "pairwise")


# ------------------------------------------------------------------------------- references
def parse_letters(subscripts: str) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    lhs, out = subscripts.split("->")
    return tuple(tuple(LETTERS.index(c) for c in term) for term in lhs.split(",")), tuple(
        LETTERS.index(c) for c in out
    )


def letters_of(inputs, output) -> str:
    names = {}
    for label in [lab for term in inputs for lab in term]:
        names.setdefault(label, LETTERS[len(names)])
    return (
        ",".join("".join(names[lab] for lab in t) for t in inputs)
        + "->"
        + "".join(names[lab] for lab in output)
    )


def loop_reference(inputs, output, arrays):
    """Definition by brute force: for every assignment of all labels, add the product."""
    extents: dict[int, int] = {}
    for term, array in zip(inputs, arrays):
        for label, n in zip(term, array.shape):
            if extents.get(label, 1) == 1:
                extents[label] = n
    labels = sorted(extents)
    dtype = np.result_type(*arrays)
    result = np.zeros(tuple(extents[lab] for lab in output), dtype=dtype)
    for values in itertools.product(*(range(extents[lab]) for lab in labels)):
        at = dict(zip(labels, values))
        product = np.ones((), dtype=dtype)
        for term, array in zip(inputs, arrays):
            # size-1 axes broadcast: index 0 whatever the label's value
            index = tuple(0 if n == 1 else at[lab] for lab, n in zip(term, array.shape))
            product = product * array[index]
        key = tuple(at[lab] for lab in output)
        result[key] += product
    return result


def einsum_chain_reference(inputs, output, arrays):
    """Left-to-right chain of np.einsum, each pair relabelled to letters (no 52-letter limit
    overall as long as each pair has <= 52 distinct labels)."""
    acc_labels, acc = tuple(inputs[0]), arrays[0]
    for k in range(1, len(inputs)):
        needed = set(output).union(*map(set, inputs[k + 1 :]))
        pair = (acc_labels, tuple(inputs[k]))
        kept = list(dict.fromkeys(lab for term in pair for lab in term if lab in needed))
        acc = np.einsum(letters_of(pair, kept), acc, arrays[k])
        acc_labels = tuple(kept)
    return np.einsum(letters_of((acc_labels,), output), acc)


def run_both(inputs, output, arrays):
    shapes = tuple(a.shape for a in arrays)
    results = {}
    for strategy in STRATEGIES:
        program = build_program_with(strategy, inputs, output, shapes)
        results[strategy] = program(*arrays)
    return results


def assert_matches(actual, expected, dtype=None):
    actual = np.asarray(actual)
    assert isinstance(actual, np.ndarray)
    assert actual.shape == np.shape(expected)
    assert actual.dtype == np.asarray(expected).dtype
    if actual.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
    else:
        tol = 1e-4 if actual.dtype in (np.float32, np.complex64) else 1e-10
        np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol)


def random_arrays(shapes, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for shape in shapes:
        if np.dtype(dtype).kind == "b":
            out.append(rng.random(shape) < 0.5)
        elif np.dtype(dtype).kind in "iu":
            out.append(rng.integers(-3 if np.dtype(dtype).kind == "i" else 0, 4, shape).astype(dtype))
        elif np.dtype(dtype).kind == "c":
            out.append((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype))
        else:
            out.append(rng.standard_normal(shape).astype(dtype))
    return out


# ------------------------------------------------------------------------------- fixed cases
CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(5, 3, 4), (5, 4, 6)]),
    ("ij->ji", [(3, 4)]),
    ("ij->ij", [(3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii->", [(3, 3)]),
    ("iji->j", [(3, 4, 3)]),
    ("iii->i", [(3, 3, 3)]),
    ("iij,jk->ik", [(3, 3, 4), (4, 5)]),
    ("abc,cbd,abd->ab", [(2, 3, 4), (4, 3, 5), (2, 3, 5)]),
    ("ij,kl->ijkl", [(2, 3), (4, 5)]),
    ("ij,kl->", [(2, 3), (4, 5)]),
    ("i,i->", [(7,), (7,)]),
    ("i,i->i", [(7,), (7,)]),
    ("ab,ab->ba", [(3, 4), (3, 4)]),
    ("ij,j->i", [(1, 4), (4,)]),  # size-1 broadcast
    ("ij,jk->ik", [(3, 1), (5, 6)]),  # contracted label of size 1 on one side
    ("ij,ij->ij", [(3, 1), (1, 6)]),  # two-way broadcast
    ("ij,jk->ik", [(1, 1), (1, 1)]),
    ("ij,jk->", [(3, 0), (0, 6)]),  # zero-size contracted axis
    ("ij,jk->ik", [(0, 4), (4, 6)]),  # zero-size output axis
    ("ij,j->i", [(0, 0), (0,)]),
    (",ij->ij", [(), (2, 3)]),  # empty label set (scalar operand)
    (",->", [(), ()]),
    ("i->", [(5,)]),
    ("abcd,dcbe->ae", [(3, 4, 5, 6), (6, 5, 4, 2)]),
    ("wca,caib,wci->wcb", [(6, 4, 3), (4, 3, 2, 5), (6, 4, 2)]),
    ("xa,ab,bc,cd,dy->xy", [(4, 3), (3, 5), (5, 1), (1, 6), (6, 2)]),
    ("abi,bci,cai->i", [(2, 3, 4), (3, 5, 4), (5, 2, 4)]),
    ("ab,bc,ca->", [(3, 4), (4, 5), (5, 3)]),
    ("aij,ajk,akl->ail", [(4, 3, 3), (4, 3, 3), (4, 3, 3)]),
]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("subscripts", "shapes"), CASES, ids=[c[0] for c in CASES])
def test_matches_numpy_einsum(subscripts, shapes, strategy):
    inputs, output = parse_letters(subscripts)
    arrays = random_arrays(shapes)
    program = build_program_with(strategy, inputs, output, tuple(map(tuple, shapes)))
    assert program.strategy == strategy
    assert_matches(program(*arrays), np.einsum(subscripts, *arrays))


@pytest.mark.parametrize(("subscripts", "shapes"), CASES[:12], ids=[c[0] for c in CASES[:12]])
def test_matches_loop_definition(subscripts, shapes):
    inputs, output = parse_letters(subscripts)
    arrays = random_arrays(shapes, seed=1)
    expected = loop_reference(inputs, output, arrays)
    for result in run_both(inputs, output, arrays).values():
        assert_matches(result, expected)


def test_labels_are_arbitrary_ints_not_positions():
    inputs, output = ((1000, 7), (7, 123456)), (123456, 1000)
    arrays = random_arrays([(3, 4), (4, 5)])
    for result in run_both(inputs, output, arrays).values():
        assert_matches(result, np.einsum("ij,jk->ki", *arrays))


def test_mid_size_batched_contraction_runs_on_matmul():
    # Structure, not speed: the batched pairwise step is a BLAS matmul, the private axis is
    # summed before pairing, and the plan comes from real sizes.
    inputs, output = parse_letters("bijp,bjk->bik")
    shapes = ((16, 32, 32, 3), (16, 32, 32))
    program = build_program(inputs, output, shapes)
    assert program.strategy == "pairwise"
    prep_x, prep_y = program.schedule.preparations
    assert prep_x.sum_axes == (3,) and prep_x.labels == inputs[0][:3]   # p summed before pairing
    assert prep_y.is_identity
    (step,) = program.schedule.steps
    assert step.kernel == "matmul" and step.batch == (inputs[0][0],) and step.contract == (inputs[0][2],)
    arrays = random_arrays(shapes)
    assert_matches(program(*arrays), np.einsum("bijp,bjk->bik", *arrays))


def test_tiny_problem_takes_the_direct_path_and_large_one_does_not():
    inputs, output = parse_letters("ij,jk->ik")
    assert build_program(inputs, output, ((2, 3), (3, 4))).strategy == "direct"
    assert build_program(inputs, output, ((2, 3), (3, 4))).einsum == "ab,bc->ac"
    side = int(round(NUMPY_MODEL.profile.direct_max_naive ** (1 / 3))) + 2
    assert build_program(inputs, output, ((side,) * 2,) * 2).strategy == "pairwise"


def test_build_program_is_cached_and_bounded():
    key = (((0, 1), (1, 2)), (0, 2), ((2, 3), (3, 4)))
    assert build_program(*key) is build_program(*key)
    assert build_program.cache_info().maxsize is not None


def test_program_is_frozen():
    program = build_program(((0,),), (0,), ((3,),))
    assert isinstance(program, NumpyProgram)
    with pytest.raises(AttributeError):
        program.schedule = None  # type: ignore[misc]


def test_build_program_with_rejects_unknown_strategy_and_direct_past_52_labels():
    with pytest.raises(ValueError, match="strategy"):
        build_program_with("fast", ((0,),), (0,), ((3,),))
    many = tuple(range(60))
    with pytest.raises(ValueError, match="52"):
        build_program_with("direct", (many,), many, ((1,) * 60,))


# ------------------------------------------------------------------------------- > 52 labels
def test_chain_of_61_labels_matches_matrix_product():
    count = 60
    inputs = tuple((k, k + 1) for k in range(count))
    output = (0, count)
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((2, 2)) / 1.5 for _ in range(count)]
    program = build_program(inputs, output, tuple(a.shape for a in arrays))
    assert program.strategy == "pairwise"
    assert program.einsum is None  # no letter string exists
    assert_matches(program(*arrays), np.linalg.multi_dot(arrays))


def test_sixty_labels_with_shared_batch_and_traces_match_einsum_chain():
    # 5 operands x 12 own labels + a shared batch label + a diagonal pair: 61 distinct labels.
    batch = 999
    inputs, shapes = [], []
    rng = np.random.default_rng(4)
    for k in range(5):
        own = list(range(12 * k, 12 * k + 12))
        term = [batch, *own]
        if k == 2:
            term.append(own[0])  # repeated label: diagonal
        inputs.append(tuple(term))
        shapes.append(tuple(3 if lab == batch else (2 if lab % 5 == 0 else 1) for lab in term))
    # adjacent operands share one label so the network is connected
    inputs = [term + ((12 * (k + 1),) if k < 4 else ()) for k, term in enumerate(inputs)]
    shapes = [shape + ((2,) if k < 4 else ()) for k, shape in enumerate(shapes)]
    output = (batch, 5, 59)
    arrays = [rng.standard_normal(s) for s in shapes]
    assert len({lab for term in inputs for lab in term}) > 52
    program = build_program(tuple(inputs), output, tuple(shapes))
    expected = einsum_chain_reference(inputs, output, arrays)
    assert_matches(program(*arrays), expected)


def test_sixty_labels_against_loop_definition():
    # Mostly size-1 labels keep the brute-force loop small while 60 distinct labels flow through.
    inputs = (tuple(range(0, 25)), tuple(range(20, 45)), tuple(range(40, 60)) + (0,))

    def extent(label):
        return {0: 2, 22: 3, 41: 2, 50: 2}.get(label, 1)

    shapes = tuple(tuple(extent(lab) for lab in term) for term in inputs)
    output = (50, 0)
    arrays = random_arrays(shapes, seed=5)
    program = build_program(inputs, output, shapes)
    assert_matches(program(*arrays), loop_reference(inputs, output, arrays))


# ------------------------------------------------------------------------------- dtypes
DTYPE_PAIRS = [
    (np.float64, np.float64),
    (np.float32, np.float32),
    (np.float32, np.float64),
    (np.int32, np.int32),
    (np.int8, np.uint8),
    (np.int32, np.float32),
    (np.int64, np.float64),
    (np.complex128, np.float64),
    (np.complex64, np.float32),
    (np.bool_, np.bool_),
    (np.bool_, np.int16),
]


@pytest.mark.parametrize(
    ("left", "right"), DTYPE_PAIRS, ids=[f"{a.__name__}-{b.__name__}" for a, b in DTYPE_PAIRS]
)
@pytest.mark.parametrize(
    ("subscripts", "shapes"),
    [
        ("bij,bjk->bik", [(3, 4, 5), (3, 5, 2)]),
        ("ijp,jk->ik", [(4, 5, 3), (5, 2)]),  # private sum on the left operand
        ("ii,i->i", [(4, 4), (4,)]),
        ("i,i->", [(6,), (6,)]),
        ("ij,k->ijk", [(2, 3), (4,)]),
    ],
)
def test_dtype_promotion_matches_einsum(left, right, subscripts, shapes):
    inputs, output = parse_letters(subscripts)
    a = random_arrays([shapes[0]], dtype=left, seed=6)[0]
    b = random_arrays([shapes[1]], dtype=right, seed=7)[0]
    expected = np.einsum(subscripts, a, b)
    for strategy, result in run_both(inputs, output, [a, b]).items():
        assert np.asarray(result).dtype == np.asarray(expected).dtype, strategy
        assert_matches(result, expected)


def test_single_operand_int_sum_keeps_dtype():
    x = np.arange(12, dtype=np.int8).reshape(3, 4)
    for result in run_both(((0, 1),), (0,), [x]).values():
        assert result.dtype == np.einsum("ij->i", x).dtype == np.int8


def test_scalar_output_is_a_zero_dim_array():
    for result in run_both(((0,), (0,)), (), random_arrays([(3,), (3,)])).values():
        assert isinstance(result, np.ndarray) and result.shape == ()
    big = random_arrays([(5000,), (5000,)])
    result = build_program(((0,), (0,)), (), ((5000,), (5000,)))(*big)
    assert isinstance(result, np.ndarray) and result.shape == ()


# ------------------------------------------------------------------------------- memory safety
@pytest.mark.parametrize(
    ("subscripts", "shape"),
    [
        ("ij->ji", (3, 4)),
        ("ij->ij", (3, 4)),
        ("ii->i", (3, 3)),
        ("ij->i", (3, 1)),
        ("i->i", (1,)),
        ("->", ()),
    ],
)
def test_result_never_aliases_the_input(subscripts, shape):
    inputs, output = parse_letters(subscripts)
    x = random_arrays([shape])[0]
    keep = x.copy()
    for result in run_both(inputs, output, [x]).values():
        assert not np.shares_memory(result, x)
        result[...] = 42.0
        np.testing.assert_array_equal(x, keep)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("subscripts", "shapes"), CASES, ids=[c[0] for c in CASES])
def test_inputs_are_never_modified(subscripts, shapes, strategy):
    inputs, output = parse_letters(subscripts)
    arrays = random_arrays(shapes, seed=8)
    copies = [a.copy() for a in arrays]
    for a in arrays:
        a.flags.writeable = False  # any in-place write would raise
    build_program_with(strategy, inputs, output, tuple(map(tuple, shapes)))(*arrays)
    for a, c in zip(arrays, copies):
        np.testing.assert_array_equal(a, c)


def test_non_contiguous_inputs():
    rng = np.random.default_rng(9)
    a = np.asfortranarray(rng.standard_normal((6, 5, 4)))
    b = rng.standard_normal((8, 5, 12))[::2, :, ::3]
    subscripts = "bij,kjb->bik"
    inputs, output = parse_letters(subscripts)
    b = b.transpose(2, 1, 0)[:, :, :4]  # (4, 5, 4) strided view
    a = a[:4].transpose(2, 1, 0)[:, :, :4].transpose(0, 2, 1)  # shape (4, 4, 5)
    for result in run_both(inputs, output, [a, b]).values():
        assert_matches(result, np.einsum(subscripts, a, b))


# ------------------------------------------------------------------------------- hypothesis
@st.composite
def contraction_problems(draw, max_labels=6, max_operands=4):
    """Random label structures: diagonals, size-1 broadcasting, zero-size axes, empty terms,
    empty outputs, outer products and single operands."""
    n_labels = draw(st.integers(1, max_labels))
    extents = draw(st.lists(st.sampled_from([0, 1, 2, 3, 4]), min_size=n_labels, max_size=n_labels))
    # keep zero-size labels rare so most examples carry data
    extents = [n if n != 0 or draw(st.integers(0, 2)) == 0 else 2 for n in extents]
    n_ops = draw(st.integers(1, max_operands))
    inputs, shapes = [], []
    for _ in range(n_ops):
        length = draw(st.sampled_from([0, 1, 2, 2, 3, 3, 4]))
        term = draw(st.lists(st.integers(0, n_labels - 1), min_size=length, max_size=length))
        shape = []
        first_extent = {}
        for label in term:
            if label in first_extent:  # a diagonal repeats the same extent
                shape.append(first_extent[label])
                continue
            broadcast = extents[label] != 1 and draw(st.integers(0, 5)) == 0
            first_extent[label] = 1 if broadcast else extents[label]
            shape.append(first_extent[label])
        inputs.append(tuple(term))
        shapes.append(tuple(shape))
    present = sorted({lab for term in inputs for lab in term})
    output = tuple(draw(st.permutations(present))[: draw(st.sampled_from(range(len(present) + 1)))])
    dtype = draw(st.sampled_from([np.float64, np.float64, np.int64, np.complex128, np.bool_]))
    return tuple(inputs), output, tuple(shapes), dtype


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contraction_problems(), st.integers(0, 2**16))
def test_random_structures_match_numpy_einsum(problem, seed):
    inputs, output, shapes, dtype = problem
    arrays = random_arrays(shapes, dtype=dtype, seed=seed)
    expected = np.einsum(letters_of(inputs, output), *arrays)
    for strategy, result in run_both(inputs, output, arrays).items():
        assert not any(np.shares_memory(result, a) for a in arrays), strategy
        assert_matches(result, expected)


@st.composite
def many_label_problems(draw):
    """More than 52 distinct labels, local to sliding windows so the references stay cheap."""
    n_ops = draw(st.integers(8, 10))
    inputs, shapes = [], []
    extent_of: dict[int, int] = {}
    for k in range(n_ops):
        window = range(8 * k, 8 * k + 11)  # overlaps the next operand's window by 3 labels
        term = draw(st.lists(st.sampled_from(window), min_size=8, max_size=10, unique=True))
        for label in term:
            extent_of.setdefault(label, draw(st.sampled_from([1, 1, 2, 3])))
        inputs.append(tuple(term))
        shapes.append(tuple(extent_of[lab] for lab in term))
    present = sorted({lab for term in inputs for lab in term})
    output = tuple(draw(st.permutations(present))[: draw(st.integers(0, 4))])
    return tuple(inputs), output, tuple(shapes)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(many_label_problems(), st.integers(0, 2**16))
def test_random_structures_past_52_labels_match_einsum_chain(problem, seed):
    inputs, output, shapes = problem
    arrays = random_arrays(shapes, seed=seed)
    # tame magnitudes so long chains stay well-conditioned for the tolerance
    arrays = [a / max(1.0, float(np.sqrt(a.size))) for a in arrays]
    program = build_program(inputs, output, shapes)
    result = program(*arrays)
    expected = einsum_chain_reference(inputs, output, arrays)
    if len({lab for term in inputs for lab in term}) > 52:
        assert program.einsum is None
    assert_matches(result, expected)
