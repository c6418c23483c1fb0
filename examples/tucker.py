"""Stacked Tucker tensors (order 3, plus a general-order densifier).

A Tucker tensor is a core ``G: C + (r_1, r_2, r_3)`` and factors ``U_k: C + (n_k, r_k)``,
``T = G x_1 U_1 x_2 U_2 x_3 U_3``. ``C`` stacks Tucker tensors (frames) that share ranks;
``W`` stacks samples/probes and ``K`` tangent directions, ordered ``W, K, C``.
"""

from __future__ import annotations

import string
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script (python examples/NAME.py): import from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contractions import contract
from examples._arrays import namespace


def tucker_to_dense(core, factors):
    """Dense tensors of a stack of order-3 Tucker tensors.

    core: ``C + (r_1, r_2, r_3)``; factors[k]: ``C + (n_k, r_k)``  ->  ``C + (n_1, n_2, n_3)``.
    """
    U1, U2, U3 = factors
    return contract("Cpqr,Cip,Cjq,Ckr->Cijk", core, U1, U2, U3)


def tucker_to_dense_nd(core, factors):
    """Dense tensors of a stack of Tucker tensors of any order ``N`` (up to 13).

    core: ``C + (r_1, ..., r_N)``; factors[k]: ``C + (n_k, r_k)``  ->  ``C + (n_1, ..., n_N)``.
    The subscripts are built for the order at hand (a dynamic call site).
    """
    order = len(factors)
    ranks = string.ascii_lowercase[:order]
    modes = string.ascii_lowercase[13 : 13 + order]
    subscripts = "C" + ranks
    for mode, rank in zip(modes, ranks):
        subscripts += ",C" + mode + rank
    subscripts += "->C" + modes
    return contract(subscripts, core, *factors)


def tucker_project(data, factors):
    """Project a stack of dense tensors onto every frame's factor bases: ``X x_k U_k^H``.

    data: ``W + (n_1, n_2, n_3)``; factors[k]: ``C + (n_k, r_k)``  ->  ``W + C + (r_1, r_2, r_3)``.
    """
    U1, U2, U3 = (U.conj() for U in factors)
    return contract("Wijk,Cip,Cjq,Ckr->WCpqr", data, U1, U2, U3)


def tucker_entries(core, factors, index):
    """Entries at a stack of multi-indices.

    core: ``C + (r_1, r_2, r_3)``; factors[k]: ``C + (n_k, r_k)``; index: integer ``W + (3,)``
    ->  ``W + C``. Gathered factor rows have layout ``C + W + (r_k,)``.
    """
    rows = [U[..., index[..., k], :] for k, U in enumerate(factors)]
    return contract("Cpqr,CWp,CWq,CWr->WC", core, *rows)


def _project_probes(factors, probes):
    """``U_k^T z_k`` for every probe and frame: probes[k] ``W + (n_k,)`` -> ``W + C + (r_k,)``."""
    return [contract("Wi,Cip->WCp", z, U) for z, U in zip(probes, factors)]


def tucker_probe(core, factors, probes):
    """``<T_c, z_w1 (x) z_w2 (x) z_w3>`` for rank-one probes (bilinear, no conjugation).

    core: ``C + (r_1, r_2, r_3)``; factors[k]: ``C + (n_k, r_k)``; probes[k]: ``W + (n_k,)``
    ->  ``W + C``.
    """
    y1, y2, y3 = _project_probes(factors, probes)
    return contract("Cpqr,WCp,WCq,WCr->WC", core, y1, y2, y3)


def tucker_probe_core_adjoint(factors, probes, residuals):
    """Adjoint of the probe map w.r.t. the core: ``sum_w r_wc (U^T z_w1) (x) ... ``.

    factors[k]: ``C + (n_k, r_k)``; probes[k]: ``W + (n_k,)``; residuals: ``W + C``
    ->  ``C + (r_1, r_2, r_3)``. W and C only ever appear together on the inputs: ``len_W``.
    """
    y1, y2, y3 = _project_probes(factors, probes)
    sample_ndim = probes[0].ndim - 1
    return contract("WC,WCp,WCq,WCr->Cpqr", residuals, y1, y2, y3, len_W=sample_ndim)


def tucker_tangent_to_dense(core, factors, core_variation, factor_variations):
    """Dense tangent vectors at a stack of Tucker frames.

    ``dT = dG x U + G x_1 dU_1 x ... + G x_2 dU_2 x ... + G x_3 dU_3 x ...``.
    core: ``C + (r_1, r_2, r_3)``; factors[k]: ``C + (n_k, r_k)``;
    core_variation: ``K + C + (r_1, r_2, r_3)``; factor_variations[k]: ``K + C + (n_k, r_k)``
    ->  ``K + C + (n_1, n_2, n_3)``.
    """
    U1, U2, U3 = factors
    dU1, dU2, dU3 = factor_variations
    return (
        contract("KCpqr,Cip,Cjq,Ckr->KCijk", core_variation, U1, U2, U3)
        + contract("KCip,Cpqr,Cjq,Ckr->KCijk", dU1, core, U2, U3)
        + contract("KCjq,Cpqr,Cip,Ckr->KCijk", dU2, core, U1, U3)
        + contract("KCkr,Cpqr,Cip,Cjq->KCijk", dU3, core, U1, U2)
    )


def tucker_mode_grams(data, sample_ndim):
    """Mode-k Gram matrices ``sum_w X_(k) X_(k)^H`` of stacked data, per frame.

    data: ``W + C + (n_1, n_2, n_3)`` with ``len(W) == sample_ndim``
    ->  three arrays ``C + (n_k, n_k)``.
    """
    conj = data.conj()
    return (
        contract("WCiab,WCjab->Cij", data, conj, len_W=sample_ndim),
        contract("WCaib,WCajb->Cij", data, conj, len_W=sample_ndim),
        contract("WCabi,WCabj->Cij", data, conj, len_W=sample_ndim),
    )


def tucker_hosvd(data, ranks, sample_ndim):
    """Truncated HOSVD factors fitted to stacked data (leading eigenvectors of the mode Grams).

    data: ``W + C + (n_1, n_2, n_3)``; ranks: ``(r_1, r_2, r_3)``
    ->  (core ``C + ranks`` of the sample mean, factors ``C + (n_k, r_k)``).
    """
    xp = namespace(data)
    factors = []
    for gram, rank in zip(tucker_mode_grams(data, sample_ndim), ranks):
        _, vectors = xp.linalg.eigh(gram)  # ascending eigenvalues
        factors.append(vectors[..., ::-1][..., :rank])
    mean = data.mean(axis=tuple(range(sample_ndim)))
    U1, U2, U3 = (U.conj() for U in factors)
    core = contract("Cijk,Cip,Cjq,Ckr->Cpqr", mean, U1, U2, U3)
    return core, factors


def tucker_inner(core_x, factors_x, core_y, factors_y):
    """Inner products ``<X_c, Y_e>`` between two stacks of Tucker tensors (X conjugated).

    core_x: ``C + (p_1, p_2, p_3)``, factors_x[k]: ``C + (n_k, p_k)``;
    core_y: ``D + (s_1, s_2, s_3)``, factors_y[k]: ``D + (n_k, s_k)``  ->  ``C + D``.
    """
    M1, M2, M3 = (contract("Cip,Dis->CDps", Ux.conj(), Uy) for Ux, Uy in zip(factors_x, factors_y))
    return contract("Cpqr,CDps,CDqt,CDru,Dstu->CD", core_x.conj(), M1, M2, M3, core_y)


if __name__ == "__main__":
    # python -m examples.tucker: a (2, 2) stack of Tucker tensors densified and probed,
    # against np.einsum on hand-expanded strings.
    import numpy as np

    rng = np.random.default_rng(0)
    core = rng.standard_normal((2, 2, 2, 3, 2))                          # C = (2, 2), ranks (2, 3, 2)
    factors = [rng.standard_normal((2, 2, n, r)) for n, r in ((4, 2), (5, 3), (3, 2))]
    dense = tucker_to_dense(core, factors)
    expected = np.einsum("cdpqr,cdip,cdjq,cdkr->cdijk", core, *factors)
    np.testing.assert_allclose(dense, expected, rtol=1e-12, atol=1e-12)
    probes = [rng.standard_normal((3, n)) for n in (4, 5, 3)]          # W = (3,)
    values = tucker_probe(core, factors, probes)
    np.testing.assert_allclose(values, np.einsum("cdijk,wi,wj,wk->wcd", expected, *probes),
                               rtol=1e-10, atol=1e-12)
    print(f"tucker_to_dense {dense.shape} and tucker_probe {values.shape}: match np.einsum")
