"""The torch time model's choice between a schedule's steps and one torch.einsum: every route
it can pick gives the loop oracle's values on the vocabulary, the choice is data (made once, as
`explain` reports it), and the model module never imports torch."""

from __future__ import annotations

import subprocess
import sys
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from contractions import explain, make_plan, make_schedule  # noqa: E402
from contractions.backends import BackendOptions, torch_backend  # noqa: E402
from contractions.backends.compile import compile_schedule  # noqa: E402
from contractions.backends.torch_backend import TORCH_OPS, _einsum_along_path, torch_route  # noqa: E402
from contractions.calls import runners, tiers  # noqa: E402
from contractions.model.torch_prices import TORCH_MODEL, torch_default_path  # noqa: E402
from contractions.testing.oracle import loop_contract  # noqa: E402

from ._vocabulary import random_problem, vocabulary  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
VOCABULARY = vocabulary()


@pytest.mark.parametrize("subscripts,pins", VOCABULARY[::3], ids=[s for s, _ in VOCABULARY[::3]])
def test_every_route_matches_the_oracle(subscripts, pins):
    problem = random_problem(subscripts, pins, np.random.default_rng(zlib.crc32(subscripts.encode())),
                             extents=(1, 4))
    shapes = tuple(a.shape for a in problem.operands)
    supplements = tuple(sorted((k[4:], v) for k, v in problem.len_kwargs.items()))
    plan = make_plan(subscripts, shapes, supplements)
    expected = loop_contract(subscripts, problem.operands, problem.group_shapes)
    tensors = [torch.tensor(a) for a in problem.operands]
    for strategy in ("direct", "pairwise"):
        schedule = make_schedule(plan, "auto" if strategy == "pairwise" else False)
        if strategy == "pairwise" and schedule.strategy == "direct":
            schedule = make_schedule(plan, "greedy")
        runs = [torch_backend.compile(plan, schedule, BackendOptions())]
        if schedule.strategy == "pairwise":
            runs.append(compile_schedule(schedule, TORCH_OPS))
        if schedule.einsum is not None:
            runs.append(_einsum_along_path(schedule))
            own = torch_default_path(schedule)
            if own is not None:
                runs.append(_einsum_along_path(schedule, own))
        for run in runs:
            np.testing.assert_allclose(run(*tensors).numpy(), expected, rtol=1e-10, atol=1e-10)


def test_permutations_and_diagonals_return_what_torch_einsum_returns():
    """torch's convention, not numpy's no-alias copy: a pure permutation or diagonal is the
    view torch.einsum gives (same values, same storage, same strides)."""
    for s, expanded, shape in (("Wa->aW", "ija->aij", (3, 4, 5)), ("Wii->Wi", "jii->ji", (2, 3, 3))):
        op = torch.randn(*shape, dtype=torch.float64)
        plan = make_plan(s, (shape,), ())
        out = torch_backend.compile(plan, make_schedule(plan, cost_model=TORCH_MODEL),
                                    BackendOptions())(op)
        theirs = torch.einsum(expanded, op)
        assert torch.equal(out, theirs) and out.stride() == theirs.stride()
        assert out.untyped_storage().data_ptr() == op.untyped_storage().data_ptr()


def test_the_schedule_carries_the_torch_choice_and_the_backend_follows_it():
    """Planned with the torch model, a schedule numpy runs as steps is one einsum call (and
    the reverse: tiny numpy direct stays direct); the backend compiles exactly that route."""
    plan = make_plan("OIJ,KI,KJ->KO", ((8,) * 6, (8,) * 4, (8,) * 4), (("O", 2),))
    numpy_schedule = make_schedule(plan)
    torch_schedule = make_schedule(plan, cost_model=TORCH_MODEL)
    assert numpy_schedule.strategy == "pairwise" and numpy_schedule.steps
    assert torch_schedule.strategy == "direct" and torch_schedule.steps == ()
    assert torch_route(torch_schedule) == ("einsum", torch_schedule.path)
    assert torch_route(numpy_schedule) == ("steps", None)
    # a model whose dispatches cost nothing keeps the steps: the choice is the model's
    free = TORCH_MODEL.with_prices(torch_ns_per_op=0.0, torch_ns_per_einsum_call=1e9)
    assert make_schedule(make_plan("BHqd,BHkd->BHqk", ((2, 2, 64, 32), (2, 2, 64, 32)), ()),
                         cost_model=free).strategy == "pairwise"
    # the api plans torch calls with the registry's model
    from contractions.backends import backend_named
    assert backend_named("torch").cost_model is TORCH_MODEL
    ops = [torch.ones(s) for s in plan.shapes]
    runners.HOT.clear()
    recorded = []
    original = torch_backend.compile

    def spy(plan_, schedule, options):
        recorded.append(schedule)
        return original(plan_, schedule, options)

    torch_backend.compile = spy
    try:
        runners._COMPILED.cache_clear()
        from contractions import contract
        out = contract("OIJ,KI,KJ->KO", *ops, len_O=2)
    finally:
        torch_backend.compile = original
    # (a first call may be planned by a cheaper tier than the full search, schedule/tiers.py:
    # its path may differ, its route is the torch model's one einsum call all the same)
    first = tiers.first_schedule(plan, use_einsum=True, memory_limit=None, cost_model=TORCH_MODEL,
                                 remember=False)
    assert recorded and recorded[0] == first.schedule
    assert recorded[0].strategy == "direct" and torch_route(recorded[0])[0] == "einsum"
    assert torch.allclose(out, torch.einsum("abcdef,ghcd,ghef->ghab", *ops))


def test_choice_is_einsum_when_tiny_and_steps_past_52_labels():
    tiny = make_schedule(make_plan("Wa,ab->Wb", ((2, 3), (3, 4)), ()), cost_model=TORCH_MODEL)
    assert torch_route(tiny) == ("einsum", tiny.path)
    many = make_plan("AB,BC->AC", ((1,) * 30 + (2,) * 20, (2,) * 20 + (1,) * 10), (("A", 30),))
    assert torch_route(make_schedule(many, cost_model=TORCH_MODEL)) == ("steps", None)


def test_blocked_schedules_run_their_steps():
    plan = make_plan("WCa,Caib,WCi->WCb", ((40, 2, 30), (2, 30, 50, 60), (40, 2, 50)), ())
    blocked = make_schedule(plan, memory_limit=3000)
    assert blocked.blocking is not None and TORCH_MODEL.choose(blocked) == ("steps", None)


def test_the_constants_decide():
    """The model is data: constants that make dispatches free pick the steps, constants that
    make them dear pick one einsum call."""
    schedule = make_schedule(make_plan("WCa,Caib,WCi->WCb", ((64, 8, 32), (8, 32, 32, 32), (64, 8, 32)), ()))
    assert schedule.strategy == "pairwise"
    cheap_ops = TORCH_MODEL.with_prices(torch_ns_per_op=0.0, torch_ns_per_einsum_call=1e9)
    dear_ops = TORCH_MODEL.with_prices(torch_ns_per_op=1e9, torch_ns_per_einsum_call=0.0)
    assert cheap_ops.choose(schedule)[0] == "steps"
    assert dear_ops.choose(schedule)[0] == "einsum"
    assert hash(cheap_ops) != hash(dear_ops) and hash(replace(TORCH_MODEL)) == hash(TORCH_MODEL)
    assert replace(TORCH_MODEL).steps_ns(schedule) == TORCH_MODEL.steps_ns(schedule) > 0


def test_explain_reports_the_torch_route():
    ops = [torch.ones(s) for s in ((2, 3), (3, 4))]
    report = explain("Wa,ab->Wb", *ops)
    assert "one torch.einsum 'ab,bc->ac' along the schedule's path (torch time model:" in report


def test_model_module_imports_no_torch():
    code = ("import sys\nimport contractions.model.torch_prices as m\nfrom contractions import make_plan, "
            "make_schedule\ns = make_schedule(make_plan('Wa,ab,b->W', ((2, 3), (3, 4), (4,)), ()))\n"
            "m.TORCH_MODEL.choose(s)\nprint('torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False"]


@pytest.mark.parametrize("module", ["contractions.model.torch_prices", "contractions.backends.torch_backend",
                                    "contractions.backends.torch_compile_hook"])
def test_docstring_examples(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
