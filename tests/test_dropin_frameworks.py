"""np.einsum's forms on the other array libraries (each test skips without its library)."""

import numpy as np
import pytest

from contractions import contract

CALLS = [
    ("...ij,...jk", [(5, 1, 2, 3), (4, 3, 6)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("...Wa,Wab->...Wb", [(4, 2, 3, 5), (2, 3, 5, 6)]),
    ("i,i", [(3,), (3,)]),
]


def _convert(library, array):
    if library == "jax":
        import jax.numpy as jnp

        return jnp.asarray(array)
    if library == "torch":
        import torch

        return torch.from_numpy(array)
    import dask.array as da

    return da.from_array(array, chunks=2)


@pytest.mark.parametrize("library, module", [("jax", "jax"), ("torch", "torch"), ("dask", "dask.array")])
@pytest.mark.parametrize("subscripts, shapes", CALLS)
def test_numpy_forms_run_on_every_library(library, module, subscripts, shapes):
    pytest.importorskip(module)
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(s) for s in shapes]
    want = contract(subscripts, *ops)
    got = contract(subscripts, *(_convert(library, op) for op in ops))
    if library == "dask":
        got = got.compute()
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_sublists_on_torch():
    torch = pytest.importorskip("torch")
    a, b = torch.ones(2, 3, dtype=torch.float64), torch.ones(3, 4, dtype=torch.float64)
    got = contract(a, [0, 1], b, [1, 2], [0, 2])
    assert isinstance(got, torch.Tensor) and torch.allclose(got, a @ b)
