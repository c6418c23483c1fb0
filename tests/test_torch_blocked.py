"""torch with an explicit memory_limit that cuts the call into blocks: eager, torch.vmap
(the blocks are then assembled without in-place writes), torch.func.grad / jacrev / vjp / jvp
and double backward, on blocked and unblocked schedules, against np.einsum on the
hand-expanded string; and the schedule run on ``meta`` tensors (no data, no host round trip)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from contractions import contract, contract_expression  # noqa: E402

TT = "WCa,Caib,WCi->WCb"
SHAPES = ((6, 2, 8), (2, 8, 8, 9), (6, 2, 8))   # W = (6,), C = (2,), a = 8, i = 8, b = 9
LIMIT = 60                                      # elements: forces blocks at these shapes


def operands(seed=0, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    return tuple(torch.tensor(rng.standard_normal(s), dtype=dtype) for s in SHAPES)


def np_tt(x, c, z):
    return np.einsum("wca,caib,wci->wcb", *(np.asarray(t.detach()) for t in (x, c, z)))


def test_the_limit_forces_blocks_and_none_does_not():
    blocked = contract_expression(TT, *SHAPES, memory_limit=LIMIT).schedule
    free = contract_expression(TT, *SHAPES, memory_limit=None).schedule
    assert blocked.blocking is not None and blocked.blocking.n_blocks > 1
    assert free.blocking is None


@pytest.mark.parametrize("limit", [None, LIMIT])
def test_eager_blocked_equals_numpy(limit):
    x, c, z = operands()
    np.testing.assert_allclose(contract(TT, x, c, z, memory_limit=limit), np_tt(x, c, z), rtol=1e-12)


def test_accumulating_blocks_sum_over_a_contracted_label():
    # A tight limit slices the summed labels a and b: block results are added up.
    rng = np.random.default_rng(3)
    shapes, path = ((60,), (60, 60), (60, 3)), [(0, 1), (0, 1)]
    blocking = contract_expression("a,ab,bc->c", *shapes, optimize=path, memory_limit=30).schedule.blocking
    assert blocking is not None and blocking.accumulate and blocking.n_blocks > 1
    x, m, y = (torch.tensor(rng.standard_normal(s)) for s in shapes)
    ref = np.einsum("a,ab,bc->c", x.numpy(), m.numpy(), y.numpy())
    f = lambda x, m: contract("a,ab,bc->c", x, m, y, optimize=path, memory_limit=30)
    np.testing.assert_allclose(f(x, m), ref, rtol=1e-12)
    out = torch.vmap(f, in_dims=(0, None))(torch.stack([x, 2 * x]), m)
    np.testing.assert_allclose(out, np.stack([ref, 2 * ref]), rtol=1e-12)
    g = torch.func.grad(lambda m: f(x, m).sum())(m)
    np.testing.assert_allclose(g, np.einsum("a,bc->ab", x.numpy(), y.numpy()), rtol=1e-12)


@pytest.mark.parametrize("limit", [None, LIMIT])
def test_vmap_with_blocks(limit):
    rng = np.random.default_rng(1)
    xs = torch.tensor(rng.standard_normal((3, *SHAPES[0])))
    _, c, z = operands()
    out = torch.vmap(lambda x: contract(TT, x, c, z, memory_limit=limit))(xs)
    ref = np.einsum("vwca,caib,wci->vwcb", xs.numpy(), c.numpy(), z.numpy())
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    # mapped on a non-leading axis, the cores mapped too, out_dims elsewhere
    cs = torch.tensor(rng.standard_normal((*SHAPES[1], 3)))
    out = torch.vmap(lambda x, c: contract(TT, x, c, z, memory_limit=limit),
                     in_dims=(0, -1), out_dims=-1)(xs, cs)
    ref = np.einsum("vwca,caibv,wci->wcbv", xs.numpy(), cs.numpy(), z.numpy())
    np.testing.assert_allclose(out, ref, rtol=1e-12)


@pytest.mark.parametrize("limit", [None, LIMIT])
def test_grad_jacrev_vjp_jvp(limit):
    x, c, z = operands()
    g = torch.tensor(np.random.default_rng(2).standard_normal((6, 2, 9)))
    f = lambda x: contract(TT, x, c, z, memory_limit=limit)
    expected_grad = np.einsum("wcb,caib,wci->wca", g.numpy(), c.numpy(), z.numpy())
    np.testing.assert_allclose(torch.func.grad(lambda x: (f(x) * g).sum())(x), expected_grad,
                               rtol=1e-12)
    out, pullback = torch.func.vjp(f, x)
    np.testing.assert_allclose(out, np_tt(x, c, z), rtol=1e-12)
    np.testing.assert_allclose(pullback(g)[0], expected_grad, rtol=1e-12)
    jac = torch.func.jacrev(f)(x)
    expected_jac = np.einsum("caib,wci,wv,cd->wcbvda", c.numpy(), z.numpy(), np.eye(6), np.eye(2))
    np.testing.assert_allclose(jac, expected_jac, rtol=1e-12, atol=1e-12)
    _, tangent = torch.func.jvp(f, (x,), (x,))
    np.testing.assert_allclose(tangent, np_tt(x, c, z), rtol=1e-12)   # linear in x


@pytest.mark.parametrize("limit", [None, LIMIT])
def test_autograd_and_double_backward(limit):
    x, c, z = operands()
    x = x.clone().requires_grad_(True)
    c = c.clone().requires_grad_(True)
    out = contract(TT, x, c, z, memory_limit=limit)
    loss = (out ** 2).sum()
    gx, = torch.autograd.grad(loss, x, create_graph=True)
    # d loss / dx = 2 * sum_b out * (c z): check the first derivative, then differentiate again
    ref_out = np_tt(x, c, z)
    np.testing.assert_allclose(gx.detach(), 2 * np.einsum("wcb,caib,wci->wca", ref_out,
                                                         c.detach().numpy(), z.numpy()), rtol=1e-10)
    gxc, = torch.autograd.grad(gx.sum(), c)
    ref = torch.func.grad(lambda c: torch.func.grad(
        lambda x: (torch.einsum("wca,caib,wci->wcb", x, c, z) ** 2).sum())(x.detach()).sum())(c.detach())
    np.testing.assert_allclose(gxc, ref, rtol=1e-10)


def test_gradgradcheck_blocked():
    rng = np.random.default_rng(5)
    x, c, z = (torch.tensor(rng.standard_normal(s)) for s in [(3, 2, 2), (2, 2, 3, 2), (3, 2, 3)])
    x.requires_grad_(True)
    c.requires_grad_(True)
    path = [(1, 2), (0, 1)]   # an explicit path always runs pairwise, so it can block
    f = lambda x, c: contract(TT, x, c, z, optimize=path, memory_limit=8)
    assert contract_expression(TT, x.shape, c.shape, z.shape, optimize=path,
                               memory_limit=8).schedule.blocking is not None
    assert torch.autograd.gradcheck(f, (x, c))
    assert torch.autograd.gradgradcheck(f, (x, c))


def test_per_example_gradients_blocked():
    rng = np.random.default_rng(4)
    shapes, path = ((4, 60), (60, 60), (60, 4)), [(0, 1), (0, 1)]
    assert contract_expression("Wa,ab,bc->Wc", *shapes, optimize=path,
                               memory_limit=30).schedule.blocking is not None
    xs = torch.tensor(rng.standard_normal((3, *shapes[0])))
    m, y = (torch.tensor(rng.standard_normal(s)) for s in shapes[1:])
    loss = lambda m, x: contract("Wa,ab,bc->Wc", x, m, y, optimize=path,
                                 memory_limit=30).pow(2).sum()
    grads = torch.vmap(torch.func.grad(loss), in_dims=(None, 0))(m, xs)
    for k in range(3):
        x = xs[k].numpy()
        out = x @ m.numpy() @ y.numpy()
        np.testing.assert_allclose(grads[k], 2 * x.T @ out @ y.numpy().T, rtol=1e-10)


# --------------------------------------------------------------------------- meta device
@pytest.mark.parametrize("limit", [None, LIMIT])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_meta_tensors_give_shapes_and_dtypes(limit, dtype):
    x, c, z = (t.to(device="meta", dtype=dtype) for t in operands())
    out = contract(TT, x, c, z, memory_limit=limit)
    assert out.device.type == "meta" and out.shape == (6, 2, 9) and out.dtype == dtype


@pytest.mark.parametrize("optimize", ["auto", [(0, 1), (0, 1)], False])
def test_meta_tensors_on_every_route(optimize):
    big = ((64, 8, 32), (8, 32, 32, 32), (64, 8, 32))
    ops = [torch.empty(s, device="meta") for s in big]
    out = contract(TT, *ops, optimize=optimize)
    assert out.device.type == "meta" and out.shape == (64, 8, 32)
    mixed = contract(TT, ops[0], ops[1].to(torch.float64), ops[2])
    assert mixed.device.type == "meta" and mixed.dtype == torch.float64


def test_numpy_operand_goes_to_the_tensors_device():
    x = torch.empty(SHAPES[0], device="meta")
    c = np.ones(SHAPES[1], dtype=np.float32)
    z = torch.empty(SHAPES[2], device="meta")
    out = contract(TT, x, c, z)
    assert out.device.type == "meta" and out.shape == (6, 2, 9)
