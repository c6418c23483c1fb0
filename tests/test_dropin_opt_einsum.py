"""opt_einsum's API: contract_path and PathInfo, backend=, use_blas=, constants=, expression
calls with out=/backend=, every optimize= form, zero extents with every optimizer."""

import numpy as np
import opt_einsum as oe
import pytest
from opt_einsum.contract import infer_backend

from contractions import (
    KeywordError,
    OperandCountError,
    PathInfo,
    contract,
    contract_expression,
    contract_path,
)

ATTRIBUTES = ("contraction_list", "opt_cost", "naive_cost", "speedup", "size_list", "scale_list",
              "largest_intermediate", "eq", "shapes", "path")


def _operands(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


@pytest.mark.parametrize(
    "subscripts, shapes",
    [
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
        ("ab,bc,cd,de->ae", [(3, 4), (4, 5), (5, 2), (2, 6)]),
        ("ij,jk", [(2, 3), (3, 4)]),
        ("ii->i", [(3, 3)]),
        ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ],
)
def test_path_info_is_opt_einsums_for_the_same_path(subscripts, shapes):
    ops = _operands(shapes)
    path, info = contract_path(subscripts, *ops)
    assert isinstance(info, PathInfo) and isinstance(path, list)
    _, theirs = oe.contract_path(subscripts, *ops, optimize=path)
    for name in ATTRIBUTES:
        assert getattr(info, name) == getattr(theirs, name), name
    assert str(info) == str(theirs)
    assert "Complete contraction" in str(info) and "Theoretical speedup" in str(info)
    # the path runs: passed back as optimize=, it gives np.einsum's answer
    np.testing.assert_allclose(contract(subscripts, *ops, optimize=path), np.einsum(subscripts, *ops))


def test_contract_path_of_a_grouped_string_describes_its_expansion():
    ops = _operands([(4, 2, 3), (2, 3, 5, 6), (4, 2, 5)])
    path, info = contract_path("WCa,Caib,WCi->WCb", *ops)
    assert info.eq == "ABa,Baib,ABi->ABb"
    _, theirs = oe.contract_path("ABa,Baib,ABi->ABb", *ops, optimize=path)
    assert (info.opt_cost, info.size_list) == (theirs.opt_cost, theirs.size_list)


def test_contract_path_takes_shapes_sublists_and_len():
    path, info = contract_path("ij,jk->ik", (2, 3), (3, 4), shapes=True)
    assert path == [(0, 1)] and info.opt_cost == oe.contract_path("ij,jk->ik", (2, 3), (3, 4), shapes=True)[1].opt_cost
    a, b = _operands([(2, 3), (3, 4)])
    assert contract_path(a, [0, 1], b, [1, 2], [0, 2])[0] == [(0, 1)]
    assert contract_path("WCo,WCa->Cao", (3, 2, 5), (3, 2, 4), shapes=True, len_W=1)[1].eq == "ABo,ABa->Bao"


# ------------------------------------------------------------------------------- backend=
@pytest.mark.parametrize("backend", ["numpy", "auto", None])
def test_backend_numpy_or_auto(backend):
    a, b = _operands([(2, 3), (3, 4)])
    got = contract("ij,jk->ik", a, b, backend=backend)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, a @ b)


@pytest.mark.parametrize("backend, module", [("torch", "torch"), ("jax", "jax"), ("dask", "dask.array")])
def test_backend_by_opt_einsums_name_converts_numpy_operands(backend, module):
    pytest.importorskip(module)
    a, b = _operands([(2, 3), (3, 4)])
    got = contract("ij,jk->ik", a, b, backend=backend)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5)
    scalar = contract("i,i->", a[0], a[0], backend=backend)
    assert isinstance(scalar, np.generic)


def test_an_unknown_backend_is_refused_with_the_names():
    with pytest.raises(ValueError, match="backend='tensorflow' is not supported.*'torch'"):
        contract("ij->i", np.ones((2, 3)), backend="tensorflow")


def test_use_blas_is_accepted():
    a, b = _operands([(2, 3), (3, 4)])
    for use_blas in (True, False):
        np.testing.assert_allclose(contract("ij,jk->ik", a, b, use_blas=use_blas), a @ b)


# --------------------------------------------------------------------------- expressions
def test_constants_are_fixed_once_and_the_call_takes_the_rest():
    a, b, c = _operands([(2, 3), (3, 4), (4, 5)])
    expr = contract_expression("ij,jk,kl->il", a.shape, b, c.shape, constants=[1])
    assert sorted(expr.constants) == [1]
    np.testing.assert_allclose(expr(a, c), a @ b @ c)
    theirs = oe.contract_expression("ij,jk,kl->il", a.shape, b, c.shape, constants=[1])
    np.testing.assert_allclose(expr(a, c), theirs(a, c))
    with pytest.raises(OperandCountError, match="takes exactly 2 operands"):
        expr(a, b, c)


def test_constants_must_be_arrays():
    with pytest.raises(TypeError, match="pass that operand's array"):
        contract_expression("ij,jk->ik", (2, 3), (3, 4), constants=[0])


def test_an_expression_writes_into_out_and_runs_on_a_backend():
    a, b = _operands([(2, 3), (3, 4)])
    expr = contract_expression("ij,jk->ik", a.shape, b.shape)
    out = np.empty((2, 4))
    assert expr(a, b, out=out) is out
    np.testing.assert_allclose(out, a @ b)
    with pytest.raises(TypeError, match="cannot hold"):
        expr(a, b, out=np.empty((2, 4), np.float32))
    pytest.importorskip("torch")
    got = expr(a, b, backend="torch")
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, a @ b, rtol=1e-6)


# ----------------------------------------------------------------------------- optimize=
OPTIMIZE_FORMS = [None, True, False, "greedy", "optimal", "dp", "auto", "auto-hq", "branch-2",
                  "branch-all", "random-greedy", "random-greedy-128", ("greedy", 0), ("optimal", 10**6),
                  ["einsum_path", (0, 1), (0, 1)], [(0, 1), (0, 1)], [(1, 2), (0, 1)],
                  oe.paths.DynamicProgramming(), oe.RandomGreedy(max_repeats=4)]


@pytest.mark.parametrize("optimize", OPTIMIZE_FORMS, ids=repr)
def test_every_optimize_form(optimize):
    ops = _operands([(2, 3), (3, 4), (4, 5)])
    np.testing.assert_allclose(contract("ij,jk,kl->il", *ops, optimize=optimize),
                               np.einsum("ij,jk,kl->il", *ops))


@pytest.mark.parametrize("optimize", sorted(oe.paths._PATH_OPTIONS) + [False, ("greedy", 0)], ids=repr)
@pytest.mark.parametrize("shapes", [[(2, 0), (0, 4), (4, 5)], [(2, 3), (3, 4), (4, 0)],
                                    [(0, 0), (0, 0), (0, 0)]])
def test_zero_extents_with_every_optimizer(optimize, shapes):
    ops = [np.ones(s) for s in shapes]
    got = contract("ij,jk,kl->il", *ops, optimize=optimize)
    want = np.einsum("ij,jk,kl->il", *ops)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert contract_path("ij,jk,kl->il", *ops, optimize=optimize)[1].opt_cost >= 0


def test_constants_are_converted_once_per_library():
    torch = pytest.importorskip("torch")
    a, b, c = _operands([(2, 3), (3, 4), (4, 5)])
    expr = contract_expression("ij,jk,kl->il", a.shape, b, c.shape, constants=[1])
    first = expr(torch.from_numpy(a), torch.from_numpy(c))
    assert isinstance(first, torch.Tensor)
    np.testing.assert_allclose(first.numpy(), a @ b @ c)
    cached = expr._converted[("torch", "cpu")][1]
    assert isinstance(cached, torch.Tensor)
    expr(torch.from_numpy(a), torch.from_numpy(c))
    assert expr._converted[("torch", "cpu")][1] is cached


# ------------------------------------------------------ constants on JAX and torch, object
@pytest.mark.parametrize("library", ["jax", "torch"])
@pytest.mark.parametrize("constants", [{0, 1}, {0, 2}, {1, 2}])
def test_constants_of_a_framework_as_opt_einsum_holds_them(library, constants):
    module = pytest.importorskip(library)
    convert = (lambda a: module.numpy.asarray(a)) if library == "jax" else module.from_numpy
    shapes = [(2, 3), (3, 4), (4, 5)]
    arrays = _operands(shapes, seed=4)
    (free,) = {0, 1, 2} - constants
    given = [convert(a) if k in constants else a.shape for k, a in enumerate(arrays)]
    ours = contract_expression("ij,jk,kl->li", *given, constants=constants)
    theirs = oe.contract_expression("ij,jk,kl->li", *given, constants=constants)
    got = ours(convert(arrays[free]), backend=library)
    want = theirs(convert(arrays[free]), backend=library)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    held = ours._evaluated_constants[library]
    assert [k for k, c in enumerate(held) if c is not None] == sorted(constants)
    assert all(infer_backend(c).startswith(library) for c in held if c is not None)
    # (opt_einsum may fold its constants together first: its list can be shorter; what its
    # tests read is that every constant held is the library's array)
    assert all(infer_backend(c).startswith(library) for c in theirs._evaluated_constants[library]
               if c is not None)


@pytest.mark.parametrize("subscripts, shapes", [("ab,bc->ca", [(2, 3), (3, 4)]), ("ijk,ikj", [(2, 3, 3), (2, 3, 3)]),
                                                ("abc,bcd,dea", [(2, 3, 4), (3, 4, 2), (2, 3, 2)])])
def test_the_object_backend_as_opt_einsum(subscripts, shapes):
    views = [a.astype(object) for a in _operands(shapes, seed=5)]
    want = oe.contract(subscripts, *views, backend="object")
    got = contract(subscripts, *views, backend="object")
    assert isinstance(got, np.ndarray) and got.dtype == want.dtype == object and got.shape == want.shape
    np.testing.assert_allclose(got.astype(float), want.astype(float))
    expr = contract_expression(subscripts, *shapes)
    got = expr(*views, backend="object")
    assert got.dtype == object
    np.testing.assert_allclose(got.astype(float), want.astype(float))


def test_an_expressions_backend_gives_a_0d_array_as_opt_einsum():
    pytest.importorskip("jax")
    views = _operands([(2, 3, 3), (2, 3, 3)], seed=6)
    ours = contract_expression("ijk,ikj", *[v.shape for v in views])(*views, backend="jax")
    theirs = oe.contract_expression("ijk,ikj", *[v.shape for v in views])(*views, backend="jax")
    assert type(ours) is type(theirs) is np.ndarray and ours.shape == theirs.shape == ()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)


# ------------------------------------------------------------------ expression checks
def _raised(call):
    try:
        call()
    except Exception as err:  # noqa: BLE001 - the class is what is compared
        return err
    raise AssertionError("no exception")


def test_an_expression_called_with_the_wrong_count_is_opt_einsums_value_error():
    a, b = _operands([(2, 3), (3, 4)])
    ours = contract_expression("ab,bc->ac", a.shape, b.shape)
    theirs = oe.contract_expression("ab,bc->ac", a.shape, b.shape)
    for args in [(a,), (a, b, b)]:
        want = _raised(lambda args=args: theirs(*args))
        got = _raised(lambda args=args: ours(*args))
        assert isinstance(got, type(want)) and isinstance(got, OperandCountError)
        assert "`ContractExpression` takes exactly 2 operands for 'ab,bc->ac'" in str(got)
    for args in [(np.ones((2, 3, 4)), b), (np.ones((2, 4)), np.ones((3, 4, 5)))]:
        assert isinstance(_raised(lambda args=args: ours(*args)), type(_raised(lambda args=args: theirs(*args))))


@pytest.mark.parametrize("keyword", ["out", "backend"])
def test_out_or_backend_when_building_is_opt_einsums_value_error(keyword):
    value = np.empty((2, 4)) if keyword == "out" else "numpy"
    want = _raised(lambda: oe.contract_expression("ab,bc->ac", (2, 3), (3, 4), **{keyword: value}))
    with pytest.raises(KeywordError, match=rf"takes no {keyword}=: pass it to the expression's call") as info:
        contract_expression("ab,bc->ac", (2, 3), (3, 4), **{keyword: value})
    assert isinstance(info.value, type(want)) and isinstance(info.value, TypeError)


@pytest.mark.parametrize("subscripts, shapes", [("ab,bc,bd->acd", [(5, 4), (1, 5), (4, 20)]),
                                                ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)])])
def test_an_expressions_contraction_list_is_opt_einsums_for_its_path(subscripts, shapes):
    ours = contract_expression(subscripts, *shapes)
    theirs = oe.contract_expression(subscripts, *shapes, optimize=[tuple(p) for p in ours.schedule.path])
    assert ours.contraction_list == theirs.contraction_list


def test_a_registered_path_function_and_a_pathinfo_size_as_the_limit():
    def left_to_right(inputs, output, size_dict, memory_limit):
        return [(0, 1)] * (len(inputs) - 1)

    oe.paths.register_path_fn("left-to-right-test", left_to_right)
    try:
        path, _ = contract_path("ab,bc,cd", (2, 3), (3, 4), (4, 5), shapes=True, optimize="left-to-right-test")
        assert path == oe.contract_path("ab,bc,cd", (2, 3), (3, 4), (4, 5), shapes=True,
                                        optimize="left-to-right-test")[0]
    finally:
        del oe.paths._PATH_OPTIONS["left-to-right-test"]
    ops = _operands([(2, 3), (3, 4), (4, 5)])
    _, info = oe.contract_path("ab,bc,cd->ad", *ops)
    got = contract("ab,bc,cd->ad", *ops, memory_limit=info.largest_intermediate)   # a Decimal
    np.testing.assert_allclose(got, oe.contract("ab,bc,cd->ad", *ops))
