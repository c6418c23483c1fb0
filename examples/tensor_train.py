"""Stacked tensor-train (TT) operations.

Layout (the house stacking convention):

- A TT is a list of ``d`` cores; core ``k`` has shape ``C + (r_{k-1}, n_k, r_k)`` with
  ``r_0 = r_d = 1``. ``C`` is the core/frame stack: ``C = ()`` is a single TT, ``C = (m,)``
  an ensemble of ``m`` TTs with equal ranks, ``C = (m, p)`` a grid of them.
- A rank-one probe holds one vector per site, ``W + (n_k,)``; ``W`` is the probe/sample stack.
- A tangent vector at a TT frame is given by one core variation per site,
  ``K + C + (r_{k-1}, n_k, r_k)``; ``K`` is the tangent stack.
- Stacks are ordered ``W, K, C`` (frame-inner), then the core's own indices.

Probe evaluation is bilinear (no complex conjugation); inner products and Gram matrices
conjugate their first argument.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script (python examples/NAME.py): import from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contractions import contract
from examples._arrays import namespace


def _result_dtype(xp, *arrays):
    return xp.result_type(*[a.dtype for a in arrays])


# --------------------------------------------------------------------------- evaluation


def tt_to_dense(cores):
    """Dense tensor of every TT in the stack.

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``  ->  ``C + (n_1, ..., n_d)``.
    """
    xp = namespace(*cores)
    stack = cores[0].shape[:-3]
    # P collects the physical axes already absorbed; it starts empty.
    state = xp.ones(stack + (1,), dtype=_result_dtype(xp, *cores))
    for core in cores:
        state = contract("CPa,Caib->CPib", state, core)
    return state[..., 0]


def tt_probe(cores, probes):
    """``<T_c, z_w1 (x) ... (x) z_wd>`` for every probe ``w`` and every TT ``c``.

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``; probes[k]: ``W + (n_k,)``  ->  ``W + C``.
    """
    state = contract("Wi,Cib->WCb", probes[0], cores[0][..., 0, :, :])
    for core, z in zip(cores[1:], probes[1:]):
        state = contract("WCa,Caib,Wi->WCb", state, core, z)
    return state[..., 0]


def tt_probe_per_member(cores, probes):
    """Like :func:`tt_probe`, but every TT in the stack has its own probes.

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``; probes[k]: ``W + C + (n_k,)``  ->  ``W + C``.
    """
    xp = namespace(*cores, *probes)
    w_and_c = probes[0].shape[:-1]
    state = xp.ones(w_and_c + (1,), dtype=_result_dtype(xp, *cores, *probes))
    for core, z in zip(cores, probes):
        state = contract("WCa,Caib,WCi->WCb", state, core, z)
    return state[..., 0]


def tt_entries(cores, index):
    """Entries ``T_c[i_1, ..., i_d]`` at a stack of multi-indices.

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``; index: integer ``W + (d,)``  ->  ``W + C``.
    Fancy indexing puts the gathered ``W`` axes *inside* the core (``C + (r, ) + W + (r',)``),
    so the strings name that layout; ``C`` and ``W`` sit together in one term there, hence
    ``len_W``.
    """
    w_ndim = index.ndim - 1
    first = cores[0][..., 0, index[..., 0], :]  # C + W + (r_1,)
    state = contract("CWb->WCb", first, len_W=w_ndim)
    for k in range(1, len(cores)):
        picked = cores[k][..., index[..., k], :]  # C + (r_{k-1},) + W + (r_k,)
        state = contract("WCa,CaWb->WCb", state, picked, len_W=w_ndim)
    return state[..., 0]


def tt_dense_probe(cores, dense):
    """``<T_c, X_w>`` for dense probe tensors, by densifying the TTs.

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``; dense: ``W + (n_1, ..., n_d)``  ->  ``W + C``.
    """
    return contract("WP,CP->WC", dense, tt_to_dense(cores), len_P=len(cores))


def tt_dense_probe_sweep(cores, dense):
    """``<T_c, X_w>`` for dense probes, one site at a time (never forms the dense TT).

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``; dense: ``W + (n_1, ..., n_d)``  ->  ``W + C``.
    ``R`` holds the physical axes of the probe still to be contracted (empty at the end).
    """
    w_ndim = dense.ndim - len(cores)
    state = contract("WiR,Cib->WCbR", dense, cores[0][..., 0, :, :], len_W=w_ndim)
    for core in cores[1:]:
        state = contract("WCaiR,Caib->WCbR", state, core, len_W=w_ndim)
    return state[..., 0]


# --------------------------------------------------------------------------- operators


def tt_apply_mpo(mpo, cores):
    """Apply a stack of TT operators (MPOs) to a stack of TT vectors, in TT format.

    mpo[k]: ``C + (a_{k-1}, m_k, n_k, a_k)``; cores[k]: ``W + (r_{k-1}, n_k, r_k)``
    ->  list of ``W + C + (a_{k-1} r_{k-1}, m_k, a_k r_k)`` (ranks multiply).
    """
    out = []
    for op, core in zip(mpo, cores):
        y = contract("Caijb,Wcjd->WCacibd", op, core)
        a, c, i, b, d = y.shape[-5:]
        out.append(y.reshape(y.shape[:-5] + (a * c, i, b * d)))
    return out


def tt_apply_mpo_dense(mpo, x):
    """Apply a stack of MPOs to a stack of dense vectors.

    mpo[k]: ``C + (a_{k-1}, m_k, n_k, a_k)``; x: ``W + (n_1, ..., n_d)``
    ->  ``W + C + (m_1, ..., m_d)``.
    Each step consumes the leading input axis and appends an output axis at the end:
    ``R`` (inputs still to consume) and ``P`` (outputs produced) travel together.
    """
    w_ndim = x.ndim - len(mpo)
    c_ndim = mpo[0].ndim - 4
    state = contract("WjR,Cijb->WCbRi", x, mpo[0][..., 0, :, :, :], len_W=w_ndim)
    for op in mpo[1:]:
        state = contract("WCajRP,Caijb->WCbRPi", state, op, len_W=w_ndim)
    return state.squeeze(axis=w_ndim + c_ndim)  # the closing bond, a_d = 1


# --------------------------------------------------------------------------- Gram matrices


def tt_inner(cores_x, cores_y):
    """Inner products ``<X_c, Y_e>`` between two stacks of TTs (X conjugated).

    cores_x[k]: ``C + (r_{k-1}, n_k, r_k)``; cores_y[k]: ``D + (s_{k-1}, n_k, s_k)``
    ->  ``C + D``.  ``tt_inner(cores, cores)`` is the Gram matrix of one stack.
    """
    env = contract("Cib,Did->CDbd", cores_x[0][..., 0, :, :].conj(), cores_y[0][..., 0, :, :])
    for x, y in zip(cores_x[1:], cores_y[1:]):
        env = contract("CDab,Caic,Dbid->CDcd", env, x.conj(), y)
    # Close the boundary: both closing bonds have size 1, so the trace is the single entry.
    return contract("CDaa->CD", env)


def tt_left_orthogonalize(cores):
    """Left-orthogonal cores (QR sweep) representing the same stack of TTs.

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``  ->  same layout; every core but the last satisfies
    ``sum_{a,i} conj(U[a,i,b]) U[a,i,b'] = delta_{bb'}``. Ranks may shrink to ``r_{k-1} n_k``.
    """
    xp = namespace(*cores)
    out = []
    carry = None
    for k, core in enumerate(cores):
        if carry is not None:
            core = contract("Cab,Cbic->Caic", carry, core)
        if k == len(cores) - 1:
            out.append(core)
            break
        *stack, a, i, b = core.shape
        q, carry = xp.linalg.qr(core.reshape(tuple(stack) + (a * i, b)))
        out.append(q.reshape(tuple(stack) + (a, i, q.shape[-1])))
    return out


# --------------------------------------------------------------------------- tangent stacks


def tt_tangent_probe(left_cores, right_cores, variations, probes):
    """Probe values of a stack of tangent vectors at a TT frame (forward-mode sweep).

    The tangent is ``dT = sum_k U_1 .. U_{k-1} dU_k V_{k+1} .. V_d``.
    left_cores[k] ``U_k`` and right_cores[k] ``V_k``: ``C + (r_{k-1}, n_k, r_k)``;
    variations[k] ``dU_k``: ``K + C + (r_{k-1}, n_k, r_k)``; probes[k]: ``W + (n_k,)``
    ->  ``W + K + C``.
    """
    z0 = probes[0]
    plain = contract("Wi,Cib->WCb", z0, left_cores[0][..., 0, :, :])
    tangent = contract("Wi,KCib->WKCb", z0, variations[0][..., 0, :, :])
    for U, V, dU, z in zip(left_cores[1:], right_cores[1:], variations[1:], probes[1:]):
        carried = contract("WKCa,Caib,Wi->WKCb", tangent, V, z)  # variation already left of k
        tangent = carried + contract("WCa,KCaib,Wi->WKCb", plain, dU, z)  # variation at k
        plain = contract("WCa,Caib,Wi->WCb", plain, U, z)
    return tangent[..., 0]


def tt_gauge_project(left_cores, variations):
    """Project each variation onto the gauge ``U_k^H dU_k = 0`` (all sites but the last).

    left_cores[k]: ``C + (r_{k-1}, n_k, r_k)`` (left-orthogonal);
    variations[k]: ``K + C + (r_{k-1}, n_k, r_k)``  ->  same layout as ``variations``.
    """
    out = []
    last = len(variations) - 1
    for k, (U, dU) in enumerate(zip(left_cores, variations)):
        if k < last:
            overlap = contract("Caib,KCaic->KCbc", U.conj(), dU)
            dU = dU - contract("Caib,KCbc->KCaic", U, overlap)
        out.append(dU)
    return out


def tt_tangent_gram(left_cores, variations_x, variations_y):
    """Gram matrix of two tangent stacks at the same frames, in the standard gauge.

    With ``U_k`` left-, ``V_k`` right-orthogonal and gauge-projected variations, the tangent
    inner product is ``sum_k <dX_k, dY_k>``.
    left_cores[k]: ``C + (r_{k-1}, n_k, r_k)``; variations_x[k]: ``K + C + core``;
    variations_y[k]: ``L + C + core``  ->  ``C + K + L``.
    """
    frame_ndim = left_cores[0].ndim - 3
    gram = 0
    for dX, dY in zip(variations_x, variations_y):
        gram = gram + contract("KCaib,LCaib->CKL", dX.conj(), dY, len_C=frame_ndim)
    return gram


# --------------------------------------------------------------------------- adjoint lifts


def tt_left_environments(cores, probes):
    """Left environments of the probe map: ``L_k`` contracts sites ``< k`` with the probes.

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``; probes[k]: ``W + (n_k,)``
    ->  list of ``W + C + (r_{k-1},)``, ``L_0`` all ones.
    """
    xp = namespace(*cores, *probes)
    shape = probes[0].shape[:-1] + cores[0].shape[:-3] + (1,)
    envs = [xp.ones(shape, dtype=_result_dtype(xp, *cores, *probes))]
    for core, z in zip(cores[:-1], probes[:-1]):
        envs.append(contract("WCa,Caib,Wi->WCb", envs[-1], core, z))
    return envs


def tt_right_environments(cores, probes):
    """Right environments: ``R_k`` contracts sites ``> k`` with the probes.

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``; probes[k]: ``W + (n_k,)``
    ->  list of ``W + C + (r_k,)``, ``R_{d-1}`` all ones.
    """
    xp = namespace(*cores, *probes)
    shape = probes[0].shape[:-1] + cores[0].shape[:-3] + (1,)
    envs = [xp.ones(shape, dtype=_result_dtype(xp, *cores, *probes))]
    for core, z in zip(cores[:0:-1], probes[:0:-1]):
        envs.append(contract("Caib,Wi,WCb->WCa", core, z, envs[-1]))
    return envs[::-1]


def tt_probe_adjoint(cores, probes, residuals):
    """Adjoint of the probe map, core by core: ``G_k = sum_w r_wc d<T_c, z_w>/d core_k``.

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``; probes[k]: ``W + (n_k,)``; residuals: ``W + C``
    ->  list of ``C + (r_{k-1}, n_k, r_k)`` (the gradient of ``sum r * probe``).
    """
    left = tt_left_environments(cores, probes)
    right = tt_right_environments(cores, probes)
    return [
        contract("WCa,Wi,WCb,WC->Caib", L, z, R, residuals) for L, z, R in zip(left, probes, right)
    ]


def tt_probe_adjoint_stacked(cores, probes, residuals):
    """Adjoint lift of a stack of residual vectors into a tangent stack of core variations.

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``; probes[k]: ``W + (n_k,)``;
    residuals: ``W + K + C``  ->  list of ``K + C + (r_{k-1}, n_k, r_k)``.
    """
    left = tt_left_environments(cores, probes)
    right = tt_right_environments(cores, probes)
    return [
        contract("WCa,Wi,WCb,WKC->KCaib", L, z, R, residuals)
        for L, z, R in zip(left, probes, right)
    ]


def tt_probe_per_member_adjoint(cores, probes, residuals):
    """Adjoint of :func:`tt_probe_per_member`.

    cores[k]: ``C + (r_{k-1}, n_k, r_k)``; probes[k]: ``W + C + (n_k,)``; residuals: ``W + C``
    ->  list of ``C + (r_{k-1}, n_k, r_k)``.
    W and C always sit together on the inputs but the output keeps only C, so the boundary
    between them has to be given: ``len_W``.
    """
    xp = namespace(*cores, *probes)
    w_ndim = residuals.ndim - (cores[0].ndim - 3)
    ones = xp.ones(probes[0].shape[:-1] + (1,), dtype=_result_dtype(xp, *cores, *probes))
    left = [ones]
    for core, z in zip(cores[:-1], probes[:-1]):
        left.append(contract("WCa,Caib,WCi->WCb", left[-1], core, z))
    right = [ones]
    for core, z in zip(cores[:0:-1], probes[:0:-1]):
        right.append(contract("Caib,WCi,WCb->WCa", core, z, right[-1]))
    right = right[::-1]
    return [
        contract("WCa,WCi,WCb,WC->Caib", L, z, R, residuals, len_W=w_ndim)
        for L, z, R in zip(left, probes, right)
    ]


if __name__ == "__main__":
    # python -m examples.tensor_train: a (2, 2) stack of 3-site TTs densified and probed by
    # a (3,) stack of rank-one probes, against reshape-and-matmul and np.einsum references.
    import numpy as np

    rng = np.random.default_rng(0)
    ranks, dims = (1, 2, 3, 1), (2, 3, 2)
    cores = [rng.standard_normal((2, 2, ranks[k], dims[k], ranks[k + 1])) for k in range(3)]
    dense = tt_to_dense(cores)
    for c in np.ndindex(2, 2):  # one TT at a time: a chain of matrix products
        state = np.ones((1, 1))
        for core in cores:
            r, n, r_next = core[c].shape
            state = (state @ core[c].reshape(r, n * r_next)).reshape(-1, r_next)
        np.testing.assert_allclose(dense[c], state[:, 0].reshape(dims), rtol=1e-12, atol=1e-12)
    probes = [rng.standard_normal((3, n)) for n in dims]
    values = tt_probe(cores, probes)
    np.testing.assert_allclose(values, np.einsum("cdijk,wi,wj,wk->wcd", dense, *probes),
                               rtol=1e-10, atol=1e-12)
    print(f"tt_to_dense {dense.shape} and tt_probe {values.shape}: match the references")
