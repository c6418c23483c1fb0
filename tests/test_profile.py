"""Profiles: the prices as one record, read from a file, chosen at import, named by ``explain``,
and measured by ``contractions calibrate``.

Every model here is built on a stated profile (the reference `Profile()` or one written by the
test), never on the active one, so the tests hold whatever profile the machine running them has.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from contractions import cli
from contractions.model import profile as profile_module
from contractions.model.host import Machine, flops_per_cycle
from contractions.model.numpy_prices import NumpyCostModel
from contractions.model.profile import (
    ENVIRONMENT_VARIABLE,
    Profile,
    ProfileError,
    ProfileWarning,
    builtin_profile,
    load_profile,
    save_profile,
    select_profile,
)
from contractions.plan import make_plan
from contractions.schedule import describe_schedule, make_schedule

REPO = Path(__file__).resolve().parents[1]
ELSEWHERE = Machine(cpu="Some Other CPU", cores=64, blas="mkl 2024", threads=32, l2_bytes=1 << 21,
                    l3_bytes=1 << 28)


def _written(tmp_path: Path, **prices) -> tuple[Path, Profile]:
    profile = replace(Profile(), **prices, machine=ELSEWHERE, measured="2026-01-02T03:04:05+00:00")
    return save_profile(profile, tmp_path / "sub" / "profile.json"), profile


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, *args], cwd=REPO, env=environment, capture_output=True,
                          text=True, timeout=300, check=False)


# ------------------------------------------------------------------------------ the file
def test_a_profile_survives_a_round_trip_through_its_file(tmp_path):
    path, written = _written(tmp_path, ns_per_mac=0.125, blas_threads=7, torch_ns_per_op=900.0)
    read = load_profile(path)
    assert read.source == str(path) and read.machine == ELSEWHERE and read.measured == written.measured
    assert read.prices() == written.prices()
    assert read.ns_per_mac == 0.125 and read.blas_threads == 7 and read.torch_ns_per_op == 900.0
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["machine"]["cpu"] == "Some Other CPU" and data["prices"]["ns_per_mac"] == 0.125


def test_a_price_the_file_lacks_keeps_its_default(tmp_path):
    path, _ = _written(tmp_path, ns_per_mac=0.5)
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["prices"]["ns_per_call"]
    path.write_text(json.dumps(data), encoding="utf-8")
    read = load_profile(path)
    assert read.ns_per_mac == 0.5 and read.ns_per_call == Profile().ns_per_call


@pytest.mark.parametrize("change,message", [
    (lambda d: d["prices"].update(ns_per_mac=-1.0), r"gives 'ns_per_mac' the value -1.0: expected a non-negative number"),
    (lambda d: d["prices"].update(tlb_pages=6.5), r"gives 'tlb_pages' the value 6.5: expected a non-negative integer"),
    (lambda d: d["prices"].update(ns_per_mac="fast"), r"gives 'ns_per_mac' the value 'fast'"),
    (lambda d: d["prices"].update(ns_per_macc=1.0), r"holds an unknown price 'ns_per_macc'"),
    (lambda d: d["prices"].update(ns_per_copied_element=0.5, ns_per_fresh_element=0.9),
     r"prices a copied element \(0.5 ns\) below a fresh page's share \(0.9 ns\)"),
    (lambda d: d.update(format="something else"), r"is not a grouped-einsum profile"),
    (lambda d: d.update(prices=[1, 2]), r"lacks its \"prices\" or \"machine\" table"),
])
def test_a_bad_profile_is_refused_with_the_file_and_the_fault(tmp_path, change, message):
    path, _ = _written(tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ProfileError, match=re.escape(str(path)) + ".*" + message):
        load_profile(path)


def test_a_file_that_is_not_json_or_is_missing_is_refused(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json", encoding="utf-8")
    with pytest.raises(ProfileError, match=re.escape(str(broken)) + " is not valid JSON"):
        load_profile(broken)
    with pytest.raises(ProfileError, match=re.escape(str(tmp_path / "absent.json")) + " does not exist"):
        load_profile(tmp_path / "absent.json")


# ------------------------------------------------------------------------- the selection
def test_contractions_profile_selects_the_file(tmp_path):
    path, written = _written(tmp_path, ns_per_mac=0.25)
    chosen = select_profile({ENVIRONMENT_VARIABLE: str(path)})
    assert chosen.source == str(path) and chosen.prices() == written.prices()


def test_the_user_profile_is_used_when_present_and_the_defaults_otherwise(tmp_path, monkeypatch):
    user = tmp_path / "cache" / "profile.json"
    monkeypatch.setattr(profile_module, "user_profile_path", lambda: user)
    builtin = select_profile({})
    assert builtin.source == "" and builtin.describe().startswith("built-in defaults")
    save_profile(replace(Profile(), ns_per_step=123.0), user)
    assert select_profile({}).source == str(user) and select_profile({}).ns_per_step == 123.0


@pytest.mark.parametrize("content", ["{ not json", None])
def test_a_corrupt_or_missing_profile_warns_naming_it_and_plans_with_the_defaults(tmp_path, content):
    path = tmp_path / "profile.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.warns(ProfileWarning, match=re.escape(str(path)) + r".*\(set by CONTRACTIONS_PROFILE\); "
                                                                    "planning with the built-in defaults"):
        chosen = select_profile({ENVIRONMENT_VARIABLE: str(path)})
    assert chosen.source == "" and chosen.ns_per_mac == Profile().ns_per_mac


def test_a_corrupt_profile_costs_one_warning_and_no_traceback_in_a_real_process(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text("[1, 2", encoding="utf-8")
    code = ("import numpy as np\nfrom contractions import contract\n"
            "x = np.ones((3, 4)); y = np.ones((4, 5))\n"
            "assert np.allclose(contract('Wa,ab->Wb', x, y), x @ y)\nprint('planned')\n")
    proc = _run(["-c", code], {ENVIRONMENT_VARIABLE: str(path)})
    assert proc.returncode == 0 and proc.stdout.split() == ["planned"], proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("ProfileWarning") == 1 and str(path) in proc.stderr


# ------------------------------------------------------------------------- explain, --show
def test_a_schedule_names_the_profile_that_priced_it(tmp_path):
    path, _ = _written(tmp_path, ns_per_mac=0.05)
    plan = make_plan("WCa,Caib,WCi->WCb", ((8, 2, 30), (2, 30, 50, 60), (8, 2, 50)), ())
    reference = describe_schedule(make_schedule(plan, memory_limit=None, cost_model=NumpyCostModel(Profile())))
    assert reference[-1] == "priced by: built-in defaults"
    measured = make_schedule(plan, memory_limit=None, cost_model=NumpyCostModel(load_profile(path)))
    assert describe_schedule(measured)[-1].startswith(
        f"priced by: profile {path} (measured 2026-01-02 on Some Other CPU, 32 BLAS threads)")


def test_explain_names_the_profile_in_use(tmp_path):
    path, _ = _written(tmp_path, ns_per_mac=0.05)
    proc = _run(["-m", "contractions.cli", "explain", "WCa,Caib,WCi->WCb", "8x2x30", "2x30x50x60",
                 "8x2x50"], {ENVIRONMENT_VARIABLE: str(path)})
    assert proc.returncode == 0, proc.stderr
    assert f"  priced by: profile {path} (measured 2026-01-02" in proc.stdout


def test_a_profile_used_on_another_machine_says_so():
    measured = replace(Profile(), machine=ELSEWHERE, measured="2026-01-02", source="p.json")
    here = replace(ELSEWHERE, cpu="This CPU", threads=1)
    text = measured.describe(here)
    assert text.startswith("profile p.json (measured 2026-01-02 on Some Other CPU, 32 BLAS threads)")
    assert "this machine differs: CPU Some Other CPU -> This CPU, BLAS threads 32 -> 1" in text
    assert "contractions calibrate" in text
    assert "differs" not in measured.describe(ELSEWHERE)


def test_calibrate_show_names_the_file_and_what_differs(tmp_path):
    path, _ = _written(tmp_path, ns_per_mac=0.05)
    proc = _run(["-m", "contractions.cli", "calibrate", "--show"], {ENVIRONMENT_VARIABLE: str(path)})
    assert proc.returncode == 0, proc.stderr
    assert f"profile in use: profile {path}" in proc.stdout
    assert re.search(r"ns_per_mac\s+0.05\s+\(default 0.0272\)", proc.stdout)


# ------------------------------------------------------------------------------- calibrate
def test_calibrate_writes_a_valid_profile_of_this_machine(tmp_path, monkeypatch, capsys):
    from contractions import calibrate

    monkeypatch.setattr(calibrate, "QUICK", calibrate.TINY)   # the measuring, in seconds
    target = tmp_path / "measured.json"
    assert cli.main(["calibrate", "--quick", "--output", str(target)]) == 0
    out = capsys.readouterr().out
    assert "[1/8] BLAS products in cache ..." in out and "[8/8]" in out
    assert "stacks cut over the cores" in out
    assert "the roofline: bandwidths and peak" in out
    assert f"wrote {target}" in out and f"{ENVIRONMENT_VARIABLE}={target}" in out
    measured = load_profile(target)
    assert measured.machine.cpu and measured.machine.threads >= 1 and measured.measured
    for name, value in measured.prices().items():
        assert math.isfinite(value) and value >= 0, name
    assert measured.ns_per_mac > 0 and measured.ns_per_step > 0
    # the roofline is measured, not copied from the defaults
    roof = (measured.cache_bytes_per_ns, measured.memory_bytes_per_ns, measured.peak_flops_per_ns)
    assert all(v > 0 for v in roof)
    assert measured.cache_bytes_per_ns != Profile.cache_bytes_per_ns
    assert measured.peak_flops_per_ns != Profile.peak_flops_per_ns
    # it prices a plan
    plan = make_plan("WCa,Caib,WCi->WCb", ((8, 2, 30), (2, 30, 50, 60), (8, 2, 50)), ())
    assert make_schedule(plan, cost_model=NumpyCostModel(measured)).cost_ns > 0


def test_calibrate_reports_a_profile_it_cannot_write(tmp_path, monkeypatch, capsys):
    from contractions import calibrate

    monkeypatch.setattr(calibrate, "QUICK", calibrate.TINY)
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    assert cli.main(["calibrate", "--quick", "--output", str(blocker / "profile.json")]) == 2
    assert f"cannot write the profile {blocker / 'profile.json'}" in capsys.readouterr().err


def test_walk_prices_read_far_and_near_runs_from_the_extra_seconds_of_each_walk():
    from contractions.calibrate import WALKS, walk_prices

    assert set(WALKS) == {(81, 8), (81, 48), (32, 8)}
    # far runs of one line 60 ns over the contiguous copy, of six lines 110: 10 a line, 50 a run
    prices = walk_prices({(81, 8): (60e-9 * 1000, 1000), (81, 48): (110e-9 * 500, 500),
                          (32, 8): (30e-9 * 2000, 2000)})
    assert prices == pytest.approx({"ns_per_far_run": 50.0, "ns_per_far_line": 10.0, "ns_per_near_run": 30.0})
    # six lines a run no dearer than one: a run's further lines cost nothing, never below
    flat = walk_prices({(81, 8): (28e-9 * 1000, 1000), (81, 48): (27e-9 * 1000, 1000),
                        (32, 8): (25e-9 * 1000, 1000)})
    assert flat["ns_per_far_line"] == 0.0 and flat["ns_per_far_run"] == pytest.approx(28.0)


def test_calibrate_measures_strided_walks_past_the_caches(capsys):
    from contractions import calibrate

    run = calibrate._Run(calibrate.TINY, print, Profile())
    run.walks(81 * 48 * 16)   # (small: the walks' arithmetic, not this machine's memory)
    assert set(run.prices) <= {"ns_per_far_run", "ns_per_far_line", "ns_per_near_run"}
    assert {"ns_per_far_run", "ns_per_near_run"} <= set(run.prices) or "kept the default" in capsys.readouterr().out
    assert all(math.isfinite(v) and v >= 0 for v in run.prices.values())


def test_split_prices_recover_the_gain_and_hand_over_of_a_cut_stack():
    from contractions.calibrate import split_prices

    whole = [2e5, 1e6, 5e6, 2e7]
    # three threads, each past the first adding 0.8 of a core, 40 us to hand over; +-3% noise
    noise = [1.03, 0.97, 1.02, 0.98]
    cut = [w / (1 + 0.8 * 2) * e + 4e4 for w, e in zip(whole, noise)]
    gain, handover = split_prices(whole, cut, 3)
    assert gain == pytest.approx(0.8, abs=0.05) and handover == pytest.approx(4e4, rel=0.5)
    # no faster cut: a gain of 0 (the model then never cuts), never negative
    assert split_prices(whole, [w * 1.1 for w in whole], 2)[0] == 0.0
    # faster than a core a thread (a noisy whole): held to 1
    assert split_prices(whole, [w / 3 for w in whole], 2) == (1.0, 0.0)


def test_calibrate_prices_the_cut_of_a_stack_on_the_cores_blas_uses(capsys):
    from contractions import calibrate

    two = calibrate._Run(calibrate.TINY, print, replace(Profile(), blas_threads=2))
    two.splits()
    assert 0.0 <= two.prices["split_gain"] <= 1.0 and two.prices["ns_per_split"] >= 0.0
    assert "2 threads: a stack cut over them runs" in capsys.readouterr().out
    one = calibrate._Run(calibrate.TINY, print, replace(Profile(), blas_threads=1))
    one.splits()
    assert one.prices == {} and "one BLAS thread: no stack is cut" in capsys.readouterr().out
    # a cut range that holds none of the measured sizes measures nothing, rather than a gain of 0
    narrow = calibrate._Run(calibrate.TINY, print, replace(Profile(), blas_threads=2, split_min_macs=1,
                                                          split_max_macs=2))
    narrow.splits()
    assert narrow.prices == {} and "kept the defaults" in capsys.readouterr().out
    # a measured gain of 0 turns the cut off in the model
    model = NumpyCostModel(replace(Profile(), blas_threads=2, split_gain=0.0, ns_per_split=0.0))
    assert model.split_products(8, 64, 32, 32, 32, 1e6) == (1, 1e6)


def test_calibrate_holds_the_thread_gain_to_a_core_a_thread(capsys):
    from contractions import calibrate

    run = calibrate._Run(calibrate.TINY, print, replace(Profile(), blas_threads=2))
    run.time = lambda func: 1e-9   # (threaded products "measured" far faster than the model)
    run.threads()
    assert run.prices["thread_gain"] == 1.0
    assert "more than a core a thread; kept 1" in capsys.readouterr().out


def test_calibrate_reads_past_the_caches_on_arrays_four_times_the_last_level(monkeypatch, capsys):
    from contractions import calibrate
    from contractions.model.profile import builtin_profile

    machine = Machine(cpu="x", cores=2, threads=2, l2_bytes=1 << 20, l3_bytes=32 << 20)
    run = calibrate._Run(calibrate.FULL, print, builtin_profile(machine))
    # (an array of just the cache's size stays in it between calls: not a read from memory)
    assert run.past_caches() * 8 == 4 * machine.l3_bytes
    # a cache too large to outgrow within the cap keeps the built-in memory prices, and says so
    monkeypatch.setattr(calibrate, "MAX_PAST_CACHE_ELEMENTS", run.past_caches() - 1)
    run.streaming()
    assert run.prices == {} and "skipped" in capsys.readouterr().out


def test_calibrate_times_the_engine_with_no_plan_store(monkeypatch):
    from contractions import calibrate
    from contractions.calls import store

    monkeypatch.setenv(store.ENVIRONMENT_VARIABLE, "off")
    store.reset_active_store()
    seen = []
    monkeypatch.setattr(calibrate._Run, "_python_costs", lambda self: seen.append(store.active_store()))
    sentinel = object()
    monkeypatch.setattr(store, "_ACTIVE", [sentinel])
    calibrate._Run(calibrate.TINY, print, Profile()).python_costs()
    assert seen == [None]                      # no store while it measures
    assert store._ACTIVE == [sentinel]         # the process's store afterwards
    store._ACTIVE.clear()


# ------------------------------------------------------------------ the built-in peak
@pytest.mark.parametrize(("flags", "per_cycle"), [
    ({"avx512f", "avx2", "fma", "avx", "sse2"}, 32), ({"avx2", "fma", "avx", "sse2"}, 16),
    ({"avx", "sse2"}, 8), ({"asimd", "fp"}, 8), ({"sse2"}, 4), (set(), 0)])
def test_a_cores_flops_a_cycle_follow_its_widest_vectors(flags, per_cycle):
    assert flops_per_cycle(flags) == per_cycle


@pytest.mark.parametrize(("machine", "peak"), [
    (Machine(cores=2, threads=2, core_flops_per_ns=40.0), 72.0),     # 9/10 of the data sheet
    (Machine(cores=8, threads=1, core_flops_per_ns=40.0), 36.0),     # BLAS on one thread
    (Machine(cores=2, threads=16, core_flops_per_ns=40.0), 72.0),    # more threads than cores
    (Machine(cores=2, threads=2), Profile.peak_flops_per_ns),        # no estimate: as fitted
])
def test_the_builtin_peak_is_the_cpus_estimate_on_the_cores_blas_uses(machine, peak):
    builtin = builtin_profile(machine)
    assert builtin.peak_flops_per_ns == pytest.approx(peak)
    # only the roofline's peak moves: every fitted price stays as it was
    others = {k: v for k, v in builtin.prices().items() if k != "peak_flops_per_ns"}
    assert others == {k: v for k, v in builtin_profile(replace(machine, core_flops_per_ns=0.0)).prices().items()
                      if k != "peak_flops_per_ns"}
    described = builtin.describe()
    if peak == Profile.peak_flops_per_ns:
        assert described == "built-in defaults"
    else:
        assert described == f"built-in defaults (peak {peak:.0f} GFLOP/s: this CPU's vector width and clock)"


def test_a_flop_bound_step_is_priced_at_the_builtin_peak_at_least():
    # a large square product: its price from the fitted constants is below what 40 GFLOP/s
    # allows, so the estimated peak decides it
    slow = NumpyCostModel(builtin_profile(Machine(cores=1, threads=1, core_flops_per_ns=40.0)))
    fast = NumpyCostModel(builtin_profile(Machine(cores=1, threads=1)))
    plan = make_plan("Ab,bc->Ac", ((4, 256, 512), (512, 512)), ())
    flops = 2 * 4 * 256 * 512 * 512
    priced = make_schedule(plan, memory_limit=None, cost_model=slow).steps[0].cost_ns
    assert priced >= flops / 36.0
    assert make_schedule(plan, memory_limit=None, cost_model=fast).steps[0].cost_ns < flops / 36.0


def test_a_profile_file_keeps_the_machines_estimated_peak(tmp_path):
    machine = replace(ELSEWHERE, core_flops_per_ns=12.5)
    path = save_profile(replace(Profile(), machine=machine), tmp_path / "p.json")
    assert load_profile(path).machine == machine
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["machine"]["core_flops_per_ns"]          # a file written before the field
    path.write_text(json.dumps(data), encoding="utf-8")
    assert load_profile(path).machine == replace(machine, core_flops_per_ns=0.0)
