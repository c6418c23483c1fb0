"""PyTorch backend: results vs numpy references, dtype promotion and preferred_element_type,
> 52 axes (pairwise relabelling and the batched-matmul step), torch.vmap (in_dims 0 / negative /
None, out_dims, nested, chunk_size), autograd reverse and forward mode, torch.func.grad /
jacrev / jacfwd, and finite-difference gradchecks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.autograd.forward_ad as fwAD

from contractions import contract, expand_subscripts, make_plan, make_schedule
from contractions.backends import BackendOptions, torch_backend
from contractions.backends.torch_backend import contract_labelled, torch_dtype

from ._references import loop_reference

REPO = Path(__file__).resolve().parents[1]
rng = np.random.default_rng(1234)


def randn(*shape, dtype=torch.float64):
    return torch.tensor(rng.standard_normal(shape), dtype=dtype)


def close(actual, expected, tol=1e-10):
    a = actual.detach().numpy() if isinstance(actual, torch.Tensor) else np.asarray(actual)
    e = expected.detach().numpy() if isinstance(expected, torch.Tensor) else np.asarray(expected)
    assert a.shape == e.shape, (a.shape, e.shape)
    np.testing.assert_allclose(a, e, rtol=tol, atol=tol * max(1.0, float(np.abs(e).max(initial=0))))


TT = "WCa,Caib,WCi->WCb"
X, CORES, Z = randn(4, 2, 3), randn(2, 3, 5, 6), randn(4, 2, 5)


# ------------------------------------------------------------------------ results
CASES = [
    # (subscripts, shapes, supplements, hand-expanded lowercase reference for np.einsum)
    (TT, [(4, 2, 3), (2, 3, 5, 6), (4, 2, 5)], {}, "wca,caib,wci->wcb"),
    (TT, [(3, 4, 2, 3), (2, 3, 5, 6), (3, 4, 2, 5)], {}, "uwca,caib,uwci->uwcb"),
    (TT, [(3,), (3, 5, 6), (5,)], {}, "a,aib,i->b"),  # empty groups vanish
    ("WCo,WCa->Cao", [(3, 2, 5), (3, 2, 4)], {"len_W": 1}, "wco,wca->cao"),
    ("Wii->W", [(3, 4, 4)], {}, "wii->w"),
    ("Wa,Wa->", [(2, 3, 4), (2, 3, 4)], {}, "uva,uva->"),
    ("Wab,Wbc->Wac", [(2, 1, 3, 4), (1, 5, 4, 6)], {}, "uvab,uvbc->uvac"),  # size-1 broadcast
]


@pytest.mark.parametrize("subscripts,shapes,supp,ref", CASES)
def test_contract_on_tensors_matches_numpy(subscripts, shapes, supp, ref):
    ops = [randn(*s) for s in shapes]
    out = contract(subscripts, *ops, **supp)
    assert isinstance(out, torch.Tensor)
    close(out, np.einsum(ref, *(o.numpy() for o in ops)))


def test_backend_interface_compiles_the_schedule():
    plan = make_plan(TT, (tuple(X.shape), tuple(CORES.shape), tuple(Z.shape)), ())
    run = torch_backend.compile(plan, make_schedule(plan, "greedy"), BackendOptions())
    close(run(X, CORES, Z), np.einsum("wca,caib,wci->wcb", X, CORES, Z))


def test_inputs_are_not_modified():
    x, y = randn(3, 4, dtype=torch.float32), randn(4, 5)
    x0, y0 = x.clone(), y.clone()
    contract("Wa,ab->Wb", x, y)
    assert torch.equal(x, x0) and torch.equal(y, y0) and x.dtype == torch.float32


# --------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("a,b,expected", [
    (torch.float32, torch.float64, torch.float64),
    (torch.float32, torch.complex64, torch.complex64),
    (torch.int64, torch.float32, torch.float32),
    (torch.bfloat16, torch.float32, torch.float32),
    (torch.bfloat16, torch.bfloat16, torch.bfloat16),
    (torch.int32, torch.int64, torch.int64),
])
def test_dtype_promotion_matches_torch_rules(a, b, expected):
    x = (randn(2, 3, 4) * 3).to(a)
    y = (randn(4, 5) * 3).to(b)
    out = contract("Wa,ab->Wb", x, y)
    assert out.dtype == expected == torch.promote_types(a, b)
    ref = np.einsum("wva,ab->wvb", x.to(torch.complex128).numpy(), y.to(torch.complex128).numpy())
    tol = 3e-2 if torch.bfloat16 in (a, b) else 1e-5
    close(out.to(torch.complex128), ref, tol=tol)


@pytest.mark.parametrize("pet", [torch.float64, "float64", np.float64, np.dtype("float64")])
def test_preferred_element_type_casts_operands_first(pet):
    x = randn(2, 3, 4).to(torch.bfloat16)
    y = randn(4, 5).to(torch.bfloat16)
    out = contract("Wa,ab->Wb", x, y, preferred_element_type=pet)
    assert out.dtype == torch.float64
    # The product of the bfloat16 values, accumulated in float64 (not rounded to bfloat16).
    close(out, np.einsum("wva,ab->wvb", x.double().numpy(), y.double().numpy()), tol=1e-12)


def test_torch_dtype_names():
    assert torch_dtype("bfloat16") is torch.bfloat16
    assert torch_dtype(np.complex64) is torch.complex64
    with pytest.raises(TypeError, match="names no torch dtype"):
        torch_dtype("Tensor")


def test_mixed_numpy_and_torch_operands_give_a_tensor():
    x = rng.standard_normal((4, 2, 3))  # numpy float64
    out = contract(TT, x, CORES.float(), Z.float())
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    close(out, np.einsum("wca,caib,wci->wcb", x, CORES.float().double(), Z.float().double()))


# ------------------------------------------------------------------------ > 52 axes
def sparse_shape(n: int, big: dict[int, int]) -> tuple[int, ...]:
    return tuple(big.get(i, 1) for i in range(n))


def test_more_than_52_axes_in_one_pairwise_step_uses_matmul_route():
    # A = 30, B = 20 (contracted), C = 10 axes: the single step touches 60 > 52 axes.
    x = randn(*sparse_shape(50, {0: 2, 7: 3, 31: 2, 45: 2}))
    y = randn(*sparse_shape(30, {1: 2, 12: 3, 25: 2}))
    hand = expand_subscripts("AB,BC->AC", x.ndim, y.ndim, len_A=30)
    assert len(set(hand) - set(",->")) == 60
    out = contract("AB,BC->AC", x, y, len_A=30)
    close(out, loop_reference("AB,BC->AC", [x.numpy(), y.numpy()], {"A": 30, "B": 20, "C": 10}))


def test_more_than_52_axes_over_three_operands_with_diagonal():
    x = randn(*sparse_shape(40, {0: 2, 39: 2}))
    y = randn(*sparse_shape(22, {3: 2, 20: 3, 21: 3}))  # B (10) C (10) then 'ii'
    z = randn(*sparse_shape(15, {0: 2, 14: 3}))
    s = "AB,BCii,CD->ADi"
    hand = expand_subscripts(s, x.ndim, y.ndim, z.ndim, len_A=30, len_C=10)
    assert len(set(hand) - set(",->")) > 52
    out = contract(s, x, y, z, len_A=30, len_C=10)
    close(out, loop_reference(s, [x.numpy(), y.numpy(), z.numpy()], {"A": 30, "B": 10, "C": 10, "D": 5}))


def test_more_than_52_axes_under_vmap_and_grad():
    x = randn(*sparse_shape(50, {0: 2, 31: 2}))
    ys = randn(3, *sparse_shape(30, {1: 2, 25: 2}))  # vmapped over a leading axis of 3
    f = lambda y: contract("AB,BC->AC", x, y, len_A=30)
    out = torch.vmap(f)(ys)
    for k in range(3):
        close(out[k], loop_reference("AB,BC->AC", [x.numpy(), ys[k].numpy()], {"A": 30, "B": 20, "C": 10}))
    g = torch.func.grad(lambda y: f(y).sum())(ys[0])
    # d sum / d y[B, C] = sum over A of x[A, B]
    close(g, x.sum(dim=tuple(range(30)))[(...,) + (None,) * 10].expand(ys[0].shape))


@pytest.mark.parametrize("letters", [0, 1, 2, 3, 4, 52])
@pytest.mark.parametrize("spec", [
    "ab,bc->ac", "abc,bcd,dce->ae", "aab,bc->ca", "ab,ab->", "ab->ba", "abc,abd->abcd",
    "ii->", "iij,jk,k->i", "ab,cd->abcd", "ab,bc,cd,de->ae", "abc,cba->b", "abcd,dcba,ac->db",
])
def test_pairwise_routes_match_numpy(spec, letters):
    """Forcing tiny letter budgets runs the relabelled pairwise and matmul routes on small data."""
    lhs, out = spec.split("->")
    terms = lhs.split(",")
    local = np.random.default_rng(zlib.crc32(f"{spec}/{letters}".encode()))
    sizes = {ch: int(local.integers(1, 4)) for ch in set(spec) - set(",->")}
    arrays = [local.standard_normal([sizes[c] for c in t]) for t in terms]
    # Broadcast: some operand sees extent 1 on a shared, non-diagonal axis.
    if "b" in terms[0] and len(terms) > 1 and "b" in terms[1] and terms[0].count("b") == 1:
        arrays[0] = arrays[0].take([0], axis=terms[0].index("b"))
    ref = np.einsum(spec, *arrays)
    got = contract_labelled([torch.tensor(a) for a in arrays],
                            [[ord(c) + 1000 for c in t] for t in terms],
                            [ord(c) + 1000 for c in out], letters=letters)
    close(got, ref)


# -------------------------------------------------------------------------- vmap
def test_vmap_in_dims_zero():
    xs = randn(7, 4, 2, 3)
    out = torch.vmap(lambda x: contract(TT, x, CORES, Z))(xs)
    close(out, np.einsum("vwca,caib,wci->vwcb", xs, CORES, Z))


def test_vmap_negative_and_none_in_dims_with_out_dims():
    xs, zs = randn(4, 2, 3, 7), randn(7, 4, 2, 5)
    f = lambda x, c, z: contract(TT, x, c, z)
    out = torch.vmap(f, in_dims=(-1, None, 0), out_dims=-1)(xs, CORES, zs)
    close(out, np.einsum("wcav,caib,vwci->wcbv", xs, CORES, zs))
    out1 = torch.vmap(f, in_dims=(-1, None, 0), out_dims=1)(xs, CORES, zs)
    close(out1, np.einsum("wcav,caib,vwci->wvcb", xs, CORES, zs))


def test_nested_vmap_and_chunk_size():
    xs = randn(4, 2, 3, 8)
    cs = randn(6, 2, 3, 5, 6)
    f = lambda x, c: contract(TT, x, c, Z)
    ref = np.einsum("wcau,kcaib,wci->uwcbk", xs, cs, Z)
    for chunk in (None, 1, 4):
        inner = torch.vmap(f, in_dims=(-1, None), out_dims=0, chunk_size=chunk)
        outer = torch.vmap(inner, in_dims=(None, 0), out_dims=-1, chunk_size=chunk)
        close(outer(xs, cs), ref)


def test_vmap_per_example_gradients():
    """The classic use: per-example gradients with vmap(grad(...))."""
    xs = randn(5, 2, 3)  # per example: W = (2,), a = 3
    w = randn(3, 4)

    def loss(w, x):
        return contract("Wa,ab->Wb", x, w).pow(2).sum()

    grads = torch.vmap(torch.func.grad(loss), in_dims=(None, 0))(w, xs)
    for k in range(5):
        y = xs[k] @ w
        close(grads[k], 2 * xs[k].T @ y)


# ------------------------------------------------------------------- autograd
def test_autograd_reverse_mode_matches_analytic():
    x, c, z = (t.clone().requires_grad_(True) for t in (X, CORES, Z))
    g = randn(4, 2, 6)
    (contract(TT, x, c, z) * g).sum().backward()
    close(x.grad, np.einsum("wcb,caib,wci->wca", g, CORES, Z))
    close(c.grad, np.einsum("wcb,wca,wci->caib", g, X, Z))
    close(z.grad, np.einsum("wcb,wca,caib->wci", g, X, CORES))


def test_autograd_forward_mode_matches_analytic():
    tx, tz = randn(*X.shape), randn(*Z.shape)
    with fwAD.dual_level():
        x = fwAD.make_dual(X, tx)
        z = fwAD.make_dual(Z, tz)
        primal, tangent = fwAD.unpack_dual(contract(TT, x, CORES, z))
    close(primal, np.einsum("wca,caib,wci->wcb", X, CORES, Z))
    close(tangent, np.einsum("wca,caib,wci->wcb", tx, CORES, Z)
          + np.einsum("wca,caib,wci->wcb", X, CORES, tz))


def test_func_grad_jacrev_jacfwd_match_analytic():
    x, y = randn(3, 2, 4), randn(2, 4, 5)
    f = lambda y: contract("WCa,Cab->WCb", x, y)
    expected = np.einsum("wca,cd,be->wcbdae", x, np.eye(2), np.eye(5))
    close(torch.func.jacrev(f)(y), expected)
    close(torch.func.jacfwd(f)(y), expected)
    g = torch.func.grad(lambda y: f(y).sum())(y)
    close(g, np.broadcast_to(np.einsum("wca->ca", x)[..., None], y.shape))


def test_hessian_of_quadratic_form():
    a = randn(4, 4)
    x = randn(3, 4)
    h = torch.func.hessian(lambda x: contract("Wa,ab,Wb->", x, a, x))(x)
    close(h, np.einsum("wv,ij->wivj", np.eye(3), a + a.T))


def test_gradcheck_and_gradgradcheck_finite_differences():
    x, y, z = (randn(*s).requires_grad_(True) for s in [(2, 3, 4), (3, 4, 5), (2, 3, 5)])

    def f(x, y, z):
        h = torch.tanh(contract("WCa,Cab->WCb", x, y))
        return contract("WCb,WCb->W", h, z, len_W=1)

    assert torch.autograd.gradcheck(f, (x, y, z))
    assert torch.autograd.gradgradcheck(f, (x, y, z))


# ------------------------------------------------------------------ import hygiene
def test_torch_contract_does_not_import_jax():
    code = textwrap.dedent("""
        import sys, torch
        from contractions import contract
        out = contract('Wa,ab->Wb', torch.ones(2, 3), torch.ones(3, 4))
        print(type(out).__name__, 'jax' in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["Tensor", "False"]


def test_permutation_is_torch_einsums_result():
    """'CWb->WCb' returns what torch.einsum returns for the hand-expanded string: a view, with
    the same values and strides (no copy; numpy's backend copies instead)."""
    x = randn(2, 3, 4, 5, 6)
    ours, theirs = contract("CWb->WCb", x, len_C=2), torch.einsum("abcde->cdabe", x)
    assert torch.equal(ours, theirs) and ours.stride() == theirs.stride()
    assert ours.data_ptr() == x.data_ptr() == theirs.data_ptr()
    assert ours.shape == (4, 5, 2, 3, 6)


def test_errors_still_raise_on_the_warm_path():
    """A warm signature is in the hot dict; a call that differs in shape, dtype or operand
    count misses it and is checked: the same errors as a cold call."""
    from contractions.errors import ContractionError, SizeMismatchError
    x, y = randn(2, 3, 4), randn(4, 5)
    contract("Wa,ab->Wb", x, y)
    contract("Wa,ab->Wb", x, y)        # warm
    with pytest.raises(SizeMismatchError, match="Wa,ab->Wb"):
        contract("Wa,ab->Wb", x, randn(3, 5))
    with pytest.raises(ContractionError, match="Wa,ab->Wb"):
        contract("Wa,ab->Wb", x)
    mixed = contract("Wa,ab->Wb", x, y.to(torch.float32))          # promoted, not refused
    assert mixed.dtype == torch.float64
    close(mixed, torch.einsum("ija,ab->ijb", x, y.to(torch.float32).to(torch.float64)))
    with pytest.raises(TypeError, match="len_W"):
        contract("Wa,ab->Wb", x, y, len_W=True)        # a bool is not a length
    with pytest.raises(ContractionError, match="len_W"):
        contract("Wa,ab->Wb", x, y, len_W=1)           # warm shapes, a contradicting len_W


def test_traced_route_is_torch_einsum_on_the_expanded_string():
    """Under torch.compile the graph AOTAutograd produces for contract equals the one for a
    hand-written torch.einsum on the expanded string (so Inductor compiles the same thing)."""
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs = {}

    def capture(name):
        def backend(gm, inputs):
            def forward(g, _):
                graphs[name] = [str(n.target) for n in g.graph.nodes if n.op == "call_function"]
                return g
            return aot_module_simplified(gm, inputs, fw_compiler=forward)
        return backend

    ops = [randn(2, 2, 3, 4), randn(2, 5, 4, 3), randn(2, 2, 5), randn(2, 3, 3)]
    torch._dynamo.reset()
    ours = torch.compile(lambda *t: contract("KCjq,Cpqr,Cip,Ckr->KCijk", *t), fullgraph=True,
                         backend=capture("ours"))(*ops)
    torch._dynamo.reset()
    theirs = torch.compile(lambda *t: torch.einsum("ABjq,Bpqr,Bip,Bkr->ABijk", *t),
                           fullgraph=True, backend=capture("theirs"))(*ops)
    torch._dynamo.reset()
    assert graphs["ours"] == graphs["theirs"] and "aten.bmm.default" in graphs["ours"]
    close(ours, theirs)
