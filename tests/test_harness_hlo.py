"""The HLO opcode counter and the sharding case enumeration (no jax needed here)."""

from __future__ import annotations

import pytest

from contractions.testing.sharding import (
    CaseResult,
    SweepReport,
    count_hlo_opcodes,
    forbidden_collectives,
    sharding_cases,
)

# Compiled output of a fused-group flatten sharded on the minor member (jax 0.10, CPU, 4
# devices), trimmed. The instruction *name* `%all-gather` and the op_name metadata also
# contain the word; only the opcode after the shape counts.
GUARD_HLO = """
HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[4,1,2]{2,1,0}, f32[2,3]{1,0})->f32[4,4,3]{2,1,0}}, num_partitions=4

%fused_computation (param_0: f32[16,2], param_1: f32[2,3]) -> f32[16,3] {
  %param_0 = f32[16,2]{1,0} parameter(0)
  %param_1 = f32[2,3]{1,0} parameter(1)
  ROOT %dot.1 = f32[16,3]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main.0_spmd (param: f32[4,1,2], param.1: f32[2,3]) -> f32[4,4,3] {
  %param = f32[4,1,2]{2,1,0} parameter(0), sharding={devices=[1,4,1]<=[4]}, metadata={op_name="x"}
  %param.1 = f32[2,3]{1,0} parameter(1), sharding={replicated}, metadata={op_name="y"}
  %all-gather = f32[4,4,2]{2,0,1} all-gather(%param), channel_id=1, replica_groups=mesh['axis_0'=1,'axis_1'=4,'axis_2'=1] {'axis_1'}, dimensions={1}, use_global_device_ids=true, metadata={op_name="jit(f)/reshape"}
  %copy_bitcast_fusion = f32[16,2]{1,0} fusion(%all-gather), kind=kLoop, calls=%fused_computation.1
  %ynn_fusion = f32[16,3]{1,0} fusion(%copy_bitcast_fusion, %param.1), kind=kCustom, calls=%fused_computation
  ROOT %bitcast.1 = f32[4,4,3]{2,1,0} bitcast(%ynn_fusion)
}
"""

# A clean summed-group contraction: only an all-reduce, but its name and metadata mention
# all-gather, which a substring search would miscount.
DECOY_HLO = """
ENTRY %main.0_spmd (param: f32[1,4,2], param.1: f32[1,2,3]) -> f32[4,3] {
  %param = f32[1,4,2]{2,1,0} parameter(0), sharding={devices=[4,1,1]<=[4]}, metadata={op_name="all-gather(x)"}
  %all-gather.not = f32[4,2]{1,0} bitcast(%param), metadata={op_name="collective-permute(x) all-to-all(y)"}
  %dot.1 = f32[4,3]{1,0} dot(%all-gather.not, %param.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %all-reduce = f32[4,3]{1,0} all-reduce(%dot.1), channel_id=1, to_apply=%add.clone
}
"""

# Async pairs, tuple-shaped results, the `%`-less text style and a collective nested inside
# an async computation.
ASYNC_HLO = """
%async_computation (p0: f32[2]) -> f32[8] {
  p0 = f32[2]{0} parameter(0)
  ROOT all-to-all.3 = f32[8]{0} all-to-all(p0), dimensions={0}
}
ENTRY main {
  p = f32[2]{0} parameter(0)
  ags = (f32[2]{0}, f32[8]{0}) all-gather-start(p), dimensions={0}
  agd = f32[8]{0} all-gather-done(ags)
  cps = (f32[2]{0}, f32[2]{0}, u32[], u32[]) collective-permute-start(p), source_target_pairs={{0,1},{1,0}}
  cpd = f32[2]{0} collective-permute-done(cps)
  as = ((f32[2]{0}), f32[8]{0}, s32[]) async-start(p), calls=%async_computation
  ad = f32[8]{0} async-done(as)
  ars = f32[2]{0} all-reduce-start(p), to_apply=add
  ROOT ard = f32[2]{0} all-reduce-done(ars)
}
"""


def test_the_guard_hlo_counts_one_all_gather() -> None:
    counts = count_hlo_opcodes(GUARD_HLO)
    assert counts["all-gather"] == 1
    assert counts["parameter"] == 4 and counts["dot"] == 1 and counts["fusion"] == 2
    assert forbidden_collectives(counts) == {"all-gather": 1}


def test_names_and_metadata_are_not_opcodes() -> None:
    counts = count_hlo_opcodes(DECOY_HLO)
    assert counts["all-reduce"] == 1 and counts["bitcast"] == 1
    assert forbidden_collectives(counts) == {}
    assert "all-gather" in DECOY_HLO  # the substring is there; a substring count would fail


def test_async_pairs_tuples_and_nested_computations() -> None:
    counts = count_hlo_opcodes(ASYNC_HLO)
    assert counts["all-gather"] == 1  # the -start counted once, the -done not
    assert counts["collective-permute"] == 1
    assert counts["all-to-all"] == 1  # inside the async computation
    assert counts["all-reduce"] == 1
    assert counts["async"] == 1 and "async-done" not in counts
    assert forbidden_collectives(counts) == {
        "all-gather": 1,
        "all-to-all": 1,
        "collective-permute": 1,
    }


def test_non_instruction_lines_are_ignored() -> None:
    text = "HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}\nFileNames\n1 \"x.py\"\n}"
    assert count_hlo_opcodes(text) == {}


def test_one_case_per_sub_axis_of_each_group() -> None:
    cases = sharding_cases("WCa,Caib,WCi->WCb", ("C",))
    assert [(c.group, c.sub_axis) for c in cases] == [("W", 0), ("W", 1), ("C", 0), ("C", 1)]
    c1 = cases[3]  # C's minor sub-axis sharded over 4 devices
    assert c1.operand_shapes() == ((2, 2, 2, 4, 2), (2, 4, 2, 2, 2), (2, 2, 2, 4, 2))
    assert c1.sharded_positions() == (3, 1, 3)
    assert c1.supplements == (("len_C", 2),)
    w0 = sharding_cases("Wi,Cib->WCb")[0]
    assert w0.sharded_positions() == (0, None)  # the operand without W is replicated


@pytest.mark.parametrize(
    ("result", "ok"),
    [
        (CaseResult("a", {"all-reduce": 2, "dot": 1}), True),
        (CaseResult("b", {"all-gather": 1}), False),
        (CaseResult("c", {}, error="TypeError: boom"), False),
    ],
)
def test_case_results(result: CaseResult, ok: bool) -> None:
    assert result.ok is ok


def test_sweep_summary_reports_the_number_of_cases() -> None:
    report = SweepReport(
        {
            "Wa->Wa [W.0]": CaseResult("Wa->Wa [W.0]", {}),
            "Wa->Wa [W.1]": CaseResult("Wa->Wa [W.1]", {"all-gather": 1}),
            "Wa,Wb->ab [W.0]": CaseResult("Wa,Wb->ab [W.0]", {"all-reduce": 1}),
        },
        CaseResult("guard", {"all-gather": 1}),
        devices=4,
    )
    assert report.summary() == (
        "sharding sweep: 3 cases over 2 strings on 4 virtual devices, 1 failing; "
        "guard detected {'all-gather': 1}"
    )
