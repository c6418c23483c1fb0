"""The execution layer: the schedule as data, optimize= in every accepted form,
contract_expression, `explain` printing what runs, the backend registry, one-way layers.

References are the loop oracle (with group shapes the test draws itself) and np.einsum on
hand-expanded strings; schedule fields, not description strings, carry the structural checks.
"""

from __future__ import annotations

import ast
import itertools
import math
import re
import subprocess
import sys
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import opt_einsum
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import (
    ContractionError,
    OperandCountError,
    SizeMismatchError,
    contract,
    contract_expression,
    explain,
    explanation,
    identifiability,
    make_plan,
    make_schedule,
)
from contractions.backends import backend_for, scratch
from contractions.backends.compile import compile_schedule
from contractions.backends.numpy_backend import NUMPY_OPS
from contractions.model.numpy_prices import NumpyCostModel
from contractions.model.profile import Profile
from contractions.schedule import DEFAULT_LIMIT_FLOOR, describe_schedule, schedule_labels
from contractions.schedule.describe import explained_steps
from contractions.testing.oracle import loop_contract

from ._strategies import grouped_problems, hand_expand, needed_supplements, random_operands
from ._vocabulary import random_problem, vocabulary

REPO = Path(__file__).resolve().parents[1]
VOCABULARY = vocabulary()
PRESETS = ["auto", "greedy", "optimal", "dp", "branch-2", "branch-all", "auto-hq", "eager",
           "random-greedy", True, False]


def seeded(*parts: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def oracle(problem) -> np.ndarray:
    return loop_contract(problem.subscripts, list(problem.operands), problem.group_shapes)


def close(got, want) -> None:
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------------- optimize=
@pytest.mark.parametrize("optimize", PRESETS, ids=str)
def test_every_preset_matches_the_oracle_on_the_vocabulary(optimize):
    for subscripts, pins in VOCABULARY:
        problem = random_problem(subscripts, pins, seeded(subscripts, optimize))
        got = contract(subscripts, *problem.operands, optimize=optimize, **problem.len_kwargs)
        close(got, oracle(problem))


def _all_paths(n: int):
    """Every pairwise path for n operands in opt_einsum's form."""
    if n == 1:
        yield []
        return
    for pair in itertools.combinations(range(n), 2):
        for rest in _all_paths(n - 1):
            yield [pair, *rest]


@pytest.mark.parametrize("subscripts", ["WCa,Caib,WCi->WCb", "Wa,Wab,Wbc,Wc->W", "Ka,KCab,Cb->KC"])
def test_every_explicit_path_runs_as_given(subscripts):
    n = subscripts.count(",") + 1
    pins = dict(VOCABULARY).get(subscripts, ())
    problem = random_problem(subscripts, pins, seeded(subscripts), extents=(2, 3))
    want = oracle(problem)
    for path in _all_paths(n):
        expr = contract_expression(subscripts, *(a.shape for a in problem.operands),
                                   optimize=path, **problem.len_kwargs)
        assert expr.schedule.path == tuple(path)
        assert expr.schedule.strategy == "pairwise"
        assert [s.operands for s in expr.schedule.steps] == [tuple(p) for p in path]
        close(expr(*problem.operands), want)
    # A multi-operand entry (opt_einsum allows them) is folded pairwise.
    got = contract(subscripts, *problem.operands, optimize=[tuple(range(n))], **problem.len_kwargs)
    close(got, want)


def test_numpy_einsum_path_output_is_accepted():
    a, b, c = (seeded("np", k).standard_normal(s) for k, s in enumerate([(4, 5), (5, 6), (6, 3)]))
    path, _ = np.einsum_path("ij,jk,kl->il", a, b, c, optimize="optimal")
    assert path[0] == "einsum_path"
    close(contract("Wij,jk,kl->Wil", a, b, c, optimize=path), a @ b @ c)


@pytest.mark.parametrize("bad,error,message", [
    ([(0, 0), (0, 1)], ContractionError, r"invalid at entry 0 \(0, 0\)"),
    ([(0, 3)], ContractionError, r"positions 0\.\.2"),
    ([(0, 1)], ContractionError, "leaves 2 operands uncontracted"),
    ([(0, 1), (0, 1), (0, 1)], ContractionError, r"invalid at entry 2"),
    ("nonsense", ValueError, r"names no path optimizer; use one of .*'greedy'"),
    (3, TypeError, "optimize= must be a preset name"),
    ([("a", "b")], TypeError, "tuples of ints"),
])
def test_bad_optimize_values_are_refused_before_arithmetic(bad, error, message):
    ops = [np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 2))]
    with pytest.raises(error, match=message):
        contract("Wi,ij,jk->Wk", *ops, optimize=bad)


class ReversedPairs(opt_einsum.paths.PathOptimizer):
    """Contracts the last two operands first, always; records what it was asked."""

    def __init__(self):
        self.calls = []

    def __call__(self, inputs, output, size_dict, memory_limit=None):
        self.calls.append((inputs, output, dict(size_dict)))
        return [(n - 2, n - 1) for n in range(len(inputs), 1, -1)]


def test_a_path_optimizer_instance_is_called_and_obeyed():
    problem = random_problem("Wa,Wab,Wbc,Wc->W", (), seeded("rev"), extents=(2, 3))
    optimizer = ReversedPairs()
    expr = contract_expression("Wa,Wab,Wbc,Wc->W", *(a.shape for a in problem.operands),
                               optimize=optimizer)
    assert len(optimizer.calls) == 1
    inputs, _, sizes = optimizer.calls[0]
    assert len(inputs) == 4 and all(isinstance(k, str) for k in sizes)   # opt_einsum's convention
    assert expr.schedule.path == ((2, 3), (1, 2), (0, 1))
    assert expr.schedule.optimizer == "ReversedPairs"
    close(expr(*problem.operands), oracle(problem))


def test_cotengra_hyper_optimizer():
    ctg = pytest.importorskip("cotengra")
    problem = random_problem("Ka,KCab,Cbc,Kc->KC", (), seeded("ctg"), extents=(2, 3))
    opt = ctg.HyperOptimizer(max_repeats=4, methods=["greedy"], progbar=False, parallel=False)
    got = contract("Ka,KCab,Cbc,Kc->KC", *problem.operands, optimize=opt)
    close(got, oracle(problem))


@settings(max_examples=60, deadline=None)
@given(grouped_problems(max_terms=4), st.integers(0, 2**32 - 1),
       st.sampled_from(["greedy", "optimal", "dp", False]))
def test_random_strings_agree_with_the_oracle_for_every_optimizer(problem, seed, optimize):
    operands = random_operands(problem, np.random.default_rng(seed))
    pins = needed_supplements(problem, identifiability(problem.subscripts))
    got = contract(problem.subscripts, *operands, optimize=optimize, **pins)
    close(got, np.einsum(hand_expand(problem), *operands))
    close(got, loop_contract(problem.subscripts, operands, problem.group_shapes))


# ---------------------------------------------------------------- contract_expression
def test_contract_expression_reuses_one_compiled_schedule():
    x, cores, z = (seeded("ce", k).standard_normal(s)
                   for k, s in enumerate([(4, 2, 3), (2, 3, 5, 6), (4, 2, 5)]))
    expr = contract_expression("WCa,Caib,WCi->WCb", x.shape, cores.shape, z.shape)
    assert expr.output_shape == (4, 2, 6)
    want = np.einsum("wca,caib,wci->wcb", x, cores, z)
    close(expr(x, cores, z), want)
    close(expr(2 * x, cores, z), 2 * want)
    # contract() runs the very same schedule object (one cache below both).
    assert expr.schedule is contract_expression("WCa,Caib,WCi->WCb", x.shape, cores.shape,
                                                z.shape).schedule
    assert "WCa,Caib,WCi->WCb" in repr(expr) and "(4, 2, 6)" in repr(expr)
    assert "path" in expr.explain()


def test_contract_expression_refuses_other_shapes_and_counts():
    expr = contract_expression("Wij,Wjk->Wik", (5, 2, 3), (5, 3, 4))
    with pytest.raises(SizeMismatchError, match=r"built for operand shapes \(5, 2, 3\), \(5, 3, 4\)"):
        expr(np.ones((6, 2, 3)), np.ones((6, 3, 4)))
    with pytest.raises(OperandCountError, match="takes exactly 2 operands for 'Wij,Wjk->Wik' but 1"):
        expr(np.ones((5, 2, 3)))


def test_contract_expression_takes_supplements_and_lists():
    expr = contract_expression("WCo,WCa->Cao", (3, 2, 5), (3, 2, 4), len_W=1)
    assert expr.output_shape == (2, 4, 5)
    zo = np.arange(30.0).reshape(3, 2, 5)
    close(expr(zo.tolist(), np.ones((3, 2, 4))), np.einsum("wco,wca->cao", zo, np.ones((3, 2, 4))))


@pytest.mark.parametrize("shapes,message", [
    (((2, -1), (3,)), "negative extent"),
    (((2, 1.5), (3,)), "non-integer extent"),
    (((2, True), (3,)), "bool extent"),
])
def test_contract_expression_checks_shapes(shapes, message):
    with pytest.raises((TypeError, ContractionError), match=message):
        contract_expression("Wa,a->W", *shapes)


# ------------------------------------------------------ explain shows what executes
class Recorder:
    """numpy ArrayOps whose kernels log (kernel, elements of the result)."""

    def __init__(self):
        self.log = []

        def logged(kind, fn):
            def run(*args):
                out = fn(*args)
                self.log.append((kind, int(np.size(out))))
                return out
            return run

        def logged_into(fn):
            # a block's last product written straight into its slice returns nothing: its
            # result is the product's shape
            def run(x, y, dest, shape, **split):
                fn(x, y, dest, shape, **split)
                self.log.append(("matmul", math.prod(shape)))
            return run

        assert NUMPY_OPS.matmul_c is not None and NUMPY_OPS.scratch_matmul is not None
        assert NUMPY_OPS.matmul_into is not None and NUMPY_OPS.matmul_split is not None
        self.ops = replace(NUMPY_OPS, matmul=logged("matmul", NUMPY_OPS.matmul),
                           matmul_c=logged("matmul", NUMPY_OPS.matmul_c),
                           multiply=logged("multiply", NUMPY_OPS.multiply),
                           einsum=logged("einsum", NUMPY_OPS.einsum),
                           scratch_matmul=logged("matmul", NUMPY_OPS.scratch_matmul),
                           matmul_into=logged_into(NUMPY_OPS.matmul_into),
                           matmul_split=logged("matmul", NUMPY_OPS.matmul_split))


def _expected_kernels(schedule) -> list[tuple[str, int]]:
    """(kernel, result size) of every step in execution order: unblocked, the steps; blocked,
    the hoisted steps once, then the steps inside the loop per block, in loop order."""
    def made(s):
        # a product whose promoted labels are summed after it makes its wide result first
        return s.kernel, math.prod(s.wide_shape) if s.wide_shape else s.result_size

    if schedule.blocking is None:
        return [made(s) for s in schedule.steps]
    blocking, inner = schedule.blocking, dict(schedule.blocking.inner)
    lengths = [[min(c, n - start) for start in range(0, n, c)]
               for c, n in zip(blocking.chunks, (schedule.extents[lab] for lab in blocking.labels))]
    assert math.prod(len(options) for options in lengths) == blocking.n_blocks
    hoisted = set(blocking.hoisted)
    once = [made(s) for k, s in enumerate(schedule.steps) if k in hoisted]
    return once + [made(s) for key in itertools.product(*lengths)
                   for k, s in enumerate(inner[key].steps) if k not in hoisted]


def test_the_recorder_sees_products_written_into_slices_and_wide_products():
    # (stated prices: the reference profile writes the chain's blocks in place and promotes W
    # in the second; what `explain` says must be what runs, these two kinds of call included)
    model = NumpyCostModel(Profile())
    chain = make_plan("ij,jk,kl->il", ((64, 30), (30, 50), (50, 64)), ())
    blocked = make_schedule(chain, memory_limit=800, cost_model=model)
    assert blocked.blocking is not None and blocked.blocking.in_place
    wide_plan = make_plan("WCiab,WCjab->Cij", ((6, 6, 8, 8, 6, 6, 6),) * 2, (("W", 2),))
    promoted = make_schedule(wide_plan, memory_limit=None, cost_model=model)
    assert any(step.wide_shape for step in promoted.steps)
    for schedule, plan, expanded in ((blocked, chain, "ij,jk,kl->il"),
                                     (promoted, wide_plan, "wvcdiab,wvcdjab->cdij")):
        operands = [seeded("recorded", k).standard_normal(s) for k, s in enumerate(plan.shapes)]
        recorder = Recorder()
        result = compile_schedule(schedule, recorder.ops)(*operands)
        assert recorder.log == _expected_kernels(schedule)
        close(result, np.einsum(expanded, *operands))


def _printed_steps(report: str) -> list[str]:
    lines = report.splitlines()
    start = lines.index("schedule") + 1
    steps = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        steps.append(line.strip())
    return steps


def _check_explain_matches_execution(subscripts, operands, **kwargs):
    report = explain(subscripts, *operands, **kwargs)
    # (taken before the expression below plans the structure: a first call's tier depends on
    # the structures planned so far, which explain reports but never changes)
    explained = explanation(subscripts, *operands, **kwargs)
    optimize = kwargs.pop("optimize", "auto")
    expr = contract_expression(subscripts, *(np.shape(a) for a in operands), optimize=optimize,
                               **kwargs)
    schedule = expr.schedule
    printed_path = ast.literal_eval(re.search(r"^path\s+(\[.*\])", report, re.M).group(1))
    assert tuple(map(tuple, printed_path)) == schedule.path
    name = expr.plan.expansion.readable_symbol
    assert _printed_steps(report) == describe_schedule(schedule, name)
    # The report as data: the same text, and the schedule's numbers as attributes.
    assert str(explained) == report
    assert (explained.path, explained.strategy, explained.flops) == (schedule.path, schedule.strategy, schedule.flops)
    assert (explained.peak_extra, explained.memory_limit) == (schedule.peak_extra, schedule.memory_limit)
    assert [(s.operands, s.kernel, s.result_shape, s.flops, s.cost_ns) for s in explained.steps] == [
        (s.operands, s.kernel, s.result_shape, s.flops, s.cost_ns) for s in schedule.steps]
    hoisted = set(schedule.blocking.hoisted) if schedule.blocking is not None else set()
    assert [s.hoisted for s in explained.steps] == [k in hoisted for k in range(len(schedule.steps))]
    assert explained.blocking == schedule.blocking
    recorder = Recorder()
    result = compile_schedule(schedule, recorder.ops)(*operands)
    if schedule.strategy == "direct":
        assert [k for k, _ in recorder.log] == ["einsum"]
    else:
        expected = _expected_kernels(schedule)
        assert [k for k, _ in recorder.log] == [kernel for kernel, _ in expected]
        assert [n for _, n in recorder.log] == [size for _, size in expected]
    close(result, contract(subscripts, *operands, **kwargs))
    # The printed path, passed back, gives the same steps.
    again = contract_expression(subscripts, *(np.shape(a) for a in operands),
                                optimize=printed_path, **kwargs).schedule
    if schedule.strategy == "pairwise":
        assert again.steps == schedule.steps


@pytest.mark.parametrize("optimize", ["auto", "greedy"])
def test_explain_prints_the_steps_executed_on_the_vocabulary(optimize):
    for subscripts, pins in VOCABULARY:
        # extents up to 6 so that some strings leave the tiny direct regime
        problem = random_problem(subscripts, pins, seeded("explain", subscripts), extents=(1, 6))
        _check_explain_matches_execution(subscripts, list(problem.operands), optimize=optimize,
                                         **problem.len_kwargs)


@settings(max_examples=40, deadline=None)
@given(grouped_problems(max_terms=4), st.integers(0, 2**32 - 1))
def test_explain_prints_the_steps_executed_on_random_strings(problem, seed):
    operands = random_operands(problem, np.random.default_rng(seed))
    pins = needed_supplements(problem, identifiability(problem.subscripts))
    _check_explain_matches_execution(problem.subscripts, operands, optimize="greedy", **pins)


@pytest.mark.usefixtures("nothing_planned")   # (its first call: a structure not planned before)
def test_explanation_holds_the_report_as_data():
    e = explanation("WKCi,Cio->WKCo", (2, 3, 4, 5), (4, 5, 6))
    assert e.group_lengths == {"W": 2, "K": 0, "C": 1} and e.co_travelling == ("WK",)
    assert [(g.symbols, g.extents) for g in e.groups] == [("AB", (2, 3)), ("-", ()), ("C", (4,))]
    assert e.expanded == "ABCi,Cio->ABCo" and e.output_shape == (2, 3, 4, 6) and e.backend == "numpy"
    # tiny: one einsum call, so the path is reported but not taken, and there are no steps
    assert e.strategy == "direct" and not e.path_taken and e.steps == () and e.cost_ns is None
    assert e.flops == e.naive_flops == 2 * 3 * 4 * 5 * 6 * 2 and e.peak_extra == 0
    with pytest.raises(AttributeError):
        e.path = ()  # type: ignore[misc]
    # a hoisted step worth running once: a 60 x 60 x 60 product that carries no cut label
    blocked = explanation("ab,bc,Wc,Wd->Wad", (60, 60), (60, 60), (1000, 60), (1000, 50),
                          memory_limit=20000)
    assert blocked.strategy == "pairwise" and blocked.memory_limit == 20000 and blocked.peak_extra <= 20000
    assert [s.hoisted for s in blocked.steps][:1] == [True] and blocked.blocking.n_blocks > 1
    assert blocked.cost_ns > 0 and "us (numpy time model)\nfirst call      full search" in str(blocked)


def test_explanation_of_ndims_stops_at_the_expansion():
    e = explanation("WCo,WCa->Cao", 3, 3, len_C=1)
    assert e.output_shape is None and e.backend is None and e.steps == () and e.flops is None
    assert e.supplements == (("C", 1),) and e.identifiability_with == "determined"
    assert str(e) == explain("WCo,WCa->Cao", 3, 3, len_C=1)
    assert str(e).splitlines()[-1] == "expanded        'ABo,ABa->Bao'"


def test_explanation_of_a_backend_that_plans_its_own_buffers():
    pytest.importorskip("jax")
    shapes = ((4, 2, 3), (2, 3, 5, 6), (4, 2, 5))
    e = explanation("WCa,Caib,WCi->WCb", *shapes, backend="jax")
    assert e.optimizer is None and e.strategy is None and e.peak_extra is None and e.steps == ()
    want, _ = opt_einsum.contract_path("abc,bcde,abd->abe", *shapes, shapes=True, optimize="auto")
    assert e.path == tuple(map(tuple, want))
    assert str(e) == explain("WCa,Caib,WCi->WCb", *shapes, backend="jax")


# ------------------------------------------------------------- the schedule as data
def test_preparation_fields_for_size_one_diagonal_and_private_axes():
    plan = make_plan("Wiij,Wk->Wk", ((5, 1, 3, 3, 4), (5, 1, 6)), ())
    schedule = make_schedule(plan, "greedy")
    x, y = schedule.preparations
    assert x.squeeze == (5, 3, 3, 4) and x.diagonals == ((1, 2),)
    assert len(x.sum_axes) == 2            # i (after the diagonal) and j are needed by no one
    assert y.squeeze == (5, 6) and not y.sum_axes
    (step,) = schedule.steps
    assert step.kernel == "multiply" and step.contract == () and step.result_shape == (5, 6)
    assert schedule.finish.reshape                 # the size-1 group axis comes back at the end
    ops = [seeded("prep", k).standard_normal(s) for k, s in enumerate(plan.shapes)]
    close(contract("Wiij,Wk->Wk", *ops, optimize="greedy"), np.einsum("wziij,wzk->wzk", *ops))


def test_large_batched_product_is_one_matmul_step_with_views():
    # (priced with the reference profile: a calibrated profile's measured peak can put the
    # roofline above the layout's price, which is not what this test is about)
    # (one BLAS thread: the stack is not split over cores, decision 63, which prices it apart)
    model = NumpyCostModel(replace(Profile(), blas_threads=1))
    plan = make_plan("Bij,Bjk->Bik", ((64, 32, 48), (64, 48, 40)), ())
    (step,) = make_schedule(plan, cost_model=model).steps
    assert step.kernel == "matmul"
    assert not step.x_view.gather and not step.y_view.gather      # no copies: plain strided views
    # modelled time: the layout's BLAS and copy cost; the step writes the call's result, which a
    # caller's loop reuses warm at this size, so no fresh buffer's page faults
    assert step.layout is not None
    assert step.cost_ns == step.layout.cost and model.fresh_buffer_ns(64 * 32 * 40) > 0
    assert step.flops == 2 * 64 * 32 * 48 * 40
    # the same product as an intermediate (a third operand follows) pays for a fresh buffer
    chain = make_plan("Bij,Bjk,Bk->Bi", ((64, 32, 48), (64, 48, 40), (64, 40)), ())
    first = make_schedule(chain, optimize=[(0, 1), (0, 1)], cost_model=model).steps[0]
    assert first.kernel == "matmul" and first.layout is not None
    assert first.cost_ns == first.layout.cost + model.fresh_buffer_ns(64 * 32 * 40)
    # past the allocator's reuse limit the result is fresh pages on every call
    big = make_plan("ij,jk->ik", ((2048, 64), (64, 2048)), ())
    (last,) = make_schedule(big, cost_model=model).steps
    assert last.layout is not None and last.cost_ns == last.layout.cost + model.fresh_buffer_ns(2048 * 2048)


def test_contracted_labels_stored_outside_run_as_batch_and_are_summed_after():
    # 'WCiab,WCjab->Cij' sums over W, a and b.  As one product per C it must gather both
    # operands (W is not next to a and b); with W as a batch label each (W, C) pair is an
    # (i x ab) @ (ab x j) product of views, and the stack is summed over W after.
    plan = make_plan("WCiab,WCjab->Cij", ((6, 6, 8, 8, 6, 6, 6),) * 2, (("W", 2),))
    # (the reference profile's prices and caches, not this host's)
    model = NumpyCostModel(Profile())
    (step,) = make_schedule(plan, memory_limit=None, cost_model=model).steps
    w = plan.expansion.inputs[0][:2]
    assert step.kernel == "matmul" and step.reduce == w
    assert not step.x_view.gather and not step.y_view.gather
    assert step.wide_shape == (6, 6, 8, 8, 6, 6) and step.reduce_axes == (0, 1)
    assert step.result_shape == (8, 8, 6, 6) and set(w) <= set(step.contract)
    x, y = (seeded("promote", k).standard_normal((6, 6, 8, 8, 6, 6, 6)) for k in range(2))
    close(contract("WCiab,WCjab->Cij", x, y, len_W=2), np.einsum("wvcdiab,wvcdjab->cdij", x, y))
    # the product before its sum is counted in the peak, and the step's record says what is summed
    schedule = make_schedule(plan, memory_limit=None, cost_model=model)
    assert schedule.peak_extra == 6 * 6 * 8 * 8 * 6 * 6
    (record,) = explained_steps(schedule, plan.expansion.symbols.__getitem__)
    assert record.reduce == "AB" and "(as batch, then summed: AB)" in str(record)
    # where nothing needs a gather nothing is promoted, nor where the model is told not to
    plain = make_plan("Ciab,Cjab->Cij", ((64, 6, 6, 6),) * 2, ())
    assert all(not s.reduce for s in make_schedule(plain, cost_model=model).steps)
    without = replace(model, promote_contracted=False)
    (gathering,) = make_schedule(plan, memory_limit=None, cost_model=without).steps
    assert not gathering.reduce and (gathering.x_view.gather or gathering.y_view.gather)


def test_small_problem_is_one_direct_einsum_and_false_forces_it():
    plan = make_plan("Wij,Wjk->Wik", ((2, 2, 3), (2, 3, 2)), ())
    assert make_schedule(plan).strategy == "direct"
    big = make_plan("Wij,Wjk->Wik", ((40, 30, 30), (40, 30, 30)), ())
    assert make_schedule(big).strategy == "pairwise"
    assert make_schedule(big, False).strategy == "direct"
    assert make_schedule(big, False).einsum == "abc,acd->abd"


def test_a_direct_einsum_past_52_axes_is_refused_with_the_fix():
    inputs = (tuple(range(60)),)
    with pytest.raises(ContractionError, match="at most 52 distinct axes"):
        schedule_labels(inputs, tuple(range(60)), ((1,) * 60,), strategy="direct")
    x = np.ones((2,) + (1,) * 58 + (3,))            # 'A' solves to 59 axes: 60 labels in all
    with pytest.raises(ContractionError, match="use a pairwise optimize="):
        contract("Aa->aA", x, optimize=False)
    assert contract("Aa->aA", x).shape == (3, 2) + (1,) * 58   # the default runs pairwise


def test_schedules_are_frozen_and_hashable():
    schedule = make_schedule(make_plan("Wa,Wa->W", ((40, 30), (40, 30)), ()), "greedy")
    with pytest.raises(AttributeError):
        schedule.strategy = "direct"  # type: ignore[misc]
    assert hash(schedule) == hash(make_schedule(make_plan("Wa,Wa->W", ((40, 30), (40, 30)), ()), "greedy"))


# ------------------------------------------------------------------- the registry
class LazyForeign:
    """A lazy array of an unknown library: converting it would compute it."""

    conversions = 0
    shape = (2, 3)
    ndim = 2
    dtype = np.dtype("float64")

    def __array__(self, dtype=None, copy=None):
        LazyForeign.conversions += 1
        return np.ones(self.shape)

    def __array_namespace__(self, api_version=None):
        return sys.modules[__name__]   # some namespace that is not numpy


class FakeDask(LazyForeign):
    pass


FakeDask.__module__ = "dask.array.core"


@pytest.mark.parametrize("kind", [LazyForeign, FakeDask])
def test_foreign_lazy_arrays_are_never_converted(kind):
    LazyForeign.conversions = 0
    op = kind()
    try:
        result = contract("Wa,a->W", op, np.ones(3))
    except TypeError as err:
        assert "operand 0" in str(err) and kind.__name__ in str(err)
    else:  # a registered backend took it: then it must not have come back as numpy
        assert not isinstance(result, np.ndarray)
    assert LazyForeign.conversions == 0


def test_plain_array_likes_are_converted_and_junk_is_refused():
    class Wrapped:
        def __array__(self, dtype=None, copy=None):
            return np.arange(6.0).reshape(2, 3)

    close(contract("Wa,a->W", Wrapped(), [1.0, 1.0, 1.0]), np.array([3.0, 12.0]))
    assert backend_for([np.ones(2), 3.0, [1, 2]]).name == "numpy"
    for junk, name in [(None, "NoneType"), ({"a": 1}, "dict"), ("abc", "str"), ((i for i in [1]), "generator")]:
        with pytest.raises(TypeError, match=f"operand 1 is {name}"):
            contract("a,a->", np.ones(1), junk)
    with pytest.raises(ContractionError, match="operand 0 cannot be made an array"):
        contract("Wa->W", [[1.0, 2.0], [3.0]])


# ------------------------------------------------------------------ one-way layers
STAGES = ["errors", "parser", "arguments", "solver", "expand", "plan", "model", "schedule", "compat", "backends", "checks", "calls", "api", "plotting", "explaining",
          "expressions"]


#: The stages that are packages: every module in them is checked as that stage.
PACKAGES = ("backends", "calls", "model", "schedule")
#: The schedule package's modules in data-flow order: none imports a later one.
SCHEDULE_MODULES = ["ir", "memory", "strides", "paths", "lowering", "extent_specs", "blocking", "decisions", "describe",
                    "__init__"]
#: The calls package's modules (a call's life) in data-flow order.
CALLS_MODULES = ["store", "remembered", "tiers", "structures", "runners", "__init__"]


def _stage_files(name: str) -> list[Path]:
    if name in PACKAGES:
        return sorted((REPO / "contractions" / name).glob("*.py"))
    return [REPO / "contractions" / f"{name}.py"]


def _import_nodes(path: Path) -> list[ast.ImportFrom]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]


def _imports_of(path: Path) -> set[str]:
    """First components of the contractions modules ``path`` imports (relative or absolute)."""
    package = path.parent.name if path.parent.name in PACKAGES else None
    found = set()
    for node in _import_nodes(path):
        if node.level == 0:
            if (node.module or "").startswith("contractions."):
                found.add(node.module.split(".")[1])
        elif node.level == 1 and package is not None:
            found.add(package)
        else:
            found.add((node.module or "").split(".")[0])
    return found


def _siblings_of(path: Path, package: str = "schedule") -> set[str]:
    """The modules of its own package that ``path`` (in contractions/``package``) imports."""
    found = set()
    for node in _import_nodes(path):
        if node.level == 1:
            found.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
        elif node.level == 0 and (node.module or "").startswith(f"contractions.{package}."):
            found.add(node.module.split(".")[2])
    return found


def test_no_stage_imports_a_later_stage():
    rank = {name: k for k, name in enumerate(STAGES)}
    for name in STAGES:
        for path in _stage_files(name):
            for imported in _imports_of(path):
                if imported in rank:
                    assert rank[imported] <= rank[name], f"{path.name} imports the later stage {imported}"
                assert imported != "testing", f"{path.name} imports the harness"


@pytest.mark.parametrize("package, order", [("schedule", SCHEDULE_MODULES), ("calls", CALLS_MODULES)])
def test_no_package_module_imports_a_later_one(package, order):
    rank = {name: k for k, name in enumerate(order)}
    files = _stage_files(package)
    assert {path.stem for path in files} == set(rank), f"add the new module to {package}'s list"
    for path in files:
        for imported in _siblings_of(path, package):
            assert rank[imported] < rank[path.stem], f"{package}/{path.name} imports the later {imported}"


def test_the_schedule_package_holds_no_process_state():
    # frozen data and pure functions: no lock, no module-level dict or list filled at run time
    for path in _stage_files("schedule"):
        text = path.read_text(encoding="utf-8")
        assert "threading" not in text, f"schedule/{path.name} holds process state"
        tree = ast.parse(text)
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
                    getattr(node, "value", None), (ast.Dict, ast.List, ast.Set)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                assert all(n.isupper() or n == "__all__" for n in names), (
                    f"schedule/{path.name} keeps state in {names}")


def test_numpy_calls_import_no_framework_and_no_harness():
    code = ("import sys, numpy as np\nfrom contractions import contract, explain, contract_expression\n"
            "contract('WCa,Caib,WCi->WCb', np.ones((4, 2, 3)), np.ones((2, 3, 5, 6)), np.ones((4, 2, 5)))\n"
            "explain('WCa,Caib,WCi->WCb', (4, 2, 3), (2, 3, 5, 6), (4, 2, 5))\n"
            "contract_expression('Wa->W', (2, 3))(np.ones((2, 3)))\n"
            "bad = [m for m in ('jax', 'torch', 'dask', 'contractions.testing') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ------------------------------------------------------------------------ memory_limit
@pytest.mark.parametrize("limit", [1000, 5000, "1MB", "max_input"])
def test_explain_prints_the_blocks_executed(limit):
    ops = [seeded("blocks", k).standard_normal(s) for k, s in enumerate([(40, 2, 30), (2, 30, 50, 60), (40, 2, 50)])]
    _check_explain_matches_execution("WCa,Caib,WCi->WCb", ops, memory_limit=limit)


def test_blocked_schedule_fields():
    shapes = ((40, 2, 30), (2, 30, 50, 60), (40, 2, 50))
    free = contract_expression("WCa,Caib,WCi->WCb", *shapes, memory_limit=None).schedule
    tight = contract_expression("WCa,Caib,WCi->WCb", *shapes, memory_limit=3000).schedule
    assert free.blocking is None and free.peak_extra > 3000
    assert tight.blocking is not None and tight.peak_extra <= tight.memory_limit == 3000
    assert tight.blocking.n_blocks == math.prod(tight.blocking.counts) > 1
    with pytest.raises(ContractionError, match="memory_limit=1 elements cannot be honoured"):
        contract_expression("WCa,Caib,WCi->WCb", *shapes, memory_limit=1)


@pytest.mark.parametrize("bad,error", [("lots", ValueError), (0, ValueError), (True, TypeError),
                                       ([1], TypeError), ("1.2.3MB", ValueError), ("-5kB", ValueError)])
def test_bad_memory_limits_are_refused(bad, error):
    with pytest.raises(error, match="memory_limit"):
        contract("Wa,a->W", np.ones((2, 3)), np.ones(3), memory_limit=bad)


@settings(max_examples=60, deadline=None)
@given(grouped_problems(max_terms=4, max_group_axes=2), st.integers(0, 2**32 - 1),
       st.sampled_from([2, 3, 8, 40, "max_input", "default"]))
def test_blocked_execution_matches_the_oracle(problem, seed, limit):
    operands = random_operands(problem, np.random.default_rng(seed))
    pins = needed_supplements(problem, identifiability(problem.subscripts))
    try:
        expr = contract_expression(problem.subscripts, *(a.shape for a in operands),
                                   optimize="greedy", memory_limit=limit, **pins)
    except ContractionError as err:          # a tiny explicit limit may be impossible: say so
        assert "cannot be honoured" in str(err)
        return
    if isinstance(limit, int) and expr.schedule.strategy == "pairwise":
        assert expr.schedule.peak_extra <= limit
    close(expr(*operands), loop_contract(problem.subscripts, operands, problem.group_shapes))


def test_blocked_execution_past_52_axes():
    r = seeded("b52")
    x = r.standard_normal((3,) + (1,) * 28 + (4, 5))     # A: 29 axes, then i, j
    y = r.standard_normal((1,) * 25 + (5, 6))            # B: 25 axes, then j, k
    z = r.standard_normal((6, 7))                        # k, l
    expr = contract_expression("Aij,Bjk,kl->ABil", x.shape, y.shape, z.shape, len_A=29,
                               memory_limit=20)
    assert len(expr.plan.expansion.symbols) > 52
    assert expr.schedule.blocking is not None and expr.schedule.peak_extra <= 20
    want = np.einsum("aij,jk,kl->ail", x.reshape(3, 4, 5), y.reshape(5, 6), z)
    close(expr(x, y, z).reshape(3, 4, 7), want)


def test_memory_limit_is_honoured_as_measured_by_tracemalloc():
    import tracemalloc

    # A chain whose cheapest order builds a (400 x 400 x 50) intermediate: 8 MB beside 1.6 MB
    # operands and a 1.3 MB result.
    r = seeded("trace")
    a, b, c = r.standard_normal((400, 50)), r.standard_normal((50, 400)), r.standard_normal((400, 400))
    subscripts = "Wi,iK,WK->WK"   # an elementwise product after a rank-50 product: no BLAS order avoids it

    def peak_extra(**kwargs) -> int:
        contract(subscripts, a, b, c, **kwargs)   # plan and compile outside the measurement
        scratch.clear_scratch()                    # and allocate as a first call does
        tracemalloc.start()
        tracemalloc.reset_peak()
        result = contract(subscripts, a, b, c, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return peak - result.nbytes

    want = np.einsum("wi,ik,wk->wk", a, b, c)
    close(contract(subscripts, a, b, c, memory_limit=20_000), want)
    unbounded = peak_extra(memory_limit=None)
    bounded = peak_extra(memory_limit=20_000)          # elements: 160 kB of float64
    assert unbounded > 20_000 * 8                      # the case does exceed the limit unblocked
    assert bounded <= 20_000 * 8 + 64 * 1024, (bounded, unbounded)   # + slack for Python objects


def test_default_limit_keeps_peak_within_the_largest_operand_or_result():
    # Above the default's floor (2**20 elements): the unbounded order would build a 36M-element
    # intermediate beside a 1.2M-element largest operand.
    shapes = ((3000, 100), (100, 120, 100), (3000, 120))
    free = contract_expression("Wa,aib,Wi->Wb", *shapes, memory_limit=None).schedule
    bounded = contract_expression("Wa,aib,Wi->Wb", *shapes).schedule
    largest = max(math.prod(s) for s in (*shapes, (3000, 100)))
    assert largest > DEFAULT_LIMIT_FLOOR and free.peak_extra > largest
    assert bounded.memory_limit == largest and bounded.peak_extra <= largest
    # and the same string, small enough to run here, against np.einsum
    r = seeded("default")
    x, cores, z = r.standard_normal((30, 8)), r.standard_normal((8, 6, 7)), r.standard_normal((30, 6))
    close(contract("Wa,aib,Wi->Wb", x, cores, z, memory_limit=50),
          np.einsum("wa,aib,wi->wb", x, cores, z))


def _grid_network(side: int) -> str:
    """A side x side lattice of tensors, one lowercase letter per bond, closed to a scalar."""
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    right = {(r, c): next(letters) for r in range(side) for c in range(side - 1)}
    down = {(r, c): next(letters) for r in range(side - 1) for c in range(side)}
    terms = []
    for r in range(side):
        for c in range(side):
            bonds = [right.get((r, c - 1)), right.get((r, c)), down.get((r - 1, c)), down.get((r, c))]
            terms.append("".join(b for b in bonds if b))
    return ",".join(terms) + "->"


def test_cotengra_path_candidates_are_searched_without_forking(monkeypatch):
    # cotengra's default search hands hard networks to forked worker processes, which can
    # deadlock a process running threads (JAX, torch); planning must stay in this process.
    pytest.importorskip("cotengra")
    import os

    forks = []

    def no_fork():
        forks.append(1)  # recorded, not only raised: the planner drops a failing candidate
        raise OSError("planning tried to fork")

    monkeypatch.setattr(os, "fork", no_fork)
    subscripts = _grid_network(4)   # 16 tensors: hard enough for cotengra's hyper search
    operands = [seeded("grid", k).standard_normal((2,) * len(t))
                for k, t in enumerate(subscripts[:-2].split(","))]
    close(contract(subscripts, *operands), np.einsum(subscripts, *operands))
    assert not forks


@pytest.mark.parametrize("length, kernel", [(16, "einsum"), (63, "einsum"), (64, "matmul"), (200, "matmul")])
def test_a_stack_of_dot_products_runs_as_matmuls_once_the_dots_are_long(length, kernel):
    # 'bk,bk->b' stacks: einsum's loop wins on short dots, stacked (1 x k) @ (k x 1) products on
    # long ones (DOT_MATMUL_MIN_LENGTH, measured); contiguous operands need no copy either way.
    r = seeded("dots", length)
    x, y = r.standard_normal((40, 3, length)), r.standard_normal((40, 3, length))
    expr = contract_expression("Wk,Wk->W", x.shape, y.shape, memory_limit=None, optimize="greedy",
                               len_W=2)
    assert [s.kernel for s in expr.schedule.steps] == [kernel]
    close(expr(x, y), np.einsum("abk,abk->ab", x, y))
    # a strided operand (read in place by einsum's loop, copied for BLAS) gives the same result
    xt = np.ascontiguousarray(x.transpose(2, 0, 1)).transpose(1, 2, 0)
    got = contract("Wk,Wk->W", xt, y, len_W=2, memory_limit=None, optimize="greedy")
    close(got, np.einsum("abk,abk->ab", x, y))


@pytest.mark.parametrize("subscripts, n, kernel", [
    ("ab,abc->cab", 64, "einsum"),     # 2**18 elements written in another order: einsum's loop
    ("ab,abc->cab", 32, "multiply"),   # small: np.multiply
    ("ab,abc->abc", 64, "multiply"),   # in the larger operand's order: np.multiply
])
def test_a_large_scaling_written_in_another_order_runs_as_einsums_loop(subscripts, n, kernel):
    r = seeded("within", subscripts, n)
    x, y = r.standard_normal((n, n)), r.standard_normal((n, n, n))
    expr = contract_expression(subscripts, x.shape, y.shape, memory_limit=None, optimize="greedy")
    assert [s.kernel for s in expr.schedule.steps] == [kernel]
    close(expr(x, y), np.einsum(subscripts, x, y))
    # torch's model offers no einsum kernel for broadcast products: always np.multiply there
    from contractions.model.torch_prices import TORCH_MODEL
    assert TORCH_MODEL.permuted_within_einsum_elements() == 0


def test_evolve_copies_like_dataclasses_replace():
    """`ir.evolve` (the schedule's fast copy) gives what `dataclasses.replace` gives for every
    part of a real blocked schedule, leaves the original as it was, and refuses a field the
    type does not have, naming it."""
    from contractions.schedule.ir import evolve

    plan = make_plan("WCa,Caib,WCi->WCb", ((16, 4, 30), (4, 30, 30, 30), (16, 4, 30)), ())
    schedule = make_schedule(plan, memory_limit=20_000)
    assert schedule.blocking is not None
    parts = [schedule, schedule.blocking, schedule.finish, *schedule.steps, *schedule.preparations,
             *(v for s in schedule.steps for v in (s.x_view, s.y_view) if v is not None)]
    for part in parts:
        name = next(iter(part.__dataclass_fields__))
        value = getattr(part, name)
        copy = evolve(part, **{name: value})
        assert copy == replace(part, **{name: value}) and copy is not part
        assert hash(copy) == hash(part) and type(copy) is type(part)
    changed = evolve(schedule, memory_limit=7, cost_ns=1.0)
    assert (changed.memory_limit, changed.cost_ns) == (7, 1.0)
    assert (schedule.memory_limit, schedule.cost_ns) != (7, 1.0)
    assert changed.steps is schedule.steps
    with pytest.raises(TypeError, match=r"Schedule has no field \['limit'\]"):
        evolve(schedule, limit=3)
