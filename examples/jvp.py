"""Stacked Jacobian-vector and vector-Jacobian products with tensor-shaped inputs/outputs.

A Jacobian of ``f: R^I -> R^O`` is stored as ``O + I`` (output axes, then input axes), both
groups of any number of axes. Tangents are stacked over ``K`` (``K + I``), cotangents too
(``K + O``); per-sample Jacobians carry a sample stack ``W`` in front. Where a string cannot
tell where ``O`` ends and ``I`` begins, the caller names the split with ``len_*``.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script (python examples/NAME.py): import from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contractions import contract


def jvp(jacobian, tangents, in_ndim):
    """Push a stack of tangents through a Jacobian.

    jacobian: ``O + I``; tangents: ``K + I`` with ``len(I) == in_ndim``  ->  ``K + O``.
    """
    return contract("OI,KI->KO", jacobian, tangents, len_I=in_ndim)


def vjp(cotangents, jacobian, out_ndim):
    """Pull a stack of cotangents back through a Jacobian.

    cotangents: ``K + O``; jacobian: ``O + I`` with ``len(O) == out_ndim``  ->  ``K + I``.
    """
    return contract("KO,OI->KI", cotangents, jacobian, len_O=out_ndim)


def per_sample_jvp(jacobians, tangent, sample_ndim):
    """One tangent per sample through that sample's Jacobian.

    jacobians: ``W + O + I``; tangent: ``W + I`` with ``len(W) == sample_ndim``  ->  ``W + O``.
    """
    return contract("WOI,WI->WO", jacobians, tangent, len_W=sample_ndim)


def per_sample_vjp(cotangent, jacobians, sample_ndim):
    """One cotangent per sample pulled back through that sample's Jacobian.

    cotangent: ``W + O``; jacobians: ``W + O + I``  ->  ``W + I``.
    """
    return contract("WO,WOI->WI", cotangent, jacobians, len_W=sample_ndim)


def compose_jacobians(outer, inner, mid_ndim):
    """Chain rule ``J_{g o f} = J_g J_f`` over a tensor-shaped intermediate ``M``.

    outer: ``O + M``; inner: ``M + I`` with ``len(M) == mid_ndim``  ->  ``O + I``.
    """
    return contract("OM,MI->OI", outer, inner, len_M=mid_ndim)


def chain_jvp(outer, inner, tangents, in_ndim):
    """``J_g (J_f t_k)`` for a stack of tangents, without forming ``J_g J_f`` first or after.

    outer: ``O + M``; inner: ``M + I``; tangents: ``K + I`` with ``len(I) == in_ndim``
    ->  ``K + O``.
    """
    return contract("OM,MI,KI->KO", outer, inner, tangents, len_I=in_ndim)


def elementwise_jvp(derivative, tangents):
    """JVP of an elementwise map ``y = f(x)`` at a stack of points: ``f'(x) * t``.

    derivative: ``W + I`` (``f'`` at each sample); tangents: ``K + W + I``  ->  ``K + W + I``.
    """
    return contract("WI,KWI->KWI", derivative, tangents)


def second_directional_derivative(hessian, tangents, in_ndim):
    """``H[t_k, t_k]`` for each tangent of a stack (second-order term of a Taylor expansion).

    hessian: ``O + I + I``; tangents: ``K + I`` with ``len(I) == in_ndim``  ->  ``K + O``.
    """
    return contract("OIJ,KI,KJ->KO", hessian, tangents, tangents, len_I=in_ndim)


def gauss_newton_matrix(jacobian, out_ndim):
    """Gauss-Newton matrix ``J^T J`` of a Jacobian with tensor-shaped input.

    jacobian: ``O + I`` with ``len(O) == out_ndim``  ->  ``I + I``.
    """
    return contract("OI,OJ->IJ", jacobian, jacobian, len_O=out_ndim)


def frame_linear_jvp(tangents, maps):
    """JVP of per-frame linear maps ``x_c -> x_c A_c`` on a ``W x K`` block of tangents.

    tangents: ``W + K + C + (n,)``; maps: ``C + (n, m)``  ->  ``W + K + C + (m,)``.
    W and K travel together, so only their total is needed, and the string decides it.
    """
    return contract("WKCi,Cio->WKCo", tangents, maps)


if __name__ == "__main__":
    # python -m examples.jvp: a Jacobian of R^(3,4) -> R^(2,) pushed and pulled through
    # stacks of tangents, against np.einsum and a finite difference of a linear map.
    import numpy as np

    rng = np.random.default_rng(0)
    jac = rng.standard_normal((2, 3, 4))            # O = (2,), I = (3, 4)
    tangents = rng.standard_normal((5, 3, 4))       # K = (5,)
    pushed = jvp(jac, tangents, in_ndim=2)
    np.testing.assert_allclose(pushed, np.einsum("oij,kij->ko", jac, tangents), rtol=1e-12)
    f = lambda x: np.tensordot(jac, x, axes=2)
    np.testing.assert_allclose(pushed[0], f(tangents[0]), rtol=1e-12)
    cot = rng.standard_normal((5, 2))
    pulled = vjp(cot, jac, out_ndim=1)
    np.testing.assert_allclose(pulled, np.einsum("ko,oij->kij", cot, jac), rtol=1e-12)
    print(f"jvp {pushed.shape} and vjp {pulled.shape} with a (3, 4) input: match np.einsum")
