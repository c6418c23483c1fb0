"""The plan store (contractions/calls/store.py): full searches kept across processes, safely.

Behaviour is pinned by counts and results, never by time: a second process plans nothing; a
store of another version or profile is ignored with one warning; corrupt, truncated and crafted
stores give results equal to ``np.einsum`` on a hand-expanded string; processes writing at once
lose nothing; the byte bound evicts; ``off`` writes no file.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from contractions import contract, explain
from contractions.calls import store as store_module
from contractions.calls import tiers
from contractions.calls.store import PlanStore, StoreWarning
from contractions.model.numpy_prices import NUMPY_MODEL
from contractions.plan import make_plan

pytestmark = pytest.mark.usefixtures("nothing_planned")

REPO = Path(__file__).resolve().parent.parent
STRING = "WCa,Caib,WCi->WCb"
EXPANDED = "xCa,Caib,xCi->xCb"
SHAPES = ((40, 2, 30), (2, 30, 50, 60), (40, 2, 50))


def operands(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in SHAPES]


@pytest.fixture
def plans_at(tmp_path, monkeypatch):
    """The process's store in a directory of the test's own; the full search runs on first calls."""
    path = tmp_path / "plans"
    monkeypatch.setenv("CONTRACTIONS_PLANS", str(path))
    monkeypatch.setattr(tiers, "search_ns", lambda n, model=None: 0.0)
    store_module.reset_active_store()
    yield path
    store_module.reset_active_store()


def _key() -> str:
    return tiers.store_key(make_plan(STRING, SHAPES, ()), True, "default", None, NUMPY_MODEL)


def _script(body: str) -> str:
    return textwrap.dedent(f"""
        import sys, json
        sys.path.insert(0, {str(REPO)!r})
        import numpy as np
        import contractions
        from contractions.calls import tiers
        searched = []
        search = tiers.make_schedule
        def counting(*args, **kwargs):
            searched.append(1)
            return search(*args, **kwargs)
        tiers.make_schedule = counting
        tiers.search_ns = lambda n, model=None: 0.0     # (the full search on a first call)
        rng = np.random.default_rng(0)
        ops = [rng.standard_normal(s) for s in {SHAPES!r}]
    """) + textwrap.dedent(body)


def _run(script: str, env_path: Path | str, home: Path | None = None) -> str:
    env = dict(os.environ, CONTRACTIONS_PLANS=str(env_path))
    if home is not None:
        env.update(XDG_CACHE_HOME=str(home), HOME=str(home))
        if env_path == "":
            del env["CONTRACTIONS_PLANS"]
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_second_process_runs_the_stored_plan_and_searches_nothing(tmp_path):
    path = tmp_path / "plans"
    body = f"""
        report = contractions.explain({STRING!r}, *ops)   # (how a first call is planned)
        result = contractions.contract({STRING!r}, *ops)
        print(json.dumps([len(searched), float(result.sum()), 'stored plan' in report]))
    """
    first = json.loads(_run(_script(body), path))
    second = json.loads(_run(_script(body), path))
    assert first[0] >= 1 and not first[2]          # the first process searched
    assert second[0] == 0 and second[2]            # the second searched nothing
    assert second[1] == pytest.approx(first[1], rel=1e-12)
    assert path.exists()


def test_an_expression_in_a_second_process_searches_nothing(tmp_path):
    path = tmp_path / "plans"
    body = f"""
        expr = contractions.contract_expression({STRING!r}, *[o.shape for o in ops])
        print(json.dumps([len(searched), float(expr(*ops).sum())]))
    """
    first, second = (json.loads(_run(_script(body), path)) for _ in range(2))
    assert first[0] >= 1 and second[0] == 0 and second[1] == pytest.approx(first[1], rel=1e-12)


def test_the_stored_plan_is_the_searched_one(plans_at):
    ops = operands()
    searched = explain(STRING, *ops)
    contract(STRING, *ops)                             # the full search, kept
    store_module.active_store().flush()
    from contractions.calls import remembered
    remembered.clear_templates()
    from contractions.calls import runners
    runners.HOT.clear()
    runners._COMPILED.cache_clear()
    runners._SCHEDULES.cache_clear()
    stored = explain(STRING, *ops)
    assert "stored plan" in stored
    # the same schedule: the report's lines but its first-call line agree
    strip = lambda text: [line for line in str(text).splitlines() if not line.startswith("first call")]
    assert strip(stored) == strip(searched)


def test_a_stored_plan_serves_the_first_call_the_quick_tier_would_have(plans_at, monkeypatch):
    contract(STRING, *operands())                      # (searched at once: the fixture's price)
    store_module.active_store().flush()
    _fresh_process_state()
    monkeypatch.setattr(tiers, "search_ns", lambda n, model=None: 1e15)   # (never pays: quick)
    searched = []
    monkeypatch.setattr(tiers, "make_schedule", lambda *a, **k: searched.append(1))
    plan = make_plan(STRING, SHAPES, ())
    first = tiers.first_schedule(plan, memory_limit="default")
    assert first.tier == "stored" and first.upgrade_after == 0 and not searched
    np.testing.assert_allclose(contract(STRING, *operands(2)), np.einsum(EXPANDED, *operands(2)),
                               rtol=1e-9, atol=1e-9)
    _fresh_process_state()
    other = make_plan(STRING, ((40, 2, 31), (2, 31, 50, 60), (40, 2, 50)), ())   # (not stored)
    assert tiers.first_schedule(other, memory_limit="default").tier == "quick"
    # a small call's first call does not look (a lookup would cost more than it could win)
    looked = []
    monkeypatch.setattr(tiers, "stored_schedule", lambda *a, **k: looked.append(1))
    small = make_plan(STRING, ((4, 2, 3), (2, 3, 5, 6), (4, 2, 5)), ())
    assert math.prod(small.shapes[1]) < tiers.STORE_FIRST_ELEMENTS
    assert tiers.first_schedule(small, memory_limit="default").tier in ("quick", "first", "full")
    assert not looked


def test_a_first_call_looks_in_the_store_once(plans_at, monkeypatch):
    looked = []
    get = PlanStore.get
    monkeypatch.setattr(PlanStore, "get", lambda self, key: looked.append(key) or get(self, key))
    first = tiers.first_schedule(make_plan(STRING, SHAPES, ()), memory_limit="default")
    assert first.tier == "full"            # (looked before the quick tier, then searched at once)
    assert looked == [_key()]


@pytest.mark.parametrize("field", ["version", "profile", "format"])
def test_a_store_of_another_setup_is_ignored_with_one_warning(plans_at, field):
    header = {"format": "0", "version": "0.0.0", "profile": "elsewhere"}
    header = {**PlanStore(plans_at).header, field: header[field]}
    foreign = PlanStore(plans_at, header=header)
    foreign.put(_key(), {"strategy": "pairwise", "path": [[0, 2], [0, 1]]})
    foreign.flush()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            got = contract(STRING, *operands())
    ignored = [w for w in caught if issubclass(w.category, StoreWarning)]
    assert len(ignored) == 1 and str(plans_at) in str(ignored[0].message)
    assert field in str(ignored[0].message)
    np.testing.assert_allclose(got, np.einsum(EXPANDED, *operands()), rtol=1e-9, atol=1e-9)
    # never half used: nothing of this process was written into it
    assert [k for k, _ in PlanStore(plans_at, header=header).entries()] == [_key()]


@pytest.mark.parametrize("where", ["header", "the path itself"])
@pytest.mark.parametrize("content", [b"not json at all {" * 40, b"", b'{"format": "2", "vers'])
def test_a_corrupt_or_truncated_store_costs_nothing_but_a_warning(plans_at, where, content):
    if where == "header":
        plans_at.mkdir()
        (plans_at / "header.json").write_bytes(content)
    else:
        plans_at.write_bytes(content)      # (a file where the store's directory should be)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = contract(STRING, *operands())
        store_module.active_store().flush()
    assert any(issubclass(w.category, StoreWarning) for w in caught)
    np.testing.assert_allclose(got, np.einsum(EXPANDED, *operands()), rtol=1e-9, atol=1e-9)


def _fresh_process_state() -> None:
    """Forget what this process planned (as a new process would have)."""
    from contractions.calls import remembered, runners
    remembered.clear_templates()
    runners.HOT.clear()
    runners._COMPILED.cache_clear()
    runners._SCHEDULES.cache_clear()


def test_an_entry_cut_short_is_dropped(plans_at):
    contract(STRING, *operands())
    store_module.active_store().flush()
    entry = PlanStore(plans_at).entry_path(_key())
    whole = entry.read_bytes()
    entry.write_bytes(whole[: len(whole) // 2])
    store_module.reset_active_store()
    _fresh_process_state()
    with pytest.warns(StoreWarning, match="does not parse"):
        got = contract(STRING, *operands(1))
    np.testing.assert_allclose(got, np.einsum(EXPANDED, *operands(1)), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", ["pipe", "directory", "huge"])
def test_an_entry_that_is_no_small_file_costs_nothing_but_a_warning(plans_at, kind):
    _craft(plans_at, "{}")
    entry = PlanStore(plans_at).entry_path(_key())
    entry.unlink()
    if kind == "pipe":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no named pipes here")
        os.mkfifo(entry)        # (opening one to read would wait for a writer for ever)
    elif kind == "directory":
        entry.mkdir()
    else:
        entry.write_bytes(b" " * (store_module.MAX_ENTRY_BYTES + 10))
    with pytest.warns(StoreWarning, match="could not be read"):
        got = contract(STRING, *operands())
    np.testing.assert_allclose(got, np.einsum(EXPANDED, *operands()), rtol=1e-9, atol=1e-9)


def test_an_entry_under_another_key_is_not_this_entry(plans_at):
    store = PlanStore(plans_at)
    store.put("another key", {"strategy": "pairwise", "path": [[0, 1]]})
    store.flush()
    os.replace(store.entry_path("another key"), store.entry_path(_key()))   # (a checksum clash)
    assert PlanStore(plans_at).get(_key()) is None
    np.testing.assert_allclose(contract(STRING, *operands()), np.einsum(EXPANDED, *operands()),
                               rtol=1e-9, atol=1e-9)


CRAFTED = [
    "not json {",
    json.dumps([1, 2, 3]),
    json.dumps({"strategy": "pairwise", "path": [[0, 9], [0, 1]]}),           # no operand 9
    json.dumps({"strategy": "pairwise", "path": [[0, 1]]}),                    # too short
    json.dumps({"strategy": "pairwise", "path": [[0, 0], [0, 1]]}),            # a pair with itself
    json.dumps({"strategy": "pairwise", "path": [["a", 1], [0, 1]]}),
    json.dumps({"strategy": "loops", "path": [[0, 1], [0, 1]]}),
    json.dumps({"strategy": "pairwise", "path": [[0, 2], [0, 1]],              # a chunk past its extent
                "blocks": {"labels": [0], "chunks": [400], "purpose": "memory"}}),
    json.dumps({"strategy": "pairwise", "path": [[0, 2], [0, 1]],              # an unknown label
                "blocks": {"labels": [77], "chunks": [2], "purpose": "memory"}}),
    json.dumps({"strategy": "pairwise", "path": [[0, 2], [0, 1]],              # chunks of 0
                "blocks": {"labels": [0], "chunks": [0], "purpose": "memory"}}),
    json.dumps({"strategy": "pairwise", "path": [[0, 2], [0, 1]],
                "blocks": {"labels": [0], "chunks": [3], "purpose": "exec('boom')"}}),
    json.dumps({"strategy": "pairwise", "path": [[1, 2], [0, 1]],              # valid, not the searched
                "blocks": {"labels": [0], "chunks": [7], "purpose": "cache"}}),
    json.dumps({"strategy": "direct", "path": [[0, 2], [0, 1]]}),
    "[" * 100_000 + "]" * 100_000,                                             # nested too deep to parse
    json.dumps({"strategy": "pairwise", "path": [[0, 1], [0, 1]], "blocks": {"labels": [0, 0], "chunks": [2, 2],
                                                                            "purpose": "memory"}}),
]


def _craft(path: Path, value: str, whole: bool = False) -> None:
    """Write ``value`` as the stored decisions of `_key` (``whole``: as the entry's whole file)."""
    store = PlanStore(path)
    store.put("(opens the store, with this setup's header)", None)
    store.flush()
    text = value if whole else '{"key": ' + json.dumps(_key()) + ', "value": ' + value + "}"
    store.entry_path(_key()).write_text(text)


@pytest.mark.parametrize("whole", [False, True])
@pytest.mark.parametrize("value", CRAFTED)
def test_a_crafted_entry_gives_the_right_answer(plans_at, value, whole):
    _craft(plans_at, value, whole)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWarning)
        for seed in range(2):
            got = contract(STRING, *operands(seed))
            np.testing.assert_allclose(got, np.einsum(EXPANDED, *operands(seed)), rtol=1e-9, atol=1e-9)


def test_an_entry_that_fails_its_checks_is_dropped_with_a_warning(plans_at):
    _craft(plans_at, CRAFTED[2])
    with pytest.warns(StoreWarning, match="dropped"):
        contract(STRING, *operands())
    store_module.active_store().flush()
    kept = dict(PlanStore(plans_at).entries())
    assert kept[_key()] != json.loads(CRAFTED[2])   # replaced by the search's own decisions


def test_four_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "plans"
    writer = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from contractions.calls.store import PlanStore
        store = PlanStore({str(path)!r})
        for k in range(120):
            store.put(f"{{sys.argv[1]}}-{{k}}", {{"strategy": "pairwise", "path": [[0, 1]], "k": k}})
        store.flush()
    """)
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(n)]) for n in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    keys = {k for k, _ in PlanStore(path).entries()}
    assert keys == {f"{n}-{k}" for n in range(4) for k in range(120)}


def test_the_byte_bound_evicts_the_least_recently_used(tmp_path):
    store = PlanStore(tmp_path / "plans", max_bytes=40 * store_module.BLOCK)
    for k in range(200):
        store.put(f"key-{k:03d}", {"strategy": "pairwise", "path": [[0, 1]] * 5})
        if k % 10 == 9:
            store.flush()
            time.sleep(0.01)      # (least recently used: by the files' times)
    store.flush()
    kept = [k for k, _ in store.entries()]
    assert len(kept) == 40 and store.size() == 40 * store_module.BLOCK
    assert "key-199" in kept and "key-000" not in kept


def test_off_writes_no_file_and_the_default_is_the_user_cache(tmp_path):
    body = f"""
        contractions.contract({STRING!r}, *ops)
    """
    home = tmp_path / "home"
    _run(_script(body), "off", home=home)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))
    _run(_script(body), "", home=home)
    written = [p.relative_to(home) for p in home.rglob("*") if p.is_file()]
    assert {p.parent.name for p in written} == {"plans"} and len(written) == 2   # the header, one plan


def test_importing_contractions_opens_no_store(tmp_path):
    path = tmp_path / "plans"
    _run(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        import numpy as np
        from contractions import contract
        contract('ij,jk->ik', np.ones((2, 3)), np.ones((3, 4)))   # one einsum: nothing searched
    """), path)
    assert not path.exists()


def test_export_and_import_carry_plans_to_an_identical_node(tmp_path):
    here = PlanStore(tmp_path / "a")
    here.put("k1", {"strategy": "pairwise", "path": [[0, 1]]})
    assert here.export(tmp_path / "plans.json") == 1
    there = PlanStore(tmp_path / "b")
    assert there.import_from(tmp_path / "plans.json") == 1
    assert there.get("k1") == {"strategy": "pairwise", "path": [[0, 1]]}
    elsewhere = PlanStore(tmp_path / "c", header={**there.header, "profile": "another"})
    with pytest.raises(ValueError, match="another version of grouped-einsum or with another profile"):
        elsewhere.import_from(tmp_path / "plans.json")


def test_the_plans_command_shows_exports_imports_and_clears(plans_at, tmp_path, capsys):
    from contractions.cli import main

    contract(STRING, *operands())
    assert main(["plans", "--show"]) == 0
    shown = capsys.readouterr().out
    assert str(plans_at) in shown and "1 plans" in shown
    exported = tmp_path / "exported.json"
    assert main(["plans", "--export", str(exported)]) == 0
    assert json.loads(exported.read_text())["plans"]
    assert main(["plans", "--clear"]) == 0 and not plans_at.exists()
    assert main(["plans", "--import", str(exported)]) == 0
    assert "added 1 plans" in capsys.readouterr().out
    assert len(PlanStore(plans_at).entries()) == 1
    foreign = PlanStore(plans_at, header={**PlanStore(plans_at).header, "version": "0.0.1"})
    assert foreign.entries() == [] and foreign.ignored
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"header": {"version": "0"}, "plans": {}}))
    assert main(["plans", "--import", str(bad)]) == 2
    assert "another version" in capsys.readouterr().err


def test_the_plans_command_says_when_the_store_is_off(monkeypatch, capsys):
    from contractions.cli import main

    monkeypatch.setenv("CONTRACTIONS_PLANS", "off")
    store_module.reset_active_store()
    try:
        assert main(["plans"]) == 0
        assert "off" in capsys.readouterr().out
    finally:
        store_module.reset_active_store()


def test_a_measured_cuda_route_is_recalled_by_a_later_runner_without_timing(plans_at, monkeypatch):
    from contractions.backends import measured

    timed: list[str] = []

    def fake_timer(name, run, operands, sync):
        timed.append(name)
        return run(*operands), {"steps": 3.0, "one_einsum": 1.0}[name]

    monkeypatch.setattr(measured, "timer", fake_timer)

    def runner_for(key):
        chosen = []
        route = measured.MeasuredRoute([("steps", lambda x: ("steps", x)), ("one_einsum", lambda x: ("one", x))],
                                       "steps", chosen.append, sync=lambda: None, key=key,
                                       where=lambda ops: "Fake GPU 80GB")
        return route, chosen

    key = ("torch", "ab,bc->ac", ((2, 3), (3, 4)), ((0, 1),), "None")
    route, chosen = runner_for(key)
    while not chosen:
        route(1)
    assert timed and route.chosen == "one_einsum"
    store_module.active_store().flush()
    measured._CHOSEN.clear()                         # (as in a new process)
    timed.clear()
    again, settled = runner_for(key)
    assert again(2) == ("one", 2) and settled and not timed

