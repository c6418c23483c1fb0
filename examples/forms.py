"""Batched bilinear and quadratic forms, traces and covariances.

``B`` is a batch group, ``M`` a stack of metrics, ``N`` a group of sample axes summed over,
``P``/``Q`` tensor-shaped vector spaces (an operator ``P + Q`` maps ``Q``-shaped tensors to
``P``-shaped ones).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script (python examples/NAME.py): import from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contractions import contract


def batched_bilinear(x, a, y):
    """``x_b^T A_b y_b`` for every batch index.

    x: ``B + (n,)``; a: ``B + (n, m)``; y: ``B + (m,)``  ->  ``B``.
    """
    return contract("Bi,Bij,Bj->B", x, a, y)


def quadratic_form(x, metric):
    """``x_b^T G x_b`` with one shared metric (squared Mahalanobis norm for ``G = S^-1``).

    x: ``B + (n,)``; metric: ``(n, n)``  ->  ``B``.
    """
    return contract("Bi,ij,Bj->B", x, metric, x)


def pairwise_bilinear(x, a, y):
    """``x_u^T A y_v`` for every pair of rows from two stacks.

    x: ``U + (n,)``; a: ``(n, m)``; y: ``V + (m,)``  ->  ``U + V``.
    """
    return contract("Ui,ij,Vj->UV", x, a, y)


def quadratic_form_per_metric(x, metrics):
    """``x_b^T G_m x_b`` for every metric of a stack and every vector, metric-major.

    x: ``B + (n,)``; metrics: ``M + (n, n)``  ->  ``M + B``.
    """
    return contract("Bi,Mij,Bj->MB", x, metrics, x)


def tensor_quadratic_form(x, op):
    """``<x_b, A x_b>`` where ``x`` is a tensor and ``A`` an operator on that tensor space.

    x: ``B + S``; op: ``S + S``  ->  ``B``. The group lengths are solved exactly
    (``len(B) = (ndim x - ndim op / 2)``) from three equations in ``B, P, Q``.
    """
    return contract("BP,PQ,BQ->B", x, op, x)


def batched_tensor_quadratic_form(x, op):
    """``<x_b, A_b x_b>`` with one operator per batch index.

    x: ``B + S``; op: ``B + S + S``  ->  ``B``.
    """
    return contract("BP,BPQ,BQ->B", x, op, x)


def tensor_bilinear(u, op, v):
    """The scalar ``<u, A v>`` for tensor-shaped ``u``, ``v`` and operator ``A``.

    u: ``S``; op: ``S + T``; v: ``T``  ->  ``()``.
    """
    return contract("P,PQ,Q->", u, op, v)


def batched_trace(a):
    """Trace of each matrix of a stack.

    a: ``B + (n, n)``  ->  ``B``.
    """
    return contract("Bii->B", a)


def trace_of_product(a, b):
    """``tr(A_b B_b)`` without forming the product.

    a: ``B + (n, m)``; b: ``B + (m, n)``  ->  ``B``.
    """
    return contract("Bij,Bji->B", a, b)


def weighted_covariance(x, weights, sample_ndim):
    """Weighted second moments ``sum_n w_bn x_bn x_bn^T`` per batch index.

    x: ``B + N + (d,)``; weights: ``B + N`` with ``len(N) == sample_ndim``  ->  ``B + (d, d)``.
    ``B`` and ``N`` always appear together, so the split has to be named: ``len_N``.
    """
    return contract("BNi,BN,BNj->Bij", x, weights, x, len_N=sample_ndim)


def frame_cross_moments(outputs, inputs, sample_ndim):
    """Per-frame cross moments ``sum_w y_wc x_wc^T`` (the normal-equation right-hand side).

    outputs: ``W + C + (m,)``; inputs: ``W + C + (n,)``  ->  ``C + (n, m)``.
    """
    return contract("WCo,WCa->Cao", outputs, inputs, len_W=sample_ndim)


def precondition_sample_gradients(diag, grads):
    """Scale per-sample gradients by a diagonal preconditioner and make them sample-major.

    diag: ``V + (p,)`` (one diagonal per parameter block ``V``);
    grads: ``V + W + (p,)`` (block-major, as accumulated)  ->  ``W + V + (p,)``.
    """
    return contract("Vo,VWo->WVo", diag, grads)


if __name__ == "__main__":
    # python -m examples.forms: batch groups of two axes, checked against np.einsum.
    import numpy as np

    rng = np.random.default_rng(0)
    x, a, y = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 5))
    got = batched_bilinear(x, a, y)
    np.testing.assert_allclose(got, np.einsum("bci,bcij,bcj->bc", x, a, y), rtol=1e-12)
    print(f"batched_bilinear over a (2, 3) batch: {got.shape}, matches np.einsum")
    samples, weights = rng.standard_normal((2, 6, 7, 3)), rng.random((2, 6, 7))  # N = (6, 7)
    cov = weighted_covariance(samples, weights, sample_ndim=2)
    np.testing.assert_allclose(cov, np.einsum("bnmi,bnm,bnmj->bij", samples, weights, samples),
                               rtol=1e-12)
    print(f"weighted_covariance over 2 sample axes: {cov.shape}, matches np.einsum")
