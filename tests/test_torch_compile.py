"""torch.compile: ``contract`` and ``contract_expression(...)(...)`` trace with fullgraph=True
(no graph break, no warning from the library, results equal to eager), plan once per shape
signature (one compile per new signature, none for a repeated one), and registration with
TorchDynamo never imports torch (or torch._dynamo) on the library's behalf.

Most tests compile with ``backend="aot_eager"``: it runs Dynamo and AOTAutograd exactly as the
default backend does (so graph breaks and tracing problems show) without Inductor's C++ build,
which takes tens of seconds per graph; the Inductor and ``reduce-overhead`` runs are slow tests.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch._dynamo = pytest.importorskip("torch._dynamo")
from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402

from contractions import contract, contract_expression  # noqa: E402
from contractions.backends import torch_compile_hook  # noqa: E402
from contractions.calls import runners
from contractions.errors import SizeMismatchError  # noqa: E402
from contractions.testing.oracle import loop_contract  # noqa: E402

from ._vocabulary import random_problem, vocabulary  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TT = "WCa,Caib,WCi->WCb"
VOCABULARY = vocabulary()
QUICK_SAMPLE = VOCABULARY[::max(1, len(VOCABULARY) // 6)][:6]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def tt_operands(w=4, dtype=torch.float64, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(torch.tensor(rng.standard_normal(s), dtype=dtype)
                 for s in [(w, 2, 3), (2, 3, 5, 6), (w, 2, 5)])


def library_warnings(caught):
    """Warnings raised from the library or about tracing it (lru_cache, graph breaks)."""
    return [w for w in caught
            if "contractions" in str(w.filename) or "lru_cache" in str(w.message)
            or "graph break" in str(w.message).lower()]


def test_registered_with_dynamo():
    # This module imported torch._dynamo, so the one-shot hook (or the eager import) fired.
    assert torch_compile_hook.registered()


# ------------------------------------------------------------------ fullgraph, explain
def test_contract_fullgraph_equals_eager_without_warnings():
    x, c, z = tt_operands()

    def f(x, c, z):
        return torch.tanh(contract(TT, x, c, z)) * 2

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(f, fullgraph=True, backend="aot_eager")(x, c, z)
    assert not library_warnings(caught), [str(w.message) for w in caught]
    torch.testing.assert_close(out, f(x, c, z))
    torch.testing.assert_close(out, torch.tanh(torch.einsum("wca,caib,wci->wcb", x, c, z)) * 2)


def test_explain_reports_no_graph_break():
    x, c, z = tt_operands()
    report = torch._dynamo.explain(lambda x, c, z: contract(TT, x, c, z).sum())(x, c, z)
    assert report.graph_break_count == 0 and report.graph_count == 1


def test_planner_is_one_graph_node():
    """Dynamo writes the call as one node (the planner is never traced)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    x, c, z = tt_operands()
    torch.compile(lambda x, c, z: contract(TT, x, c, z), fullgraph=True, backend=backend)(x, c, z)
    (gm,) = graphs
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert [n.target for n in calls] == [contract]
    assert calls[0].args[0] == TT


@pytest.mark.parametrize("keywords", [
    {"optimize": [(1, 2), (0, 1)]}, {"optimize": "optimal"}, {"memory_limit": 3000},
    {"preferred_element_type": torch.float32}, {"optimize": False},
])
def test_keywords_trace_as_constants(keywords):
    x, c, z = tt_operands(w=40)

    def f(x, c, z):
        return contract(TT, x, c, z, **keywords)

    out = torch.compile(f, fullgraph=True, backend="aot_eager")(x, c, z)
    torch.testing.assert_close(out, f(x, c, z))


def test_len_keyword_and_empty_group():
    zo, za = torch.randn(3, 2, 5, dtype=torch.float64), torch.randn(3, 2, 4, dtype=torch.float64)
    f = lambda zo, za: contract("WCo,WCa->Cao", zo, za, len_W=1)
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(zo, za)
    torch.testing.assert_close(out, torch.einsum("wco,wca->cao", zo, za))


def _vocabulary_case(subscripts, pins):
    problem = random_problem(subscripts, pins, np.random.default_rng(zlib.crc32(subscripts.encode())))
    tensors = [torch.tensor(a) for a in problem.operands]
    expected = loop_contract(subscripts, problem.operands, problem.group_shapes)
    return tensors, problem.len_kwargs, expected


def _check_vocabulary_string(subscripts, pins):
    tensors, kwargs, expected = _vocabulary_case(subscripts, pins)

    def f(*ops):
        return contract(subscripts, *ops, **kwargs)

    report = torch._dynamo.explain(f)(*tensors)
    assert report.graph_break_count == 0, report.break_reasons
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(*tensors)
    torch.testing.assert_close(out, f(*tensors))
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("subscripts,pins", QUICK_SAMPLE, ids=[s for s, _ in QUICK_SAMPLE])
def test_vocabulary_sample_fullgraph(subscripts, pins):
    _check_vocabulary_string(subscripts, pins)


@pytest.mark.slow
@pytest.mark.parametrize("subscripts,pins", VOCABULARY, ids=[s for s, _ in VOCABULARY])
def test_whole_vocabulary_fullgraph(subscripts, pins):
    _check_vocabulary_string(subscripts, pins)


def _aten_ops(fn, tensors):
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs = []

    def backend(gm, example_inputs):
        def forward_compiler(graph, inputs):
            graphs.append(graph)
            return graph.forward

        return aot_module_simplified(gm, example_inputs, fw_compiler=forward_compiler)

    torch._dynamo.reset()
    torch.compile(fn, fullgraph=True, backend=backend, dynamic=False)(*tensors)
    (graph,) = graphs
    return [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("subscripts,shapes,hand", [
    (TT, ((64, 8, 32), (8, 32, 32, 32), (64, 8, 32)), "wca,caib,wci->wcb"),
    ("Cpqr,Cip,Cjq,Ckr->Cijk", ((3, 4, 5, 6), (3, 7, 4), (3, 8, 5), (3, 9, 6)), "cpqr,cip,cjq,ckr->cijk"),
    ("WCo,WCa->Cao", ((3, 2, 5), (3, 2, 4)), "wco,wca->cao"),
])
def test_traced_graph_is_compiled_einsums(subscripts, shapes, hand):
    """What reaches Inductor is the graph a compiled torch.einsum on the expanded string gives,
    whichever route eager calls take (the eager model may prefer the steps)."""
    rng = np.random.default_rng(7)
    tensors = [torch.tensor(rng.standard_normal(s), dtype=torch.float32) for s in shapes]
    kwargs = {"len_W": 1} if subscripts == "WCo,WCa->Cao" else {}
    ours = _aten_ops(lambda *ts: contract(subscripts, *ts, **kwargs), tensors)
    theirs = _aten_ops(lambda *ts: torch.einsum(hand, *ts), tensors)
    assert ours == theirs


# ------------------------------------------------------------------- contract_expression
def test_expression_built_outside_called_inside():
    x, c, z = tt_operands()
    expr = contract_expression(TT, x.shape, c.shape, z.shape)
    out = torch.compile(lambda x, c, z: expr(x, c, z) + 1, fullgraph=True, backend="aot_eager")(x, c, z)
    torch.testing.assert_close(out, expr(x, c, z) + 1)


def test_expression_built_and_called_inside():
    x, c, z = tt_operands()

    def f(x, c, z):
        return contract_expression(TT, (4, 2, 3), (2, 3, 5, 6), (4, 2, 5))(x, c, z)

    report = torch._dynamo.explain(f)(x, c, z)
    assert report.graph_break_count == 0
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(x, c, z),
                               torch.einsum("wca,caib,wci->wcb", x, c, z))


def test_expression_shape_mismatch_still_raises_under_compile():
    x, c, z = tt_operands()
    expr = contract_expression(TT, (5, 2, 3), c.shape, (5, 2, 5))
    with pytest.raises(Exception) as info:
        torch.compile(lambda x, c, z: expr(x, c, z), fullgraph=True, backend="aot_eager")(x, c, z)
    chain = [info.value, info.value.__cause__, info.value.__context__]
    assert any(isinstance(e, SizeMismatchError) or "was built for operand shapes" in str(e)
               for e in chain if e is not None)


# ------------------------------------------------------------------------ recompiles
def test_one_compile_per_shape_signature():
    counter = CompileCounterWithBackend("aot_eager")
    f = torch.compile(lambda x, c, z: contract(TT, x, c, z), fullgraph=True, backend=counter,
                      dynamic=False)
    for w, expected_frames in [(4, 1), (4, 1), (5, 2), (4, 2), (5, 2), (6, 3)]:
        x, c, z = tt_operands(w=w, seed=w)
        torch.testing.assert_close(f(x, c, z), torch.einsum("wca,caib,wci->wcb", x, c, z))
        assert counter.frame_count == expected_frames, (w, counter.frame_count)


def test_dynamic_true_specialises_each_shape():
    """The schedule depends on the extents, so dynamic=True specialises them: each new
    signature compiles once, a repeated one never (and results stay right)."""
    counter = CompileCounterWithBackend("aot_eager")
    f = torch.compile(lambda x, c, z: contract(TT, x, c, z), fullgraph=True, backend=counter,
                      dynamic=True)
    for w, expected_frames in [(4, 1), (5, 2), (5, 2), (4, 2)]:
        x, c, z = tt_operands(w=w, seed=w)
        torch.testing.assert_close(f(x, c, z), torch.einsum("wca,caib,wci->wcb", x, c, z))
        assert counter.frame_count == expected_frames


def test_mark_dynamic_is_refused_by_torch_and_maybe_mark_dynamic_specialises():
    x, c = torch.randn(5, 3), torch.randn(3, 4)
    f = torch.compile(lambda x, c: contract("Wa,ab->Wb", x, c), fullgraph=True, backend="aot_eager")
    torch._dynamo.mark_dynamic(x, 0)
    with pytest.raises(Exception, match="specialized it to be a constant"):
        f(x, c)
    torch._dynamo.reset()
    y = torch.randn(5, 3)
    torch._dynamo.maybe_mark_dynamic(y, 0)
    torch.testing.assert_close(f(y, c), y @ c)


def test_warm_eager_calls_hit_the_torch_hot_path():

    x, c, z = tt_operands(w=3)
    contract(TT, x, c, z)
    key = (TT, (torch.Tensor, x.shape, False), (torch.Tensor, c.shape, False), (torch.Tensor, z.shape, False))
    assert key in runners.HOT
    weights = torch.nn.Parameter(c.clone())
    want = torch.einsum("wca,caib,wci->wcb", x, c, z)
    torch.testing.assert_close(contract(TT, x, weights, z), want)   # (a Parameter: its own key)
    misses = runners._COMPILED.cache_info().misses
    for _ in range(3):
        torch.testing.assert_close(contract(TT, x, weights, z), want)
        torch.testing.assert_close(contract(TT, x, c, z), want)
    assert runners._COMPILED.cache_info().misses == misses   # nothing was planned again
    # a keyword or a mixed operand takes the checked route, with the same numbers
    torch.testing.assert_close(contract(TT, x.numpy(), c, z), contract(TT, x, c, z))
    torch.testing.assert_close(contract(TT, x, c, z, optimize="greedy"), contract(TT, x, c, z))


def test_autograd_through_compiled_contract():
    x, c, z = tt_operands()
    x = x.clone().requires_grad_(True)
    f = torch.compile(lambda x, c, z: contract(TT, x, c, z, memory_limit=3000).pow(2).sum(),
                      fullgraph=True, backend="aot_eager")
    f(x, c, z).backward()
    torch.testing.assert_close(x.grad, torch.func.grad(
        lambda x: torch.einsum("wca,caib,wci->wcb", x, c, z).pow(2).sum())(x.detach()))


@pytest.mark.slow
@pytest.mark.parametrize("mode", [None, "reduce-overhead", "max-autotune-no-cudagraphs"])
def test_inductor_modes_equal_eager(mode):
    x, c, z = tt_operands(dtype=torch.float32)
    f = lambda x, c, z: torch.relu(contract(TT, x, c, z)) + 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(f, fullgraph=True, mode=mode, dynamic=False)
        out = compiled(x, c, z)
        out = compiled(x, c, z)
    assert not library_warnings(caught)
    torch.testing.assert_close(out, f(x, c, z), rtol=1e-5, atol=1e-5)


# -------------------------------------------------------------------- import hygiene
def _run(code: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_importing_contractions_imports_no_torch():
    out = _run("""
        import sys
        import contractions
        from contractions.backends import torch_compile_hook
        print('torch' in sys.modules, 'torch._dynamo' in sys.modules, torch_compile_hook.registered())
    """)
    assert out == ["False", "False", "False"]


def test_eager_torch_call_does_not_import_dynamo():
    out = _run("""
        import sys, torch
        from contractions import contract
        contract('Wa,ab->Wb', torch.ones(2, 3), torch.ones(3, 4))
        print('torch._dynamo' in sys.modules)
    """)
    assert out == ["False"]


@pytest.mark.slow
@pytest.mark.parametrize("order", ["contractions first", "torch first"])
def test_registration_fires_whatever_the_import_order(order):
    imports = ("import contractions\nimport torch" if order == "contractions first"
               else "import torch\nimport contractions")
    out = _run(imports + """
from contractions.backends import torch_compile_hook
before = torch_compile_hook.registered()
import torch._dynamo
f = lambda x, y: contractions.contract('Wa,ab->Wb', x, y)
report = torch._dynamo.explain(f)(torch.ones(2, 3), torch.ones(3, 4))
print(before, torch_compile_hook.registered(), report.graph_break_count)
""")
    assert out == ["False", "True", "0"]
