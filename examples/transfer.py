"""MPS/MPO transfer-matrix contractions: environments, expectation values, block solvers.

An MPS site tensor is ``C + (a, s, b)`` (left bond, physical, right bond) with ``C`` a stack of
states; an MPO site tensor is ``(m, s, t, n)`` (left bond, out, in, right bond), optionally
stacked over ``H`` (several operators at once). Environments carry the bra bond, MPO bond and
ket bond: ``C + (a, m, b)``. Bras are conjugated by the caller-facing functions.
"""

from __future__ import annotations

import string
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script (python examples/NAME.py): import from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import contractions as ct
from examples._arrays import namespace


def transfer_apply(boundary, bra, ket):
    """Push a stack of boundary vectors one site to the right through the transfer matrix.

    boundary: ``W + C + (a, b)``; bra, ket: ``C + (a, s, c)`` / ``C + (b, s, d)``
    ->  ``W + C + (c, d)`` (the bra is used as given; pass ``bra.conj()`` for a norm).
    """
    return ct.contract("WCab,Casc,Cbsd->WCcd", boundary, bra, ket)


def transfer_matrix(bra, ket):
    """Dense transfer matrix of one site, as a matrix acting on ``(a, b)`` row vectors.

    bra, ket: ``C + (a, s, c)``, ``C + (b, s, d)``  ->  ``C + (a b, c d)``.
    """
    t = ct.contract("Casc,Cbsd->Cabcd", bra, ket)
    a, b, c, d = t.shape[-4:]
    return t.reshape(t.shape[:-4] + (a * b, c * d))


def dominant_boundary(site, boundaries, iterations):
    """Power iteration for the dominant left fixed point of a uniform MPS transfer matrix.

    site: ``C + (r, s, r)``; boundaries: ``W + C + (r, r)`` (a stack of starting vectors)
    ->  normalized ``W + C + (r, r)`` after ``iterations`` steps.
    """
    xp = namespace(site, boundaries)
    v = boundaries
    for _ in range(iterations):
        v = transfer_apply(v, site.conj(), site)
        norm2 = ct.contract("WCab,WCab->WC", v.conj(), v)  # W, C travel together
        v = v / xp.sqrt(xp.real(norm2))[..., None, None]
    return v


def left_environment_step(env, bra, op, ket):
    """Grow a left environment by one site of ``<bra| O |ket>``.

    env: ``C + (a, m, b)``; bra: ``C + (a, s, c)`` (conjugated already); op: ``(m, s, t, n)``;
    ket: ``C + (b, t, d)``  ->  ``C + (c, n, d)``.
    """
    return ct.contract("Camb,Casc,mstn,Cbtd->Ccnd", env, bra, op, ket)


def left_environment_step_per_operator(env, bra, ops, ket):
    """Left environment step for a stack ``H`` of MPOs at once (e.g. several observables).

    env: ``H + C + (a, m, b)``; bra: ``C + (a, s, c)``; ops: ``H + (m, s, t, n)``;
    ket: ``C + (b, t, d)``  ->  ``H + C + (c, n, d)``.
    """
    return ct.contract("HCamb,Casc,Hmstn,Cbtd->HCcnd", env, bra, ops, ket)


def right_environment_step(bra, op, ket, env):
    """Grow a right environment by one site.

    bra: ``C + (a, s, c)`` (conjugated already); op: ``(m, s, t, n)``; ket: ``C + (b, t, d)``;
    env: ``C + (c, n, d)``  ->  ``C + (a, m, b)``.
    """
    return ct.contract("Casc,mstn,Cbtd,Ccnd->Camb", bra, op, ket, env)


def mpo_expectation(mps, mpo):
    """``<psi_c| O |psi_c>`` for a stack of MPS (open boundaries).

    mps[k]: ``C + (r_{k-1}, s_k, r_k)``; mpo[k]: ``(m_{k-1}, s_k, t_k, m_k)``  ->  ``C``.
    """
    xp = namespace(*mps, *mpo)
    stack = mps[0].shape[:-3]
    env = xp.ones(stack + (1, 1, 1), dtype=xp.result_type(*[a.dtype for a in (*mps, *mpo)]))
    for site, op in zip(mps, mpo):
        env = left_environment_step(env, site.conj(), op, site)
    return env[..., 0, 0, 0]


def mpo_expectations_per_operator(mps, mpos):
    """``<psi_c| O_h |psi_c>`` for a stack of MPS and a stack ``H`` of MPOs.

    mps[k]: ``C + (r_{k-1}, s_k, r_k)``; mpos[k]: ``H + (m_{k-1}, s_k, t_k, m_k)``  ->  ``H + C``.
    """
    xp = namespace(*mps, *mpos)
    shape = mpos[0].shape[:-4] + mps[0].shape[:-3] + (1, 1, 1)
    env = xp.ones(shape, dtype=xp.result_type(*[a.dtype for a in (*mps, *mpos)]))
    for site, ops in zip(mps, mpos):
        env = left_environment_step_per_operator(env, site.conj(), ops, site)
    return env[..., 0, 0, 0]


def mpo_right_environments(mps, mpo):
    """All right environments of ``<psi|O|psi>``: ``R_k`` contracts sites ``> k``.

    mps[k]: ``C + (r_{k-1}, s_k, r_k)``; mpo[k]: ``(m_{k-1}, s_k, t_k, m_k)``
    ->  list of ``C + (r_k, m_k, r_k)``, the last all ones.
    """
    xp = namespace(*mps, *mpo)
    stack = mps[0].shape[:-3]
    envs = [xp.ones(stack + (1, 1, 1), dtype=xp.result_type(*[a.dtype for a in (*mps, *mpo)]))]
    for site, op in zip(mps[:0:-1], mpo[:0:-1]):
        envs.append(right_environment_step(site.conj(), op, site, envs[-1]))
    return envs[::-1]


def local_expectations(left, bra, ops, ket, right):
    """Expectation of a stack ``P`` of one-site operators in mixed-canonical form.

    left: ``C + (a, b)``; bra: ``C + (a, s, c)`` (conjugated already); ops: ``P + (s, t)``;
    ket: ``C + (b, t, d)``; right: ``C + (c, d)``  ->  ``P + C`` (operator-major).
    """
    return ct.contract("Cab,Casc,Pst,Cbtd,Ccd->PC", left, bra, ops, ket, right)


def effective_hamiltonian_apply(left, op, right, x):
    """Apply the one-site effective Hamiltonian to a block of trial vectors (block Davidson).

    left: ``C + (a, m, b)``; op: ``(m, s, t, n)``; right: ``C + (c, n, d)``;
    x: ``W + C + (b, t, d)``  ->  ``W + C + (a, s, c)``.
    """
    return ct.contract("Camb,WCbtd,mstn,Ccnd->WCasc", left, x, op, right)


def window_correlator(sites, ops):
    """``<psi| O_1 (x) ... (x) O_L |psi>`` over a window of ``L <= 6`` sites, in one contraction.

    sites[k]: ``C + (r_{k-1}, s_k, r_k)`` (window of an MPS whose outer bonds are closed by
    tracing, i.e. a periodic window); ops[k]: ``(s_k, t_k)``  ->  ``C``.
    The subscripts are assembled for the window length (a dynamic call site).
    """
    length = len(sites)
    bra_bonds = string.ascii_lowercase[:length]
    ket_bonds = string.ascii_lowercase[6 : 6 + length]
    phys_out = string.ascii_lowercase[12 : 12 + length]
    phys_in = string.ascii_lowercase[18 : 18 + length]
    terms = []
    operands = []
    for k in range(length):
        nxt = (k + 1) % length
        terms.append("C" + bra_bonds[k] + phys_out[k] + bra_bonds[nxt])
        terms.append(phys_out[k] + phys_in[k])
        terms.append("C" + ket_bonds[k] + phys_in[k] + ket_bonds[nxt])
        operands += [sites[k].conj(), ops[k], sites[k]]
    return ct.contract(",".join(terms) + "->C", *operands)


if __name__ == "__main__":
    # python -m examples.transfer: <psi|O|psi> for a (2,) stack of 3-site MPS, against the
    # dense state vectors and the dense operator.
    import numpy as np

    rng = np.random.default_rng(0)
    bonds = (1, 2, 2, 1)
    mps = [rng.standard_normal((2, bonds[k], 2, bonds[k + 1])) for k in range(3)]
    mpo = [rng.standard_normal((bonds[k], 2, 2, bonds[k + 1])) for k in range(3)]
    got = mpo_expectation(mps, mpo)
    psi = np.einsum("caib,cbjd,cdke->caijke", *mps).reshape(2, 8)
    op = np.einsum("mipx,xjqy,ykrz->mijkpqrz", *mpo).reshape(8, 8)
    np.testing.assert_allclose(got, np.einsum("ci,ij,cj->c", psi, op, psi), rtol=1e-10)
    print(f"mpo_expectation over a stack of 2 states: {got.shape}, matches the dense reference")
