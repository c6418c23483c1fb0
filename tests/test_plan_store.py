"""The plan store (contractions/calls/store.py): full searches kept across processes, safely.

Behaviour is pinned by counts and results, never by time: a second process plans nothing; a
store of another version or profile is ignored with one warning; corrupt, truncated and crafted
stores give results equal to ``np.einsum`` on a hand-expanded string; processes writing at once
lose nothing; the byte bound evicts; ``off`` writes no file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
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
    """The process's store at a file of the test's own; the full search runs on first calls."""
    path = tmp_path / "plans.sqlite"
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
    path = tmp_path / "plans.sqlite"
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
    path = tmp_path / "plans.sqlite"
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


@pytest.mark.parametrize("content", [b"not a database at all" * 40, b"SQLite format 3\x00" + b"\x00" * 50])
def test_a_corrupt_or_truncated_store_costs_nothing_but_a_warning(plans_at, content):
    plans_at.write_bytes(content)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = contract(STRING, *operands())
    assert any(issubclass(w.category, StoreWarning) for w in caught)
    np.testing.assert_allclose(got, np.einsum(EXPANDED, *operands()), rtol=1e-9, atol=1e-9)


def test_a_store_cut_short_is_ignored(plans_at):
    contract(STRING, *operands())
    store_module.active_store().flush()
    whole = plans_at.read_bytes()
    plans_at.write_bytes(whole[: len(whole) // 2])
    store_module.reset_active_store()
    from contractions.calls import remembered, runners
    remembered.clear_templates()
    runners.HOT.clear()
    runners._COMPILED.cache_clear()
    runners._SCHEDULES.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWarning)
        got = contract(STRING, *operands(1))
    np.testing.assert_allclose(got, np.einsum(EXPANDED, *operands(1)), rtol=1e-9, atol=1e-9)


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


@pytest.mark.parametrize("value", CRAFTED)
def test_a_crafted_entry_gives_the_right_answer(plans_at, value):
    PlanStore(plans_at).flush()   # (the file, with this setup's header)
    with sqlite3.connect(plans_at) as db:
        db.execute("CREATE TABLE IF NOT EXISTS plans (key TEXT PRIMARY KEY, value TEXT, used REAL, size INTEGER)")
        db.execute("INSERT OR REPLACE INTO plans VALUES (?, ?, 0, 10)", (_key(), value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWarning)
        for seed in range(2):
            got = contract(STRING, *operands(seed))
            np.testing.assert_allclose(got, np.einsum(EXPANDED, *operands(seed)), rtol=1e-9, atol=1e-9)


def test_an_entry_that_fails_its_checks_is_dropped_with_a_warning(plans_at):
    PlanStore(plans_at).flush()
    with sqlite3.connect(plans_at) as db:
        db.execute("CREATE TABLE IF NOT EXISTS plans (key TEXT PRIMARY KEY, value TEXT, used REAL, size INTEGER)")
        db.execute("INSERT OR REPLACE INTO plans VALUES (?, ?, 0, 10)", (_key(), CRAFTED[2]))
    with pytest.warns(StoreWarning, match="dropped"):
        contract(STRING, *operands())
    store_module.active_store().flush()
    kept = dict(PlanStore(plans_at).entries())
    assert kept[_key()] != json.loads(CRAFTED[2])   # replaced by the search's own decisions


def test_four_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "plans.sqlite"
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
    store = PlanStore(tmp_path / "plans.sqlite", max_bytes=4000)
    for k in range(200):
        store.put(f"key-{k:03d}", {"strategy": "pairwise", "path": [[0, 1]] * 5})
        if k % 10 == 9:
            store.flush()
    store.flush()
    kept = [k for k, _ in store.entries()]
    assert 0 < store.size() <= 4000
    assert "key-199" in kept and "key-000" not in kept


def test_off_writes_no_file_and_the_default_is_the_user_cache(tmp_path):
    body = f"""
        contractions.contract({STRING!r}, *ops)
    """
    home = tmp_path / "home"
    _run(_script(body), "off", home=home)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))
    _run(_script(body), "", home=home)
    assert [p.name for p in home.rglob("*") if p.is_file()] == ["plans.sqlite"]


def test_importing_contractions_opens_no_store(tmp_path):
    path = tmp_path / "plans.sqlite"
    _run(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        import numpy as np
        from contractions import contract
        contract('ij,jk->ik', np.ones((2, 3)), np.ones((3, 4)))   # one einsum: nothing searched
    """), path)
    assert not path.exists()


def test_export_and_import_carry_plans_to_an_identical_node(tmp_path):
    here = PlanStore(tmp_path / "a.sqlite")
    here.put("k1", {"strategy": "pairwise", "path": [[0, 1]]})
    assert here.export(tmp_path / "plans.json") == 1
    there = PlanStore(tmp_path / "b.sqlite")
    assert there.import_from(tmp_path / "plans.json") == 1
    assert there.get("k1") == {"strategy": "pairwise", "path": [[0, 1]]}
    elsewhere = PlanStore(tmp_path / "c.sqlite", header={**there.header, "profile": "another"})
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

