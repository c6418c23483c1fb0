"""Every function in ``examples/`` against a dense reference that never calls ``contract``.

References are built from loops over the stacks (``np.ndindex``), reshape + matmul, ``np.kron``,
``np.tensordot`` and ``np.einsum`` on fixed, hand-written (group-free) strings. Stack shapes cover
empty groups, single-axis groups, multi-axis groups and size-1 axes.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from examples import attention, forms, jvp, tensor_train, transfer, tucker

RTOL = 1e-10
ATOL = 1e-12

# (W, C) stack pairs: empty, single-axis, multi-axis, size-1 axes.
W_C_STACKS = [
    ((), ()),
    ((3,), ()),
    ((), (2,)),
    ((2, 2), (2,)),
    ((2,), (1, 3)),
]
STACKS = [(), (2,), (2, 3)]


@pytest.fixture
def rng():
    # A fresh generator per test: results do not depend on test order.
    return np.random.default_rng(20260717)


def randn(rng, shape, dtype=np.float64):
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def over(shape, fn):
    """Array of ``fn(index)`` for every index of ``shape``, stacked in front."""
    results = [np.asarray(fn(idx)) for idx in np.ndindex(*shape)]
    return np.array(results).reshape(tuple(shape) + results[0].shape)


def assert_matches(actual, expected, dtype=None, rtol=RTOL, atol=ATOL):
    actual = np.asarray(actual)
    assert actual.shape == expected.shape
    if dtype is not None:
        assert actual.dtype == dtype
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


# =========================================================================== tensor trains
RANKS = (1, 2, 3, 1)
DIMS = (2, 3, 2)


def random_tt(rng, stack, ranks=RANKS, dims=DIMS, dtype=np.float64):
    return [
        randn(rng, tuple(stack) + (ranks[k], dims[k], ranks[k + 1]), dtype)
        for k in range(len(dims))
    ]


def at(cores, idx):
    return [core[idx] for core in cores]


def dense_tt_single(cores):
    """Dense tensor of one (unstacked) TT by reshape + matmul."""
    state = np.ones((1, 1), dtype=np.result_type(*cores))
    for core in cores:
        r, n, r_next = core.shape
        state = (state @ core.reshape(r, n * r_next)).reshape(-1, r_next)
    return state[:, 0].reshape([core.shape[1] for core in cores])


def dense_tt(cores, stack):
    return over(stack, lambda c: dense_tt_single(at(cores, c)))


def probe_dense(tensor, vectors):
    """``<T, z_1 (x) ... (x) z_d>`` by successive tensordots."""
    for z in vectors:
        tensor = np.tensordot(z, tensor, axes=([0], [0]))
    return tensor


def dense_mpo_single(mpo):
    """Dense matrix (m_1..m_d) x (n_1..n_d) of one MPO."""
    merged = [op.reshape(op.shape[0], op.shape[1] * op.shape[2], op.shape[3]) for op in mpo]
    dense = dense_tt_single(merged)
    d = len(mpo)
    dense = dense.reshape([s for op in mpo for s in op.shape[1:3]])
    dense = dense.transpose(list(range(0, 2 * d, 2)) + list(range(1, 2 * d, 2)))
    return dense.reshape(math.prod(op.shape[1] for op in mpo), -1)


def qr_left(rng, r, n, r_next):
    q, _ = np.linalg.qr(rng.standard_normal((r * n, r_next)))
    return q.reshape(r, n, r_next)


def qr_right(rng, r, n, r_next):
    q, _ = np.linalg.qr(rng.standard_normal((n * r_next, r)))
    return q.T.reshape(r, n, r_next)


FRAME_RANKS = (1, 2, 2, 1)  # small enough that every U_k is left- and V_k right-orthogonalizable


def orthogonal_frame(rng, stack, ranks=FRAME_RANKS, dims=DIMS):
    d = len(dims)
    left = [
        over(stack, lambda c, k=k: qr_left(rng, ranks[k], dims[k], ranks[k + 1])) for k in range(d)
    ]
    right = [
        over(stack, lambda c, k=k: qr_right(rng, ranks[k], dims[k], ranks[k + 1])) for k in range(d)
    ]
    return left, right


def dense_tangent(left, right, variations, K, C):
    """``sum_s U_1..U_{s-1} dU_s V_{s+1}..V_d`` densified per (k, c)."""
    d = len(left)

    def one(idx):
        k, c = idx[: len(K)], idx[len(K) :]
        total = 0
        for s in range(d):
            cores = at(left[:s], c) + [variations[s][k + c]] + at(right[s + 1 :], c)
            total = total + dense_tt_single(cores)
        return total

    return over(tuple(K) + tuple(C), one)


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tt_to_dense_and_probe(rng, W, C):
    cores = random_tt(rng, C)
    probes = [randn(rng, W + (n,)) for n in DIMS]
    dense = dense_tt(cores, C)
    assert_matches(tensor_train.tt_to_dense(cores), dense, np.float64)
    expected = over(
        W + C, lambda idx: probe_dense(dense[idx[len(W) :]], [z[idx[: len(W)]] for z in probes])
    )
    assert_matches(tensor_train.tt_probe(cores, probes), expected, np.float64)


def test_tt_to_dense_single_site_and_float32(rng):
    cores = [randn(rng, (2, 1, 5, 1), np.float32)]
    out = tensor_train.tt_to_dense(cores)
    assert out.dtype == np.float32
    assert_matches(out, cores[0][:, 0, :, 0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tt_probe_per_member(rng, W, C):
    cores = random_tt(rng, C)
    probes = [randn(rng, W + C + (n,)) for n in DIMS]
    dense = dense_tt(cores, C)
    expected = over(W + C, lambda idx: probe_dense(dense[idx[len(W) :]], [z[idx] for z in probes]))
    assert_matches(tensor_train.tt_probe_per_member(cores, probes), expected, np.float64)


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tt_entries(rng, W, C):
    cores = random_tt(rng, C)
    index = np.stack([rng.integers(0, n, size=W) for n in DIMS], axis=-1)
    dense = dense_tt(cores, C)
    expected = over(W + C, lambda idx: dense[idx[len(W) :]][tuple(index[idx[: len(W)]])])
    assert_matches(tensor_train.tt_entries(cores, index), expected, np.float64)


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tt_dense_probe_both_ways(rng, W, C):
    cores = random_tt(rng, C)
    data = randn(rng, W + DIMS)
    dense = dense_tt(cores, C)
    expected = over(W + C, lambda idx: np.sum(dense[idx[len(W) :]] * data[idx[: len(W)]]))
    assert_matches(tensor_train.tt_dense_probe(cores, data), expected, np.float64)
    assert_matches(tensor_train.tt_dense_probe_sweep(cores, data), expected, np.float64)


def test_tt_dense_probe_single_site(rng):
    # One site: the remaining-axes group R is empty from the start.
    cores = [randn(rng, (2, 1, 4, 1))]
    data = randn(rng, (3, 4))
    expected = data @ cores[0][:, 0, :, 0].T
    assert_matches(tensor_train.tt_dense_probe_sweep(cores, data), expected, np.float64)


MPO_RANKS = (1, 2, 2, 1)
OUT_DIMS = (3, 2, 2)


def random_mpo(rng, stack):
    return [
        randn(rng, tuple(stack) + (MPO_RANKS[k], OUT_DIMS[k], DIMS[k], MPO_RANKS[k + 1]))
        for k in range(len(DIMS))
    ]


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tt_apply_mpo(rng, W, C):
    mpo = random_mpo(rng, C)
    vectors = random_tt(rng, W)
    out = tensor_train.tt_apply_mpo(mpo, vectors)
    for k, core in enumerate(out):
        assert core.shape == W + C + (
            MPO_RANKS[k] * RANKS[k],
            OUT_DIMS[k],
            MPO_RANKS[k + 1] * RANKS[k + 1],
        )

    def expected(idx):
        w, c = idx[: len(W)], idx[len(W) :]
        x = dense_tt_single(at(vectors, w)).reshape(-1)
        return (dense_mpo_single(at(mpo, c)) @ x).reshape(OUT_DIMS)

    assert_matches(dense_tt(out, W + C), over(W + C, expected))


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tt_apply_mpo_dense(rng, W, C):
    mpo = random_mpo(rng, C)
    x = randn(rng, W + DIMS)

    def expected(idx):
        w, c = idx[: len(W)], idx[len(W) :]
        return (dense_mpo_single(at(mpo, c)) @ x[w].reshape(-1)).reshape(OUT_DIMS)

    assert_matches(tensor_train.tt_apply_mpo_dense(mpo, x), over(W + C, expected), np.float64)


@pytest.mark.parametrize("C, D", [((), ()), ((2,), ()), ((2, 1), (3,))])
def test_tt_inner_complex(rng, C, D):
    x = random_tt(rng, C, dtype=np.complex128)
    y = random_tt(rng, D, ranks=(1, 3, 2, 1), dtype=np.complex128)
    dx, dy = dense_tt(x, C), dense_tt(y, D)
    expected = over(C + D, lambda idx: np.vdot(dx[idx[: len(C)]], dy[idx[len(C) :]]))
    assert_matches(tensor_train.tt_inner(x, y), expected, np.complex128)


@pytest.mark.parametrize("C", STACKS)
def test_tt_left_orthogonalize(rng, C):
    cores = random_tt(rng, C)
    ortho = tensor_train.tt_left_orthogonalize(cores)
    assert_matches(dense_tt(ortho, C), dense_tt(cores, C))
    for core in ortho[:-1]:
        for c in np.ndindex(*C):
            m = core[c].reshape(-1, core.shape[-1])
            np.testing.assert_allclose(m.T @ m, np.eye(m.shape[1]), atol=1e-12)


@pytest.mark.parametrize(
    "W, K, C", [((), (), ()), ((3,), (2,), ()), ((2,), (), (2,)), ((2, 2), (1, 2), (2,))]
)
def test_tt_tangent_probe(rng, W, K, C):
    left, right = orthogonal_frame(rng, C)
    variations = random_tt(rng, K + C, ranks=FRAME_RANKS)
    probes = [randn(rng, W + (n,)) for n in DIMS]
    dense = dense_tangent(left, right, variations, K, C)

    def expected(idx):
        w = idx[: len(W)]
        return probe_dense(dense[idx[len(W) :]], [z[w] for z in probes])

    out = tensor_train.tt_tangent_probe(left, right, variations, probes)
    assert_matches(out, over(W + K + C, expected), np.float64)


@pytest.mark.parametrize(
    "K, L, C", [((), (), ()), ((2,), (3,), ()), ((2,), (), (2,)), ((1, 2), (2,), (2, 1))]
)
def test_tt_gauge_project_and_tangent_gram(rng, K, L, C):
    left, right = orthogonal_frame(rng, C)
    raw_x = random_tt(rng, K + C, ranks=FRAME_RANKS)
    dX = tensor_train.tt_gauge_project(left, raw_x)
    dY = tensor_train.tt_gauge_project(left, random_tt(rng, L + C, ranks=FRAME_RANKS))
    # The projection is (I - u u^T) on the (a i, b) matricization, the last site is untouched,
    # and the gauge u^T dU = 0 holds afterwards.
    last = len(DIMS) - 1
    for s, (U, raw, dU) in enumerate(zip(left, raw_x, dX)):

        def projected(idx, U=U, raw=raw, s=s):
            if s == last:
                return raw[idx]
            u = U[idx[len(K) :]].reshape(-1, U.shape[-1])
            m = raw[idx].reshape(u.shape[0], -1)
            return (m - u @ (u.T @ m)).reshape(raw[idx].shape)

        assert_matches(dU, over(K + C, projected), np.float64)
        if s < last:
            for idx in np.ndindex(*(K + C)):
                u = U[idx[len(K) :]].reshape(-1, U.shape[-1])
                gauge = u.T @ dU[idx].reshape(u.shape[0], -1)
                np.testing.assert_allclose(gauge, 0, atol=1e-12)
    tx = dense_tangent(left, right, dX, K, C)
    ty = dense_tangent(left, right, dY, L, C)

    def expected(idx):
        c, k, l_ = idx[: len(C)], idx[len(C) : len(C) + len(K)], idx[len(C) + len(K) :]
        return np.vdot(tx[k + c], ty[l_ + c])

    assert_matches(
        tensor_train.tt_tangent_gram(left, dX, dY), over(C + K + L, expected), np.float64
    )


def unit_perturbation_adjoint(cores, site, c, weighted_probe):
    """Gradient w.r.t. ``cores[site][c]`` of a function linear in that core, entry by entry."""
    single = at(cores, c)
    grad = np.zeros(single[site].shape)
    for entry in np.ndindex(*single[site].shape):
        unit = np.zeros(single[site].shape)
        unit[entry] = 1.0
        grad[entry] = weighted_probe(single[:site] + [unit] + single[site + 1 :])
    return grad


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tt_probe_adjoint(rng, W, C):
    cores = random_tt(rng, C)
    probes = [randn(rng, W + (n,)) for n in DIMS]
    residuals = randn(rng, W + C)
    out = tensor_train.tt_probe_adjoint(cores, probes, residuals)
    for site in range(len(DIMS)):

        def ref(c, site=site):
            def weighted(single):
                t = dense_tt_single(single)
                return sum(
                    residuals[w + c] * probe_dense(t, [z[w] for z in probes])
                    for w in np.ndindex(*W)
                )

            return unit_perturbation_adjoint(cores, site, c, weighted)

        assert_matches(out[site], over(C, ref), np.float64)


@pytest.mark.parametrize("W, K, C", [((), (), ()), ((3,), (2,), ()), ((2,), (1, 2), (2,))])
def test_tt_probe_adjoint_stacked(rng, W, K, C):
    cores = random_tt(rng, C)
    probes = [randn(rng, W + (n,)) for n in DIMS]
    residuals = randn(rng, W + K + C)
    out = tensor_train.tt_probe_adjoint_stacked(cores, probes, residuals)
    for site in range(len(DIMS)):

        def ref(idx, site=site):
            k, c = idx[: len(K)], idx[len(K) :]

            def weighted(single):
                t = dense_tt_single(single)
                return sum(
                    residuals[w + k + c] * probe_dense(t, [z[w] for z in probes])
                    for w in np.ndindex(*W)
                )

            return unit_perturbation_adjoint(cores, site, c, weighted)

        assert_matches(out[site], over(K + C, ref), np.float64)


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tt_probe_per_member_adjoint(rng, W, C):
    cores = random_tt(rng, C)
    probes = [randn(rng, W + C + (n,)) for n in DIMS]
    residuals = randn(rng, W + C)
    out = tensor_train.tt_probe_per_member_adjoint(cores, probes, residuals)
    for site in range(len(DIMS)):

        def ref(c, site=site):
            def weighted(single):
                t = dense_tt_single(single)
                return sum(
                    residuals[w + c] * probe_dense(t, [z[w + c] for z in probes])
                    for w in np.ndindex(*W)
                )

            return unit_perturbation_adjoint(cores, site, c, weighted)

        assert_matches(out[site], over(C, ref), np.float64)


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tt_environments_close_to_probe(rng, W, C):
    cores = random_tt(rng, C)
    probes = [randn(rng, W + (n,)) for n in DIMS]
    left = tensor_train.tt_left_environments(cores, probes)
    right = tensor_train.tt_right_environments(cores, probes)
    assert [e.shape for e in left] == [W + C + (r,) for r in RANKS[:-1]]
    assert [e.shape for e in right] == [W + C + (r,) for r in RANKS[1:]]
    dense = dense_tt(cores, C)
    # L_1 and R_1 close the middle site to the full probe value.
    expected = over(
        W + C, lambda idx: probe_dense(dense[idx[len(W) :]], [z[idx[: len(W)]] for z in probes])
    )
    middle = over(
        W + C,
        lambda idx: (
            left[1][idx]
            @ np.tensordot(cores[1][idx[len(W) :]], probes[1][idx[: len(W)]], axes=([1], [0]))
            @ right[1][idx]
        ),
    )
    assert_matches(middle, expected)


# =========================================================================== Tucker
TUCKER_RANKS = (2, 3, 2)
TUCKER_DIMS = (3, 4, 2)


def random_tucker(rng, stack, ranks=TUCKER_RANKS, dtype=np.float64):
    core = randn(rng, tuple(stack) + tuple(ranks), dtype)
    factors = [randn(rng, tuple(stack) + (n, r), dtype) for n, r in zip(TUCKER_DIMS, ranks)]
    return core, factors


def dense_tucker_single(core, factors):
    return np.einsum("pqr,ip,jq,kr->ijk", core, *factors)


def dense_tucker(core, factors, stack):
    return over(stack, lambda c: dense_tucker_single(core[c], at(factors, c)))


@pytest.mark.parametrize("C", STACKS)
def test_tucker_to_dense(rng, C):
    core, factors = random_tucker(rng, C)
    expected = dense_tucker(core, factors, C)
    assert_matches(tucker.tucker_to_dense(core, factors), expected, np.float64)
    assert_matches(tucker.tucker_to_dense_nd(core, factors), expected, np.float64)


@pytest.mark.parametrize("C, order", [((), 2), ((2,), 4), ((1, 2), 1)])
def test_tucker_to_dense_nd_other_orders(rng, C, order):
    ranks = (2, 1, 3, 2)[:order]
    dims = (3, 2, 2, 3)[:order]
    core = randn(rng, C + ranks)
    factors = [randn(rng, C + (n, r)) for n, r in zip(dims, ranks)]

    def expected(c):
        t = core[c]
        for U in factors:  # contract the leading rank axis, append the mode axis
            t = np.tensordot(t, U[c], axes=([0], [1]))
        return t

    assert_matches(tucker.tucker_to_dense_nd(core, factors), over(C, expected), np.float64)


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tucker_project_entries_probe(rng, W, C):
    core, factors = random_tucker(rng, C)
    data = randn(rng, W + TUCKER_DIMS)
    proj = over(
        W + C,
        lambda idx: np.einsum(
            "ijk,ip,jq,kr->pqr", data[idx[: len(W)]], *at(factors, idx[len(W) :])
        ),
    )
    assert_matches(tucker.tucker_project(data, factors), proj, np.float64)

    dense = dense_tucker(core, factors, C)
    index = np.stack([rng.integers(0, n, size=W) for n in TUCKER_DIMS], axis=-1)
    entries = over(W + C, lambda idx: dense[idx[len(W) :]][tuple(index[idx[: len(W)]])])
    assert_matches(tucker.tucker_entries(core, factors, index), entries, np.float64)

    probes = [randn(rng, W + (n,)) for n in TUCKER_DIMS]
    probed = over(
        W + C, lambda idx: probe_dense(dense[idx[len(W) :]], [z[idx[: len(W)]] for z in probes])
    )
    assert_matches(tucker.tucker_probe(core, factors, probes), probed, np.float64)


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tucker_probe_core_adjoint(rng, W, C):
    _, factors = random_tucker(rng, C)
    probes = [randn(rng, W + (n,)) for n in TUCKER_DIMS]
    residuals = randn(rng, W + C)

    def expected(c):
        total = np.zeros(TUCKER_RANKS)
        for w in np.ndindex(*W):
            y1, y2, y3 = (U[c].T @ z[w] for U, z in zip(factors, probes))
            total += residuals[w + c] * np.multiply.outer(np.multiply.outer(y1, y2), y3)
        return total

    out = tucker.tucker_probe_core_adjoint(factors, probes, residuals)
    assert_matches(out, over(C, expected), np.float64)


@pytest.mark.parametrize("K, C", [((), ()), ((2,), ()), ((), (2,)), ((2, 1), (2,))])
def test_tucker_tangent_to_dense(rng, K, C):
    core, factors = random_tucker(rng, C)
    d_core, d_factors = random_tucker(rng, K + C)

    def expected(idx):
        c = idx[len(K) :]
        G, (U1, U2, U3) = core[c], at(factors, c)
        dG, (dU1, dU2, dU3) = d_core[idx], at(d_factors, idx)
        return (
            dense_tucker_single(dG, [U1, U2, U3])
            + dense_tucker_single(G, [dU1, U2, U3])
            + dense_tucker_single(G, [U1, dU2, U3])
            + dense_tucker_single(G, [U1, U2, dU3])
        )

    out = tucker.tucker_tangent_to_dense(core, factors, d_core, d_factors)
    assert_matches(out, over(K + C, expected), np.float64)


def unfold(t, mode):
    return np.moveaxis(t, mode, 0).reshape(t.shape[mode], -1)


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_tucker_mode_grams_and_hosvd(rng, W, C):
    data = randn(rng, W + C + TUCKER_DIMS)
    grams = tucker.tucker_mode_grams(data, len(W))
    for mode, gram in enumerate(grams):

        def expected(c, mode=mode):
            unfolded = [unfold(data[w + c], mode) for w in np.ndindex(*W)]
            return sum(m @ m.T for m in unfolded)

        assert_matches(gram, over(C, expected), np.float64)

    core, factors = tucker.tucker_hosvd(data, TUCKER_RANKS, len(W))
    mean = data.reshape((-1,) + C + TUCKER_DIMS).mean(axis=0)
    for mode, (U, rank) in enumerate(zip(factors, TUCKER_RANKS)):
        assert U.shape == C + (TUCKER_DIMS[mode], rank)
        for c in np.ndindex(*C):
            stacked = np.concatenate([unfold(data[w + c], mode) for w in np.ndindex(*W)], axis=1)
            left_sv = np.linalg.svd(stacked)[0][:, :rank]
            np.testing.assert_allclose(U[c] @ U[c].T, left_sv @ left_sv.T, atol=1e-8)
    expected_core = over(C, lambda c: np.einsum("ijk,ip,jq,kr->pqr", mean[c], *at(factors, c)))
    assert_matches(core, expected_core, np.float64)


@pytest.mark.parametrize("C, D", [((), ()), ((2,), (3,)), ((1, 2), ())])
def test_tucker_inner_complex(rng, C, D):
    x_core, x_factors = random_tucker(rng, C, dtype=np.complex128)
    y_core, y_factors = random_tucker(rng, D, ranks=(1, 2, 3), dtype=np.complex128)
    dx, dy = dense_tucker(x_core, x_factors, C), dense_tucker(y_core, y_factors, D)
    expected = over(C + D, lambda idx: np.vdot(dx[idx[: len(C)]], dy[idx[len(C) :]]))
    assert_matches(
        tucker.tucker_inner(x_core, x_factors, y_core, y_factors), expected, np.complex128
    )


# =========================================================================== attention
B_H_STACKS = [((), ()), ((2,), (3,)), ((2, 1), ()), ((), (2, 2)), ((2,), (2, 3))]


def softmax_ref(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_ref(q, k, v):
    """One (batch, head) slice: q (n_q, d), k/v (n_k, d)."""
    w = softmax_ref(q @ k.T / np.sqrt(q.shape[-1]))
    return w @ v, w


@pytest.mark.parametrize("B, H", B_H_STACKS)
def test_attention(rng, B, H):
    q, k, v = randn(rng, B + H + (4, 3)), randn(rng, B + H + (5, 3)), randn(rng, B + H + (5, 3))
    out, weights = attention.attention(q, k, v)
    assert_matches(out, over(B + H, lambda i: attention_ref(q[i], k[i], v[i])[0]), np.float64)
    assert_matches(weights, over(B + H, lambda i: attention_ref(q[i], k[i], v[i])[1]), np.float64)
    bias = randn(rng, (4, 5))
    out_b, _ = attention.attention(q, k, v, bias=bias)

    def biased(i):
        return softmax_ref(q[i] @ k[i].T / np.sqrt(3) + bias) @ v[i]

    assert_matches(out_b, over(B + H, biased), np.float64)


@pytest.mark.parametrize("B, H", B_H_STACKS)
def test_multi_query_attention(rng, B, H):
    q, k, v = randn(rng, B + H + (4, 3)), randn(rng, B + (5, 3)), randn(rng, B + (5, 3))
    expected = over(B + H, lambda i: attention_ref(q[i], k[i[: len(B)]], v[i[: len(B)]])[0])
    assert_matches(attention.multi_query_attention(q, k, v), expected, np.float64)


@pytest.mark.parametrize(
    "B, H, Q", [((), (), ()), ((2,), (2,), (2, 3)), ((), (3,), (4,)), ((2, 1), (), (1, 2, 2))]
)
def test_grid_attention(rng, B, H, Q):
    q = randn(rng, B + H + Q + (3,))
    k, v = randn(rng, B + H + (5, 3)), randn(rng, B + H + (5, 3))
    n_q = math.prod(Q)

    def expected(i):
        out, _ = attention_ref(q[i].reshape(n_q, 3), k[i], v[i])
        return out.reshape(Q + (3,))

    assert_matches(attention.grid_attention(q, k, v), over(B + H, expected), np.float64)


@pytest.mark.parametrize("B, H", B_H_STACKS)
def test_multi_head_self_attention(rng, B, H):
    x = randn(rng, B + (4, 6))
    wq, wk, wv = (randn(rng, H + (6, 3)) for _ in range(3))
    wo = randn(rng, H + (3, 6))
    split = over(B + H, lambda i: x[i[: len(B)]] @ wq[i[len(B) :]])
    assert_matches(attention.split_heads(x, wq), split, np.float64)
    heads = randn(rng, B + H + (4, 3))
    merged = over(B, lambda b: sum(heads[b + h] @ wo[h] for h in np.ndindex(*H)))
    assert_matches(attention.merge_heads(heads, wo), merged, np.float64)

    def block(b):
        total = 0
        for h in np.ndindex(*H):
            out, _ = attention_ref(x[b] @ wq[h], x[b] @ wk[h], x[b] @ wv[h])
            total = total + out @ wo[h]
        return total

    assert_matches(
        attention.multi_head_self_attention(x, wq, wk, wv, wo), over(B, block), np.float64
    )


@pytest.mark.parametrize("B, H", B_H_STACKS)
def test_relative_position_scores(rng, B, H):
    q, rel = randn(rng, B + H + (4, 3)), randn(rng, H + (4, 5, 3))

    def expected(i):
        qs, r = q[i], rel[i[len(B) :]]
        return np.array([[qs[a] @ r[a, b] for b in range(5)] for a in range(4)])

    assert_matches(attention.relative_position_scores(q, rel), over(B + H, expected), np.float64)


@pytest.mark.parametrize("B, M", [((), ()), ((2,), (3,)), ((2, 2), ()), ((), (1, 2))])
def test_memory_attention(rng, B, M):
    q = randn(rng, B + (4, 3))
    mk, mv = randn(rng, M + (5, 3)), randn(rng, M + (5, 3))
    expected = over(
        B + M, lambda i: attention_ref(q[i[: len(B)]], mk[i[len(B) :]], mv[i[len(B) :]])[0]
    )
    assert_matches(attention.memory_attention(q, mk, mv), expected, np.float64)


@pytest.mark.parametrize("B, H", B_H_STACKS)
def test_head_average_and_softmax(rng, B, H):
    logits = randn(rng, B + H + (4, 5))
    weights = attention.softmax(logits)
    assert_matches(weights, softmax_ref(logits), np.float64)
    expected = over(B, lambda b: sum(weights[b + h] for h in np.ndindex(*H)) / math.prod(H))
    assert_matches(attention.head_average(weights, len(H)), expected, np.float64)


# =========================================================================== forms
@pytest.mark.parametrize("B", STACKS)
def test_bilinear_and_quadratic_forms(rng, B):
    x, a, y = randn(rng, B + (3,)), randn(rng, B + (3, 4)), randn(rng, B + (4,))
    assert_matches(
        forms.batched_bilinear(x, a, y), over(B, lambda b: x[b] @ a[b] @ y[b]), np.float64
    )
    g = randn(rng, (3, 3))
    assert_matches(forms.quadratic_form(x, g), over(B, lambda b: x[b] @ g @ x[b]), np.float64)
    metrics = randn(rng, (2, 3, 3))
    expected = over((2,) + B, lambda i: x[i[1:]] @ metrics[i[:1]] @ x[i[1:]])
    assert_matches(forms.quadratic_form_per_metric(x, metrics), expected, np.float64)


@pytest.mark.parametrize("U, V", [((), ()), ((2,), (3,)), ((2, 2), (1,))])
def test_pairwise_bilinear(rng, U, V):
    x, a, y = randn(rng, U + (3,)), randn(rng, (3, 4)), randn(rng, V + (4,))
    expected = over(U + V, lambda i: x[i[: len(U)]] @ a @ y[i[len(U) :]])
    assert_matches(forms.pairwise_bilinear(x, a, y), expected, np.float64)


@pytest.mark.parametrize("B, S", [((), ()), ((2,), (3,)), ((2, 3), (2, 2)), ((), (2, 1, 3))])
def test_tensor_quadratic_forms(rng, B, S):
    n = math.prod(S)
    x = randn(rng, B + S)
    op = randn(rng, S + S)
    mat = op.reshape(n, n)
    expected = over(B, lambda b: x[b].reshape(n) @ mat @ x[b].reshape(n))
    assert_matches(forms.tensor_quadratic_form(x, op), expected, np.float64)
    ops = randn(rng, B + S + S)
    expected_b = over(B, lambda b: x[b].reshape(n) @ ops[b].reshape(n, n) @ x[b].reshape(n))
    assert_matches(forms.batched_tensor_quadratic_form(x, ops), expected_b, np.float64)


@pytest.mark.parametrize("S, T", [((), ()), ((3,), (2, 2)), ((2, 2), ())])
def test_tensor_bilinear_scalar(rng, S, T):
    u, op, v = randn(rng, S), randn(rng, S + T), randn(rng, T)
    expected = np.asarray(u.reshape(-1) @ op.reshape(math.prod(S), math.prod(T)) @ v.reshape(-1))
    out = forms.tensor_bilinear(u, op, v)
    assert np.shape(out) == ()
    assert_matches(out, expected, np.float64)


@pytest.mark.parametrize("B", STACKS)
def test_traces(rng, B):
    a, b = randn(rng, B + (3, 3)), randn(rng, B + (3, 4))
    c = randn(rng, B + (4, 3))
    assert_matches(forms.batched_trace(a), over(B, lambda i: np.trace(a[i])), np.float64)
    assert_matches(
        forms.trace_of_product(b, c), over(B, lambda i: np.trace(b[i] @ c[i])), np.float64
    )


@pytest.mark.parametrize("B, N", [((), ()), ((2,), (5,)), ((2, 1), (3, 2)), ((), (4,))])
def test_weighted_covariance(rng, B, N):
    x, w = randn(rng, B + N + (3,)), rng.random(B + N)

    def expected(b):
        return sum(w[b + n] * np.outer(x[b + n], x[b + n]) for n in np.ndindex(*N))

    assert_matches(forms.weighted_covariance(x, w, len(N)), over(B, expected), np.float64)


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_frame_cross_moments(rng, W, C):
    y, x = randn(rng, W + C + (2,)), randn(rng, W + C + (3,))
    flat_y = y.reshape((-1,) + C + (2,))
    flat_x = x.reshape((-1,) + C + (3,))
    expected = over(C, lambda c: flat_x[(slice(None),) + c].T @ flat_y[(slice(None),) + c])
    assert_matches(forms.frame_cross_moments(y, x, len(W)), expected, np.float64)


@pytest.mark.parametrize("V, W", [((), ()), ((2,), (3,)), ((2, 2), (1, 3))])
def test_precondition_sample_gradients(rng, V, W):
    diag, grads = randn(rng, V + (4,)), randn(rng, V + W + (4,))
    expected = over(W + V, lambda i: diag[i[len(W) :]] * grads[i[len(W) :] + i[: len(W)]])
    out = forms.precondition_sample_gradients(diag, grads)
    assert_matches(out, expected, np.float64)


def test_forms_float32_stays_float32(rng):
    x = randn(rng, (2, 3), np.float32)
    a = randn(rng, (2, 3, 3), np.float32)
    out = forms.batched_bilinear(x, a, x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.array([x[i] @ a[i] @ x[i] for i in range(2)]), rtol=1e-5)


# =========================================================================== transfer matrices
MPS_RANKS = (1, 2, 3, 1)
PHYS = (2, 3, 2)


def random_mps(rng, stack, dtype=np.complex128):
    return [
        randn(rng, tuple(stack) + (MPS_RANKS[k], PHYS[k], MPS_RANKS[k + 1]), dtype)
        for k in range(3)
    ]


def random_mpo_single(rng, dtype=np.complex128, bonds=(1, 2, 2, 1)):
    return [randn(rng, (bonds[k], PHYS[k], PHYS[k], bonds[k + 1]), dtype) for k in range(3)]


def transfer_kron(bra, ket):
    """``sum_s bra[:, s, :] (x) ket[:, s, :]``: rows (a, b), columns (c, d)."""
    return sum(np.kron(bra[:, s, :], ket[:, s, :]) for s in range(bra.shape[1]))


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_transfer_apply_and_matrix(rng, W, C):
    bra, ket = randn(rng, C + (2, 3, 4)), randn(rng, C + (3, 3, 2))
    boundary = randn(rng, W + C + (2, 3))
    matrices = over(C, lambda c: transfer_kron(bra[c], ket[c]))
    assert_matches(transfer.transfer_matrix(bra, ket), matrices, np.float64)
    expected = over(
        W + C, lambda i: (boundary[i].reshape(-1) @ matrices[i[len(W) :]]).reshape(4, 2)
    )
    assert_matches(transfer.transfer_apply(boundary, bra, ket), expected, np.float64)


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_dominant_boundary(rng, W, C):
    site = randn(rng, C + (3, 2, 3), np.complex128)
    start = randn(rng, W + C + (3, 3), np.complex128)

    def expected(i):
        m = transfer_kron(site[i[len(W) :]].conj(), site[i[len(W) :]])
        v = start[i].reshape(-1)
        for _ in range(4):
            v = v @ m
            v = v / np.linalg.norm(v)
        return v.reshape(3, 3)

    out = transfer.dominant_boundary(site, start, iterations=4)
    assert_matches(out, over(W + C, expected), np.complex128)


def dense_mps_single(sites):
    return dense_tt_single(sites).reshape(-1)


@pytest.mark.parametrize("C", STACKS)
def test_mpo_expectation_and_right_environments(rng, C):
    mps, mpo = random_mps(rng, C), random_mpo_single(rng)
    dense_op = dense_mpo_single(mpo)

    def expected(c):
        psi = dense_mps_single(at(mps, c))
        return np.vdot(psi, dense_op @ psi)

    values = over(C, expected)
    assert_matches(transfer.mpo_expectation(mps, mpo), values, np.complex128)
    right = transfer.mpo_right_environments(mps, mpo)
    assert [r.shape for r in right] == [
        C + (MPS_RANKS[k + 1], 2 if k < 2 else 1, MPS_RANKS[k + 1]) for k in range(3)
    ]
    # R_0 closed with the first site reproduces the expectation value.
    left = np.ones(C + (1, 1, 1), np.complex128)
    first = transfer.left_environment_step(left, mps[0].conj(), mpo[0], mps[0])
    closed = over(C, lambda c: np.sum(first[c] * right[0][c]))
    assert_matches(closed, values)


@pytest.mark.parametrize("H, C", [((), ()), ((2,), ()), ((3,), (2,)), ((1, 2), (2, 1))])
def test_mpo_expectations_per_operator(rng, H, C):
    mps = random_mps(rng, C)
    mpos = [randn(rng, H + op.shape, np.complex128) for op in random_mpo_single(rng)]

    def expected(i):
        h, c = i[: len(H)], i[len(H) :]
        psi = dense_mps_single(at(mps, c))
        return np.vdot(psi, dense_mpo_single(at(mpos, h)) @ psi)

    assert_matches(
        transfer.mpo_expectations_per_operator(mps, mpos), over(H + C, expected), np.complex128
    )


@pytest.mark.parametrize("P, C", [((), ()), ((3,), ()), ((2, 2), (2,))])
def test_local_expectations(rng, P, C):
    left, right = randn(rng, C + (2, 3)), randn(rng, C + (4, 2))
    bra, ket = randn(rng, C + (2, 3, 4)), randn(rng, C + (3, 3, 2))
    ops = randn(rng, P + (3, 3))

    def expected(i):
        p, c = i[: len(P)], i[len(P) :]
        return np.einsum("ab,asc,st,btd,cd->", left[c], bra[c], ops[p], ket[c], right[c])

    assert_matches(
        transfer.local_expectations(left, bra, ops, ket, right), over(P + C, expected), np.float64
    )


@pytest.mark.parametrize("W, C", W_C_STACKS)
def test_effective_hamiltonian_apply(rng, W, C):
    left, right = randn(rng, C + (2, 3, 2)), randn(rng, C + (3, 2, 3))
    op = randn(rng, (3, 2, 2, 2))
    x = randn(rng, W + C + (2, 2, 3))

    def expected(i):
        c = i[len(W) :]
        h = np.einsum("amb,mstn,cnd->ascbtd", left[c], op, right[c]).reshape(12, 12)
        return (h @ x[i].reshape(12)).reshape(2, 2, 3)

    out = transfer.effective_hamiltonian_apply(left, op, right, x)
    assert_matches(out, over(W + C, expected), np.float64)


@pytest.mark.parametrize("C, length", [((), 1), ((2,), 2), ((2, 1), 3)])
def test_window_correlator(rng, C, length):
    bonds = (2, 3, 2, 2)[:length] + (2,)
    sites = [randn(rng, C + (bonds[k], 2, bonds[k + 1]), np.complex128) for k in range(length)]
    ops = [randn(rng, (2, 2), np.complex128) for _ in range(length)]

    def expected(c):
        m = np.eye(bonds[0] ** 2, dtype=complex)
        for site, o in zip(sites, ops):
            a = site[c]
            m = m @ sum(
                o[s, t] * np.kron(a[:, s, :].conj(), a[:, t, :]) for s in range(2) for t in range(2)
            )
        return np.trace(m)

    assert_matches(transfer.window_correlator(sites, ops), over(C, expected), np.complex128)


# =========================================================================== Jacobian products
JVP_GROUPS = [((), (), ()), ((2,), (3,), (2,)), ((2, 3), (), (1, 2)), ((), (2, 2), (3,))]


@pytest.mark.parametrize("O, I, K", JVP_GROUPS)
def test_jvp_and_vjp(rng, O, I, K):
    no, ni, nk = math.prod(O), math.prod(I), math.prod(K)
    jac = randn(rng, O + I)
    tangents, cotangents = randn(rng, K + I), randn(rng, K + O)
    expected = (tangents.reshape(nk, ni) @ jac.reshape(no, ni).T).reshape(K + O)
    assert_matches(jvp.jvp(jac, tangents, len(I)), expected, np.float64)
    expected_v = (cotangents.reshape(nk, no) @ jac.reshape(no, ni)).reshape(K + I)
    assert_matches(jvp.vjp(cotangents, jac, len(O)), expected_v, np.float64)


@pytest.mark.parametrize("W, O, I", JVP_GROUPS)
def test_per_sample_products(rng, W, O, I):
    no, ni = math.prod(O), math.prod(I)
    jacs = randn(rng, W + O + I)
    tangent, cotangent = randn(rng, W + I), randn(rng, W + O)
    expected = over(W, lambda w: (jacs[w].reshape(no, ni) @ tangent[w].reshape(ni)).reshape(O))
    assert_matches(jvp.per_sample_jvp(jacs, tangent, len(W)), expected, np.float64)
    expected_v = over(W, lambda w: (cotangent[w].reshape(no) @ jacs[w].reshape(no, ni)).reshape(I))
    assert_matches(jvp.per_sample_vjp(cotangent, jacs, len(W)), expected_v, np.float64)


@pytest.mark.parametrize(
    "O, M, I", [((), (), ()), ((2,), (3, 2), (2,)), ((2, 2), (), (3,)), ((), (2,), (2, 2))]
)
def test_chain_rule(rng, O, M, I):
    no, nm, ni = math.prod(O), math.prod(M), math.prod(I)
    outer, inner = randn(rng, O + M), randn(rng, M + I)
    composed = outer.reshape(no, nm) @ inner.reshape(nm, ni)
    assert_matches(jvp.compose_jacobians(outer, inner, len(M)), composed.reshape(O + I), np.float64)
    K = (2, 1)
    tangents = randn(rng, K + I)
    expected = (tangents.reshape(2, ni) @ composed.T).reshape(K + O)
    assert_matches(jvp.chain_jvp(outer, inner, tangents, len(I)), expected, np.float64)


@pytest.mark.parametrize("K, W, I", JVP_GROUPS)
def test_elementwise_jvp(rng, K, W, I):
    deriv, tangents = randn(rng, W + I), randn(rng, K + W + I)
    expected = over(K, lambda k: deriv * tangents[k])
    assert_matches(jvp.elementwise_jvp(deriv, tangents), expected, np.float64)


@pytest.mark.parametrize("O, I, K", JVP_GROUPS)
def test_second_directional_derivative_and_gauss_newton(rng, O, I, K):
    no, ni = math.prod(O), math.prod(I)
    hess, tangents = randn(rng, O + I + I), randn(rng, K + I)
    h = hess.reshape(no, ni, ni)
    expected = over(
        K,
        lambda k: np.array(
            [t @ h[o] @ t for t in [tangents[k].reshape(ni)] for o in range(no)]
        ).reshape(O),
    )
    assert_matches(jvp.second_directional_derivative(hess, tangents, len(I)), expected, np.float64)
    jac = randn(rng, O + I)
    j = jac.reshape(no, ni)
    assert_matches(jvp.gauss_newton_matrix(jac, len(O)), (j.T @ j).reshape(I + I), np.float64)


@pytest.mark.parametrize(
    "W, K, C", [((), (), ()), ((2,), (3,), ()), ((), (2, 2), (2,)), ((2, 1), (), (1, 3))]
)
def test_frame_linear_jvp(rng, W, K, C):
    tangents, maps = randn(rng, W + K + C + (3,)), randn(rng, C + (3, 2))
    expected = over(W + K + C, lambda i: tangents[i] @ maps[i[len(W) + len(K) :]])
    assert_matches(jvp.frame_linear_jvp(tangents, maps), expected, np.float64)


# =========================================================================== JAX smoke test
def test_examples_run_on_jax_arrays(rng):
    # float32 throughout: the test must not flip jax_enable_x64 for the rest of the session.
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    cores = random_tt(rng, (2,), dtype=np.float32)
    probes = [randn(rng, (3, n), np.float32) for n in DIMS]
    out = tensor_train.tt_probe([jnp.asarray(c) for c in cores], [jnp.asarray(z) for z in probes])
    assert isinstance(out, jax.Array)
    np.testing.assert_allclose(
        np.asarray(out), tensor_train.tt_probe(cores, probes), rtol=1e-4, atol=1e-5
    )
    dense = tensor_train.tt_to_dense([jnp.asarray(c) for c in cores])
    assert isinstance(dense, jax.Array)
    np.testing.assert_allclose(np.asarray(dense), dense_tt(cores, (2,)), rtol=1e-4, atol=1e-5)
    index = np.array([[0, 1, 1], [1, 2, 0]])
    entries = tensor_train.tt_entries([jnp.asarray(c) for c in cores], jnp.asarray(index))
    np.testing.assert_allclose(
        np.asarray(entries), tensor_train.tt_entries(cores, index), rtol=1e-4, atol=1e-5
    )
    q, k, v = (randn(rng, (2, 3, 4, 5), np.float32) for _ in range(3))
    got = jax.jit(lambda a, b, c: attention.attention(a, b, c)[0])(q, k, v)
    np.testing.assert_allclose(
        np.asarray(got), attention.attention(q, k, v)[0], rtol=1e-4, atol=1e-5
    )


# =========================================================================== python -m examples.NAME
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE_MODULES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.py") if p.stem != "__init__")
# Optional libraries an example may import; without them its run is skipped, not failed.
OPTIONAL_IMPORTS = ("jax", "torch", "dask", "distributed", "psutil")


def test_every_example_module_is_listed():
    assert {"attention", "forms", "jvp", "tensor_train", "transfer", "tucker"} <= set(EXAMPLE_MODULES)


def _run_example(name: str, command: list[str], cwd: Path, env: dict | None = None) -> None:
    source = (EXAMPLES_DIR / f"{name}.py").read_text(encoding="utf-8")
    assert re.search(r'^if __name__ == "__main__":', source, re.MULTILINE), (
        f"examples/{name}.py has no __main__ block")
    optional = [lib for lib in OPTIONAL_IMPORTS
                if re.search(rf"^\s*(?:import|from)\s+{lib}\b", source, re.MULTILINE)]
    for lib in optional:
        pytest.importorskip(lib)
    result = subprocess.run([sys.executable, *command], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=300)
    shown = " ".join(["python", *command])
    assert result.returncode == 0, f"{shown}:\n" + result.stdout + result.stderr
    assert result.stdout.strip(), f"{shown} printed nothing"
    assert "FAILED" not in result.stdout
    # runpy warns when the package imported the module before running it as __main__
    assert "found in sys.modules" not in result.stderr, result.stderr
    if not optional:  # frameworks may log notes to stderr; plain numpy examples are quiet
        assert result.stderr == "", result.stderr


@pytest.mark.parametrize("name", EXAMPLE_MODULES)
def test_example_runs_as_a_module_and_checks_itself(name):
    """`python -m examples.NAME` runs the module's own self-check and exits 0."""
    _run_example(name, ["-m", f"examples.{name}"], cwd=EXAMPLES_DIR.parent)


@pytest.mark.parametrize("name", EXAMPLE_MODULES)
def test_example_runs_as_a_script_and_checks_itself(name, tmp_path):
    """`python examples/NAME.py` works too, from any directory and without PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run_example(name, [str(EXAMPLES_DIR / f"{name}.py")], cwd=tmp_path, env=env)
