"""`contract` under JAX transformations: grad/jvp/jacrev/jacfwd/hessian against analytic or
finite-difference answers; vmap with in_axes 0 / negative / None mixed, out_axes, nested vmap,
lax.map(batch_size=k); and a vmapped contract keeps the contraction structure of the same
contraction written with the vmapped axis as an extra group (no added dot_general, no added
transpose)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.extend  # noqa: F811  (the submodule, on the module importorskip returned)
import jax.numpy as jnp
from jax.test_util import check_grads

from contractions import contract, contract_expression
from contractions.testing.sharding import count_hlo_opcodes

rng = np.random.default_rng(7)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def close(actual, expected, tol=1e-4):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=tol,
                               atol=tol * max(1.0, float(np.abs(np.asarray(expected)).max())))


# ------------------------------------------------------------------- differentiation
X, CORES, Z = randn(4, 2, 3), randn(2, 3, 5, 6), randn(4, 2, 5)
TT = "WCa,Caib,WCi->WCb"


def test_grad_matches_analytic():
    g = randn(4, 2, 6)  # loss = <g, contract(...)>: linear, so the gradient is exact
    loss = lambda x, cores, z: jnp.vdot(g, contract(TT, x, cores, z))
    gx, gc, gz = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(X, CORES, Z)
    close(gx, np.einsum("wcb,caib,wci->wca", g, CORES, Z))
    close(gc, np.einsum("wcb,wca,wci->caib", g, X, Z))
    close(gz, np.einsum("wcb,wca,caib->wci", g, X, CORES))
    # ... and eagerly (each primitive of the backward pass dispatched on its own).
    close(jax.grad(loss)(X, CORES, Z), gx)


def test_jvp_matches_analytic():
    tx, tz = randn(*X.shape), randn(*Z.shape)
    f = lambda x, z: contract(TT, x, CORES, z)
    primal, tangent = jax.jvp(f, (X, Z), (tx, tz))
    close(primal, np.einsum("wca,caib,wci->wcb", X, CORES, Z))
    close(tangent, np.einsum("wca,caib,wci->wcb", tx, CORES, Z)
          + np.einsum("wca,caib,wci->wcb", X, CORES, tz))


@pytest.mark.parametrize("jac", [jax.jacrev, jax.jacfwd], ids=["jacrev", "jacfwd"])
def test_jacobians_match_analytic(jac):
    x, y = randn(3, 2, 4), randn(2, 4, 5)
    # out[w, c, b] = sum_a x[w, c, a] y[c, a, b]  =>  d out[w,c,b] / d y[c',a,b'] = x[w,c,a] d(c,c') d(b,b')
    jy = jax.jit(jac(lambda y: contract("WCa,Cab->WCb", x, y)))(y)
    expected = np.einsum("wca,cd,be->wcbdae", x, np.eye(2), np.eye(5))
    assert jy.shape == (3, 2, 5, 2, 4, 5)
    close(jy, expected)
    jx = jax.jit(jac(lambda x: contract("WCa,Cab->WCb", x, y)))(x)
    close(jx, np.einsum("cab,wv,cd->wcbvda", y, np.eye(3), np.eye(2)))


def test_hessian_of_quadratic_form_matches_analytic():
    a = randn(4, 4)
    x = randn(3, 4)
    # f(x) = sum_w x[w]^T A x[w]  =>  H[w,i,v,j] = d(w,v) (A + A^T)[i, j]
    f = lambda x: contract("Wa,ab,Wb->", x, a, x)
    h = jax.jit(jax.hessian(f))(x)
    close(h, np.einsum("wv,ij->wivj", np.eye(3), a + a.T))


def test_nonlinear_gradients_match_finite_differences():
    x, y, z = randn(2, 3, 4) * 0.5, randn(3, 4, 5) * 0.5, randn(2, 3, 5) * 0.5

    def f(x, y, z):
        h = jnp.tanh(contract("WCa,Cab->WCb", x, y))
        return contract("WCb,WCb->W", h, z, len_W=1).sum() + contract("WCa,WCa->", x, x)

    check_grads(jax.jit(f), (x, y, z), order=2, modes=["fwd", "rev"], atol=2e-2, rtol=2e-2)


# -------------------------------------------------------------------------- vmap
def test_vmap_in_axes_zero_equals_extra_group():
    xs = randn(7, 4, 2, 3)  # V=7 mapped, then W=(4,), C=(2,)
    out = jax.vmap(lambda x: contract(TT, x, CORES, Z))(xs)
    close(out, np.einsum("vwca,caib,wci->vwcb", xs, CORES, Z))


def test_vmap_negative_in_axes_with_none_mixed_and_out_axes():
    xs = randn(4, 2, 3, 7)  # mapped on the last axis
    zs = randn(7, 4, 2, 5)  # mapped on the first axis
    f = lambda x, cores, z: contract(TT, x, cores, z)
    out = jax.vmap(f, in_axes=(-1, None, 0), out_axes=-1)(xs, CORES, zs)
    assert out.shape == (4, 2, 6, 7)
    close(out, np.einsum("wcav,caib,vwci->wcbv", xs, CORES, zs))
    out1 = jax.vmap(f, in_axes=(-1, None, 0), out_axes=1)(xs, CORES, zs)
    close(out1, np.moveaxis(np.asarray(out), -1, 1))
    # Mapping the cores instead (in_axes=-2 on a 4-d operand) and nothing else.
    cs = randn(2, 3, 5, 7, 6)
    out2 = jax.vmap(f, in_axes=(None, -2, None), out_axes=0)(X, cs, Z)
    close(out2, np.einsum("wca,caivb,wci->vwcb", X, cs, Z))


def test_vmap_over_group_lengths_changes_the_solved_groups():
    """Inside vmap the operand ndims drop by one, and the groups are solved per example."""
    xs = randn(5, 3, 4)  # per example (3, 4): 'Wa' has W = (3,)
    out = jax.vmap(lambda x: contract("Wa,Wa->W", x, x))(xs)
    close(out, np.einsum("vwa,vwa->vw", xs, xs))
    out = jax.vmap(lambda x: contract("Wa,Wa->W", x, x), in_axes=1)(xs)  # per example (5, 4)
    close(out, np.einsum("wva,wva->vw", xs, xs))


def test_nested_vmap():
    xs = randn(4, 2, 3, 8)  # inner-mapped on -1
    cs = randn(6, 2, 3, 5, 6)  # outer-mapped on 0
    f = lambda x, c: contract(TT, x, c, Z)
    inner = jax.vmap(f, in_axes=(-1, None), out_axes=0)
    outer = jax.vmap(inner, in_axes=(None, 0), out_axes=-1)
    out = outer(xs, cs)
    assert out.shape == (8, 4, 2, 6, 6)
    close(out, np.einsum("wcau,kcaib,wci->uwcbk", xs, cs, Z))
    # Nested vmap inside jit and grad through it.
    out_jit = jax.jit(outer)(xs, cs)
    close(out_jit, out)
    g = jax.jit(jax.grad(lambda c: outer(xs, c).sum()))(cs)
    # d sum / d cs[k, c, a, i, b] = sum_{u, w} xs[w, c, a, u] Z[w, c, i]
    close(g, np.broadcast_to(np.einsum("wcau,wci->cai", xs, Z)[None, ..., None], cs.shape))


@pytest.mark.parametrize("batch_size", [None, 2, 3])
def test_lax_map_with_batch_size(batch_size):
    xs = randn(6, 4, 2, 3)
    out = jax.lax.map(lambda x: contract(TT, x, CORES, Z), xs, batch_size=batch_size)
    close(out, np.einsum("vwca,caib,wci->vwcb", xs, CORES, Z))


# ------------------------------------------- vmapped program structure (jaxpr/HLO)
def primitive_counts(fn, *args) -> collections.Counter:
    """Primitive names in the jaxpr of fn, recursing into nested jaxprs (pjit, ...)."""
    counts: collections.Counter = collections.Counter()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] += 1
            for sub in _jaxprs_in_params(eqn.params):
                walk(sub)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return counts


# jax.extend.core.jaxprs_in_params is recent; older jax (all that run on Python 3.10) has it in
# jax.core.
_jaxprs_in_params = (getattr(getattr(jax, "extend", None) and jax.extend.core, "jaxprs_in_params", None)
                     or jax.core.jaxprs_in_params)


def compiled_opcode_counts(fn, *args) -> collections.Counter:
    """Opcodes of every instruction (all computations, fusions included) in the compiled HLO."""
    return count_hlo_opcodes(jax.jit(fn).lower(*args).compile().as_text())


# (per-example subscripts, in_axes, out_axes, operand shapes (mapped V=5 included),
#  grouped equivalent with the vmapped axis as group V at the same positions, its len_*)
STRUCTURE_CASES = [
    ("Wa,ab->Wb", (1, None), 1, [(4, 5, 3), (3, 2)], "WVa,ab->WVb", {}),
    ("Wa,ab->Wb", (0, -1), 0, [(5, 4, 3), (3, 2, 5)], "VWa,abV->VWb", {}),
    ("Wa,ab->Wb", (0, -1), -1, [(5, 4, 3), (3, 2, 5)], "VWa,abV->WbV", {}),
    ("Wa,ab->Wb", (-1, None), -1, [(4, 3, 5), (3, 2)], "WaV,ab->WbV", {"len_V": 1}),
    ("Wa,ab->Wb", (-1, None), 1, [(4, 3, 5), (3, 2)], "WaV,ab->WVb", {"len_V": 1}),
    ("WCa,Cab->WCb", (None, 0), 2, [(4, 2, 3), (5, 2, 3, 6)], "WCa,VCab->WCVb", {"len_V": 1}),
    ("WCa,Caib,WCi->WCb", (0, None, -1), 0, [(5, 4, 2, 3), (2, 3, 7, 6), (4, 2, 7, 5)],
     "VWCa,Caib,WCiV->VWCb", {"len_V": 1}),
]


@pytest.mark.parametrize("inner,in_axes,out_axes,shapes,grouped,supp", STRUCTURE_CASES)
def test_vmapped_contract_keeps_the_grouped_contraction_structure(inner, in_axes, out_axes,
                                                                  shapes, grouped, supp):
    ops = [jnp.asarray(randn(*s)) for s in shapes]
    # One pairwise order for both (the time model may order per-example shapes differently).
    path = list(contract_expression(grouped, *shapes, **supp).schedule.path)
    vmapped = jax.vmap(lambda *xs: contract(inner, *xs, optimize=path), in_axes=in_axes,
                       out_axes=out_axes)
    as_group = lambda *xs: contract(grouped, *xs, optimize=path, **supp)
    close(vmapped(*ops), as_group(*ops))
    # jaxpr: the same dot_generals (one per pairwise step, so ONE for two operands), and
    # nothing but dot_general/transpose (no reshape, broadcast or copy of an operand).
    v, g = primitive_counts(vmapped, *ops), primitive_counts(as_group, *ops)
    assert v["dot_general"] == g["dot_general"] == len(shapes) - 1
    assert set(v) <= {"dot_general", "transpose"}, v
    # vmap applies out_axes with its own moveaxis after einsum's output permutation, so the
    # jaxpr may hold one more transpose, always feeding straight into the other one ...
    assert v["transpose"] <= g["transpose"] + 1, (v, g)
    # ... and XLA composes the pair: the compiled programs have the same dots and no more
    # transposes or copies than the grouped contraction's.
    cv, cg = compiled_opcode_counts(vmapped, *ops), compiled_opcode_counts(as_group, *ops)
    # XLA may turn a pure outer product (or, in older jaxlibs, one dot of a vmapped program)
    # into a multiply: count the two together.
    products_v, products_g = cv["dot"] + cv["multiply"], cg["dot"] + cg["multiply"]
    assert products_v == products_g and cv["dot"] + cg["dot"] >= 1, (cv, cg)
    for opcode in ("transpose", "copy", "reshape", "broadcast"):
        assert cv[opcode] <= cg[opcode], (opcode, cv, cg)


def test_two_operand_vmapped_contract_is_one_dot_general():
    x, y = jnp.asarray(randn(5, 4, 2, 3)), jnp.asarray(randn(2, 3, 6))
    nested = jax.vmap(jax.vmap(lambda x, y: contract("WCa,Cab->WCb", x, y), in_axes=(0, None)),
                      in_axes=(0, None))
    counts = primitive_counts(nested, x, y)
    assert counts["dot_general"] == 1
    close(nested(x, y), np.einsum("vwca,cab->vwcb", x, y))
