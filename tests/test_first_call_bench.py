"""bench/tt_loop.py, bench/first_call.py and their helpers (bench/cold_start.py): the loop computes
what its docstring says and every implementation agrees with the hand-written code, a renamed
string is the same contraction, cache clearing empties the caches, a page section is rewritten
alone, and the goals' verdicts follow the numbers (no timing here: synthetic results)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from contractions import contract

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        import cold_start
        import first_call
        import tt_loop
        yield cold_start, first_call, tt_loop
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.parametrize(("subscripts", "expanded", "shapes", "kwargs"), [
    ("WCa,Caib,WCi->WCb", "wxcda,cdaib,wxcdi->wxcdb", [(2, 3, 2, 2, 4), (2, 2, 4, 3, 5), (2, 3, 2, 2, 3)], {}),
    ("WCo,WCa->Cao", "wcdo,wcda->cdao", [(2, 3, 4, 5), (2, 3, 4, 6)], {"len_W": 1}),
    ("Bii->B", "xyii->xy", [(2, 3, 4, 4)], {}),
])
def test_renamed_string_is_the_same_contraction(bench, subscripts, expanded, shapes, kwargs):
    cold_start = bench[0]
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(s) for s in shapes]
    for k in (1, 7, 25):
        fresh, fresh_kwargs = cold_start.renamed(subscripts, k, kwargs)
        assert fresh != subscripts and len(fresh) == len(subscripts)
        np.testing.assert_allclose(contract(fresh, *ops, **fresh_kwargs), np.einsum(expanded, *ops), rtol=1e-12)
    with pytest.raises(ValueError, match="same string"):
        cold_start.renamed(subscripts, 26)


def test_clear_engine_caches_empties_them(bench):
    cold_start = bench[0]
    contract("Pq,qr->Pr", np.ones((2, 3, 4)), np.ones((4, 5)))

    def held():
        return sum(value.cache_info().currsize for name, module in list(sys.modules.items())
                   if name.startswith("contractions") and module is not None
                   and name not in cold_start.KEPT_MODULES
                   for value in vars(module).values()
                   if not isinstance(value, type) and callable(getattr(value, "cache_info", None)))

    assert held() > 0
    assert cold_start.clear_engine_caches() > 0
    assert held() == 0


def test_clear_engine_caches_finds_caches_wherever_they_live(bench, monkeypatch):
    """A cache the helper was never told about: a module's own clear_* function and a hot dict."""
    import types

    cold_start = bench[0]
    module = types.ModuleType("contractions._probe_for_test")
    module._TEMPLATES = {"key": "schedule"}
    module._HOT = {"key": "callable"}
    module._REGISTRY = {"numpy": "backend"}  # not a cache: kept
    module.clear_templates = lambda: module._TEMPLATES.clear()
    module.clear_one = lambda key: module._REGISTRY.pop(key)  # needs an argument: never called
    monkeypatch.setitem(sys.modules, module.__name__, module)
    cold_start.clear_engine_caches()
    assert module._TEMPLATES == {} and module._HOT == {} and module._REGISTRY == {"numpy": "backend"}


def test_write_section_rewrites_only_its_own(bench, tmp_path):
    cold_start = bench[0]
    page = tmp_path / "page.md"
    cold_start.write_section("One", "first\n", page)
    cold_start.write_section("Two", "second\n\n### sub\n", page)
    cold_start.write_section("One", "first again\n", page)
    text = page.read_text()
    assert text.startswith(cold_start.PAGE_TITLE)
    assert "first again" in text and "first\n" not in text.replace("first again", "")
    assert text.index("## One") < text.index("## Two") and "### sub" in text


def test_loop_agrees_with_the_hand_written_code(bench):
    tt_loop = bench[2]
    ops = tt_loop.Ops("numpy")
    schedule = tt_loop.make_schedule(iterations=2)
    data = tt_loop.backend_data(schedule, ops)
    n_stack, n_probes = len(tt_loop.STACK), len(tt_loop.PROBES)
    records = {name: tt_loop.run_pass(cls(n_stack, n_probes, "numpy"), ops, data, n_stack, record=True)
               for name, cls in tt_loop.IMPL_CLASSES.items()}
    assert tt_loop.verify(records, ops) == []
    value, again, grads = records["hand"][-1]
    assert value.shape == tt_loop.STACK + tt_loop.PROBES[:-1] + (tt_loop.PROBES[-1] + 1, 1)
    assert len(grads) == len(tt_loop.MODES) and np.abs(value).max() > 0
    # the value by an explicit loop over one train and one probe point (the first iteration)
    vec = np.ones(1)
    for core, m, p in zip((c[0] for c in schedule.cores[0]), (m[0] for m in schedule.matrices),
                          (p[0, 0] for p in schedule.probes)):
        vec = vec @ np.tensordot(core, m @ p, axes=([1], [0]))
    assert np.isclose(records["hand"][0][0][0, 0, 0, 0], vec[0])

    class Wrong(tt_loop.HandImpl):
        def back(self, y, m):
            return 1.001 * super().back(y, m)

    records["wrong"] = tt_loop.run_pass(Wrong(n_stack, n_probes, "numpy"), ops, data, n_stack, record=True)
    assert tt_loop.verify(records, ops) == ["wrong: iteration 0 differs from the hand-written code",
                                            "wrong: iteration 1 differs from the hand-written code"]


def test_loop_report_goals_follow_the_numbers(bench, tmp_path):
    tt_loop = bench[2]
    pytest.importorskip("matplotlib")
    run = {"times": {"contract": [0.020, 0.004, 0.004, 0.004, 0.008], "hand": [0.010] * 5,
                     "opt_einsum": [0.020] * 5}, "problems": []}
    results = {"runs": {"numpy": [run, run]}, "repeats": 2, "passes": 5, "calls_per_pass": 240,
               "distinct_per_pass": 236, "versions": {"numpy": "2"}, "cores": 2, "stack": (2,),
               "probes": (3, 4), "modes": tt_loop.MODES, "ranks_first": tt_loop.RANKS,
               "ranks_last": tt_loop.ranks_at(5), "iterations": 6}
    text = tt_loop.render(results, smoke=True)
    assert text.startswith("**Smoke run**")
    assert "| 1 | 10.0 | 20.0 | 0.50x | 20.0 | 0.50x |" in text
    assert "| pass 1 (every shape new): speed-up of `contract` | >= 1.0 | 0.50x | no |" in text
    assert "| pass 5 (shapes seen before): speed-up of `contract` | >= 1.5 | 1.25x | no |" in text
    tt_loop.plot(results, tmp_path / "loop.png")
    assert (tmp_path / "loop.png").stat().st_size > 1000


def test_first_call_report_goals_follow_the_numbers(bench):
    first_call = bench[1]

    def row(s, n, ours, peer):
        return {"subscripts": s, "operands": n,
                "new_shape_ms": {"contract": ours, "opt_einsum": peer, "einsum_optimize": peer},
                "new_string_ms": {"contract": 2 * ours, "opt_einsum": peer, "einsum_optimize": peer}}

    large = {"subscripts": "WCa,Caib,WCi->WCb", "operands": 3, "flops": 4e8, "first_new_string_ms": 11.0,
             "first_new_shape_ms": 10.5, "warm_ms": 10.0, "expression_ms": 9.5}
    results = {"numpy": {"rows": [row("Wa,ab->Wb", 2, 0.1, 0.2), row("Wa,ab,bc->Wc", 3, 0.2, 0.2),
                                  row("Wa,ab,bc,cd->Wd", 4, 0.4, 0.2)], "large": [large]},
               "jax": {"rows": [{"subscripts": "Wa,ab->Wb", "operands": 2, "contract_ms": 50.0,
                                 "einsum_ms": 40.0}]}}
    text = first_call.render(results, smoke=False)
    # new shape: median 0.2 over medians 0.2 -> met; new string 3-4 operands: median(0.4, 0.8) = 0.6 > 0.5
    assert "| new shape: median first call, `contract` / `opt_einsum.contract` | <= 1 | 1.00x | yes |" in text
    assert "| new string, 3-4 operands: median first call of `contract` | <= 0.5 ms | 0.600 ms | no |" in text
    assert "| first call of a new string / its own warm call | <= 1.15 | 1.10x | yes |" in text
    assert "| first call of a new shape / its own warm call | <= 1.15 | 1.05x | yes |" in text
    assert "| warm call / `contract_expression`'s warm call | <= 1.1 | 1.05x | yes |" in text
    assert "| median over 1 strings | 50.0 | 40.0 | 1.25x |" in text
    assert "| `Wa,ab,bc,cd->Wd` | 4 | 0.400 | 0.200 | 0.200 | 0.800 | 0.200 | 0.200 |" in text


def test_small_cases_stay_small_and_grow_one_extent(bench):
    first_call = bench[1]
    case = first_call.Small("Camb,Casc,mstn,Cbtd->Ccnd")
    base = case.shapes(case.base)
    assert max(int(np.prod(s)) for s in base) <= first_call.SMALL_CAP
    seen = {base}
    for k in range(1, 8):
        grown = case.grown(k)
        assert sum(map(sum, grown)) > sum(map(sum, base)) and grown not in seen
        seen.add(grown)


def test_a_large_new_shape_follows_a_nearby_call(bench):
    # (the known string was called at extents one lowercase letter smaller by k)
    _, first_call, _ = bench
    groups = {"W": (2, 3), "C": (4,)}
    shapes = first_call.large_shapes("WCa,Caib,WCi->WCb", groups, {"a": 10, "b": 11, "i": 12})
    assert shapes == ((2, 3, 4, 10), (4, 10, 12, 11), (2, 3, 4, 12))
    assert first_call.nearby("WCa,Caib,WCi->WCb", groups, shapes, 1) == (
        (2, 3, 4, 9), (4, 9, 12, 11), (2, 3, 4, 12))                     # a - 1
    assert first_call.nearby("WCa,Caib,WCi->WCb", groups, shapes, 2) == (
        (2, 3, 4, 10), (4, 10, 12, 9), (2, 3, 4, 12))                    # b - 2
    assert first_call.nearby("WCa,Caib,WCi->WCb", groups, shapes, 4) == (
        (2, 3, 4, 6), (4, 6, 12, 11), (2, 3, 4, 12))                     # a again, - 4
