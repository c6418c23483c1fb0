"""CuPy backend, on the CPU stand-in (tests/_fake_cupy.py registered as ``sys.modules['cupy']``):
the backend's own code path against the loop oracle (the repo's vocabulary) and np.einsum on
hand-expanded strings; results stay device arrays; ``out=``, ``memory_limit=``, ``explain``,
``contract_expression``; host arrays refused (type and message), numpy scalars mixed in; the
GPU pricing of CuPy's and CUDA torch's schedules.  The stand-in refuses any numpy array passed
to its functions and any implicit conversion to numpy, so a host round trip fails here."""

from __future__ import annotations

import collections
import subprocess
import sys
import types
import zlib
from dataclasses import replace

import numpy as np
import pytest

from contractions import (
    SizeMismatchError,
    contract,
    contract_expression,
    explain,
    explanation,
    make_plan,
    make_schedule,
)
from contractions.backends import backend_for, backend_named, measured
from contractions.model.gpu_prices import CUPY_MODEL, TORCH_CUDA_MODEL, GpuCostModel

from . import _fake_cupy
from ._references import loop_reference
from ._vocabulary import random_problem, vocabulary

TT = "WCa,Caib,WCi->WCb"
VOCABULARY = vocabulary()


def steps_first(name, run, operands, sync):
    """A timer (backends/measured.py) under which the steps are always the faster route."""
    sync()
    return run(*operands), 1.0 if name == "steps" else 2.0


@pytest.fixture
def cp(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy)
    monkeypatch.setattr(measured, "_CHOSEN", collections.OrderedDict())   # no choice carried over
    monkeypatch.setattr(measured, "timer", steps_first)
    _fake_cupy.calls.clear()
    return _fake_cupy


def on_device(x) -> bool:
    return type(x) is _fake_cupy.ndarray


def lengths_of(subscripts, group_shapes):
    lengths = {g: len(s) for g, s in group_shapes.items()}
    lengths.update({c: 1 for c in subscripts if c.islower()})
    return lengths


def tt_operands(rng, dtype=np.float64):
    return (rng.standard_normal((5, 2, 3)).astype(dtype), rng.standard_normal((2, 3, 4, 6)).astype(dtype),
            rng.standard_normal((5, 2, 4)).astype(dtype))


# ------------------------------------------------------------------ results
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 2e-4)])
@pytest.mark.parametrize("subscripts,pins", VOCABULARY, ids=[s for s, _ in VOCABULARY])
def test_vocabulary_matches_the_loop_oracle(cp, subscripts, pins, dtype, tol):
    rng = np.random.default_rng(zlib.crc32(f"{subscripts}/{np.dtype(dtype).name}".encode()))
    problem = random_problem(subscripts, pins, rng, extents=(1, 3), dtype=dtype)
    got = contract(subscripts, *(cp.asarray(op) for op in problem.operands), **problem.len_kwargs)
    assert on_device(got) and got.dtype == dtype
    want = loop_reference(subscripts, problem.operands, lengths_of(subscripts, problem.group_shapes))
    np.testing.assert_allclose(got.get(), want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max(initial=0))))


@pytest.mark.parametrize("subscripts,expanded,shapes,kwargs", [
    (TT, "wca,caib,wci->wcb", ((5, 2, 3), (2, 3, 4, 6), (5, 2, 4)), {}),
    (TT, "wvcda,cdaib,wvcdi->wvcdb", ((5, 3, 2, 2, 3), (2, 2, 3, 4, 6), (5, 3, 2, 2, 4)), {"len_W": 2}),
    ("BHqd,BHkd->BHqk", "bhqd,bhkd->bhqk", ((2, 3, 5, 4), (2, 3, 6, 4)), {}),
    ("Bii->B", "bii->b", ((3, 4, 4),), {}),
    ("P,PQ,Q->", "p,pq,q->", ((5,), (5, 6), (6,)), {}),
    ("CWb->WCb", "cwb->wcb", ((2, 3, 4),), {"len_W": 1}),
    ("Wi,Cib->WCb", "wi,cib->wcb", ((3, 4), (2, 4, 5)), {}),
])
def test_matches_np_einsum_on_the_hand_expanded_string(cp, subscripts, expanded, shapes, kwargs):
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(s) for s in shapes]
    got = contract(subscripts, *(cp.asarray(a) for a in arrays), **kwargs)
    assert on_device(got)
    np.testing.assert_allclose(got.get(), np.einsum(expanded, *arrays), rtol=1e-12, atol=1e-12)


def test_past_52_axes_runs_the_steps(cp):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1,) * 29 + (2, 3))      # A: 30 axes, then b
    y = rng.standard_normal((1,) * 29 + (2, 3))      # B: 30 axes, then b
    got = contract("Ab,Bb->AB", cp.asarray(x), cp.asarray(y))
    assert on_device(got) and got.shape == (1,) * 29 + (2,) + (1,) * 29 + (2,)
    want = np.einsum("ab,cb->ac", x.reshape(2, 3), y.reshape(2, 3))
    np.testing.assert_allclose(got.get().reshape(2, 2), want, rtol=1e-12)


def test_products_run_on_cupy_matmul_and_no_einsum_once_the_steps_measure_faster(cp):
    x, c, z = (cp.asarray(a) for a in tt_operands(np.random.default_rng(0)))
    for _ in range(measured.ROUNDS * 3):   # the measuring calls (steps, and two einsum routes)
        contract(TT, x, c, z)
    cp.calls.clear()
    contract(TT, x, c, z)
    assert cp.calls["matmul"] >= 1 and cp.calls["einsum"] == 0


def test_one_einsum_call_runs_cupy_einsum_along_the_path(cp):
    x, c, z = tt_operands(np.random.default_rng(1))
    got = contract(TT, cp.asarray(x), cp.asarray(c), cp.asarray(z), optimize=False)
    assert cp.calls["einsum"] == 1 and cp.calls["matmul"] == 0
    np.testing.assert_allclose(got.get(), np.einsum("wca,caib,wci->wcb", x, c, z), rtol=1e-12)


def test_preferred_element_type_casts_on_the_device(cp):
    x, c, z = tt_operands(np.random.default_rng(2))
    got = contract(TT, cp.asarray(x), cp.asarray(c), cp.asarray(z), preferred_element_type="float32")
    assert on_device(got) and got.dtype == np.float32
    np.testing.assert_allclose(got.get(), np.einsum("wca,caib,wci->wcb", x, c, z), rtol=1e-4)


# ------------------------------------------------------------------ scalars and host arrays
@pytest.mark.parametrize("scalar", [np.float64(2.5), 2.5, 3, np.float32(2.0)])
def test_numpy_scalars_and_python_numbers_mix_in(cp, scalar):
    x = np.random.default_rng(4).standard_normal((3, 4))
    got = contract("Wa,->Wa", cp.asarray(x), scalar)
    assert on_device(got)
    np.testing.assert_allclose(got.get(), np.einsum("wa,->wa", x, scalar), rtol=1e-6)
    assert got.dtype == np.einsum("wa,->wa", x, scalar).dtype


@pytest.mark.parametrize("host", [np.ones(3), [1.0, 1.0, 1.0], np.ones(())])
def test_a_host_array_among_cupy_arrays_is_refused(cp, host):
    x = cp.asarray(np.ones((2, 3)))
    kind = "numpy array" if isinstance(host, np.ndarray) else "list"
    subscripts = "Wa,a->W" if np.ndim(host) else "Wa,->W"
    with pytest.raises(TypeError, match=rf"operand 1 is a {kind} but operand 0 is a cupy array; a host "
                                        r"array is not copied to the device .*cupy\.asarray\(operand 1\)"):
        contract(subscripts, x, host)
    with pytest.raises(TypeError, match="operand 0 is a numpy array but operand 1 is a cupy array"):
        contract("a,Wa->W", np.ones(3), x)


def test_contractions_never_imports_cupy():
    code = ("import sys, numpy as np\nfrom contractions import contract, explain\n"
            "contract('Wa,a->W', np.ones((2, 3)), np.ones(3)); explain('Wa,a->W', (2, 3), (3,))\n"
            "assert 'cupy' not in sys.modules, 'cupy imported'\n"
            "assert 'contractions.backends.cupy_backend' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------ out=, memory_limit=
def test_out_takes_a_cupy_array(cp):
    x, c, z = tt_operands(np.random.default_rng(5))
    out = cp.zeros((5, 2, 6))
    got = contract(TT, cp.asarray(x), cp.asarray(c), cp.asarray(z), out=out)
    assert got is out and cp.calls["copyto"] == 1
    np.testing.assert_allclose(out.get(), np.einsum("wca,caib,wci->wcb", x, c, z), rtol=1e-12)


def test_out_is_checked_before_any_arithmetic(cp):
    ops = [cp.asarray(a) for a in tt_operands(np.random.default_rng(6))]
    with pytest.raises(TypeError, match=r"out= must be a cupy array, not numpy\.ndarray"):
        contract(TT, *ops, out=np.zeros((5, 2, 6)))
    with pytest.raises(SizeMismatchError, match=r"out= has shape \(5, 2, 7\) but 'WCa,Caib,WCi->WCb' gives"):
        contract(TT, *ops, out=cp.zeros((5, 2, 7)))
    with pytest.raises(TypeError, match="out= has dtype float32 but the result is float64"):
        contract(TT, *ops, out=cp.zeros((5, 2, 6), np.float32))
    assert cp.calls["matmul"] == 0


def test_memory_limit_blocks_on_the_device(cp):
    x, c, z = tt_operands(np.random.default_rng(8))
    ops = [cp.asarray(a) for a in (x, c, z)]
    report = explanation(TT, *ops, memory_limit=40)
    assert report.backend == "cupy" and report.blocking is not None and report.peak_extra <= 40
    got = contract(TT, *ops, memory_limit=40)
    assert on_device(got)
    np.testing.assert_allclose(got.get(), np.einsum("wca,caib,wci->wcb", x, c, z), rtol=1e-12)
    assert explanation(TT, *ops).blocking is None   # only an explicit limit blocks


# ------------------------------------------------------------------ explain, expressions
def test_explain_names_the_backend_and_the_gpu_model(cp):
    ops = [cp.asarray(a) for a in tt_operands(np.random.default_rng(9))]
    text = explain(TT, *ops)
    assert "backend         cupy (pairwise" in text
    assert "on the device (CuPy), GPU time model" in text and "(GPU time model)" in text
    assert "one cupy.einsum 'abc,bcde,abd->abe' along the schedule's path" in explain(TT, *ops, optimize=False)


def test_contract_expression_runs_on_cupy_arrays(cp):
    x, c, z = tt_operands(np.random.default_rng(10))
    expr = contract_expression(TT, x.shape, c.shape, z.shape)
    got = expr(cp.asarray(x), cp.asarray(c), cp.asarray(z))
    assert on_device(got)
    np.testing.assert_allclose(got.get(), np.einsum("wca,caib,wci->wcb", x, c, z), rtol=1e-12)
    out = cp.zeros((5, 2, 6))
    assert expr(cp.asarray(x), cp.asarray(c), cp.asarray(z), out=out) is out
    np.testing.assert_allclose(out.get(), got.get())
    assert "on the device (CuPy)" in expr.explain("cupy")


# ------------------------------------------------------------------ GPU pricing
def test_cupy_entry_is_priced_for_the_gpu(cp):
    entry = backend_for([cp.asarray(np.ones(2))])
    assert entry.name == "cupy" and entry.cost_model is CUPY_MODEL and not entry.uses_einsum


def test_gpu_model_prefers_one_batched_product_to_many_small_ones():
    # one launch for a stack: 64 stacked products cost about one, not 64
    stacked, separate = CUPY_MODEL.matmul_ns(64, 16, 16, 16), 64 * CUPY_MODEL.matmul_ns(1, 16, 16, 16)
    assert stacked < 1.1 * CUPY_MODEL.matmul_ns(1, 16, 16, 16) < separate / 50


def test_gpu_schedules_are_steps_of_products_or_one_einsum():
    # vocabulary sizes: never an einsum step (its host cost), never numpy's blocks or threads
    plan = make_plan(TT, ((64, 16, 48), (16, 48, 48, 48), (64, 16, 48)), ())
    for model in (CUPY_MODEL, TORCH_CUDA_MODEL):
        schedule = make_schedule(plan, use_einsum=False, cost_model=model)
        assert schedule.blocking is None
        assert schedule.strategy == "direct" or all(s.kernel in ("matmul", "multiply") for s in schedule.steps)


def test_torch_on_cuda_models_one_einsum_unless_the_steps_clearly_win():
    plan = make_plan(TT, ((4, 2, 3), (2, 3, 5, 6), (4, 2, 5)), ())
    schedule = make_schedule(plan, use_einsum=False, cost_model=TORCH_CUDA_MODEL)
    assert schedule.strategy == "pairwise"   # the steps are kept: the route is measured on CUDA
    assert TORCH_CUDA_MODEL.modelled_path(schedule) is not None   # the model's own pick: one einsum
    unmeasured = replace(TORCH_CUDA_MODEL, measured=False)
    assert make_schedule(plan, use_einsum=False, cost_model=unmeasured).strategy == "direct"
    # a model whose einsum were far dearer than its kernels picks the steps
    dear = GpuCostModel(ns_per_kernel=1.0, ns_per_view=1.0, ns_per_einsum_call=1e6,
                        ns_per_einsum_pair=1e6, ns_per_einsum_kernel=1.0, measured=False)
    assert make_schedule(plan, use_einsum=False, cost_model=dear).strategy == "pairwise"
    assert dear.modelled_path(schedule) is None


def test_torch_tensor_on_cuda_takes_the_gpu_entry(monkeypatch):
    torch = pytest.importorskip("torch")
    from contractions import backends
    from contractions.backends import torch_backend

    monkeypatch.setattr(torch_backend, "_sync", lambda device: None)   # a CPU torch has no CUDA to wait for
    monkeypatch.setattr(measured, "_CHOSEN", collections.OrderedDict())

    assert backends._torch_on_device(types.SimpleNamespace(is_cuda=True)).cost_model is TORCH_CUDA_MODEL
    assert backend_for([torch.ones(2)]) is backend_named("torch")

    class CudaLooking(torch.Tensor):   # a CPU tensor that says it is on CUDA
        @property
        def is_cuda(self):
            return True

    x, c, z = tt_operands(np.random.default_rng(11))
    ops = [torch.from_numpy(a).as_subclass(CudaLooking) for a in (x, c, z)]
    entry = backend_for(ops)
    assert entry.name == "torch" and entry.cost_model is TORCH_CUDA_MODEL
    assert explanation(TT, *ops).strategy == "pairwise"          # steps kept, the route measured
    assert "chosen by measurement" in explain(TT, *ops)
    assert "GPU time model" in explain(TT, *ops, optimize="greedy", memory_limit=40)   # blocked: steps
    got = contract(TT, *ops)
    np.testing.assert_allclose(np.asarray(got.detach().as_subclass(torch.Tensor)),
                               np.einsum("wca,caib,wci->wcb", x, c, z), rtol=1e-12)
    plain = [torch.from_numpy(a) for a in (x, c, z)]
    np.testing.assert_allclose(contract(TT, *plain).numpy(), got.detach().as_subclass(torch.Tensor).numpy(),
                               rtol=1e-12)
