"""The loop oracle and the run definition of docs/solver.md, checked against hand-expanded einsums.

The oracle must be right independently of the library, so its references here are plain
`np.einsum` calls on strings expanded by hand (one letter per group axis) and explicit loops.
"""

from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

import numpy as np
import pytest

import contractions
import contractions.testing
from contractions.testing.cases import (
    ShapeCase,
    call_site_cases,
    shape_matrix,
    sharded_group_shapes,
    split_case,
    split_cases,
)
from contractions.testing.oracle import (
    loop_contract,
    operand_shapes,
    runs_by_definition,
    split_terms,
)

rng = np.random.default_rng(20260717)


def test_the_oracle_imports_nothing_from_the_library() -> None:
    source = Path(__file__).resolve().parents[1] / "contractions" / "testing" / "oracle.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert imported <= {"__future__", "itertools", "collections.abc", "dataclasses", "numpy"}, imported


def test_split_terms() -> None:
    terms = split_terms(" WCa , Caib , WCi -> WCb ")
    assert terms.inputs == ("WCa", "Caib", "WCi") and terms.output == "WCb"
    assert terms.groups == ("W", "C")
    assert split_terms("Wa,Wb->").output == ""
    with pytest.raises(ValueError, match="at most one '->'"):
        split_terms("Wa->W->a")
    assert split_terms("Wa,Wb").output == "ab"       # numpy's implicit output: W is summed
    assert split_terms("...a,b->...").inputs == (".a", "b")


def test_operand_shapes_follow_the_terms() -> None:
    shapes = operand_shapes("WCa,Caib,WCi->WCb", {"W": (4, 5), "C": (2,)}, {"a": 3, "i": 6, "b": 7})
    assert shapes == ((4, 5, 2, 3), (2, 3, 6, 7), (4, 5, 2, 6))


def test_tensor_train_apply_with_multi_axis_groups() -> None:
    # W = (2, 3), C = (2,): hand expansion W -> pq, C -> c.
    x = rng.standard_normal((2, 3, 2, 4))
    cores = rng.standard_normal((2, 4, 3, 5))
    z = rng.standard_normal((2, 3, 2, 3))
    got = loop_contract("WCa,Caib,WCi->WCb", [x, cores, z], {"W": (2, 3), "C": (2,)})
    want = np.einsum("pqca,caib,pqci->pqcb", x, cores, z)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_output_groups_interleaved_with_letters() -> None:
    # 'WiR,Cib->WCbR': W = (2,), R = (3, 2), C = (2,); the output mixes groups and letters.
    w = rng.standard_normal((2, 4, 3, 2))
    c = rng.standard_normal((2, 4, 5))
    got = loop_contract("WiR,Cib->WCbR", [w, c], {"W": (2,), "R": (3, 2), "C": (2,)})
    want = np.einsum("wirs,cib->wcbrs", w, c)
    assert got.shape == (2, 2, 5, 3, 2)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # and a letter before every group in the output
    x = rng.standard_normal((3, 2, 4, 5))
    np.testing.assert_allclose(
        loop_contract("Wab->bW", [x], {"W": (3, 2)}), np.einsum("pqab->bpq", x), rtol=1e-12
    )


def test_groups_absent_from_the_output_accumulate() -> None:
    # 'WCo,WCa->Cao' with W = (3,) summed, C = (2, 2) kept.
    zo = rng.standard_normal((3, 2, 2, 4))
    za = rng.standard_normal((3, 2, 2, 5))
    got = loop_contract("WCo,WCa->Cao", [zo, za], {"W": (3,), "C": (2, 2)})
    want = np.einsum("wcdo,wcda->cdao", zo, za)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_empty_groups_vanish() -> None:
    x, m = rng.standard_normal(3), rng.standard_normal((3, 4))
    got = loop_contract("WCa,Cab->WCb", [x, m], {"W": (), "C": ()})
    np.testing.assert_allclose(got, x @ m, rtol=1e-12)


def test_batched_trace_and_scalar_output() -> None:
    a = rng.standard_normal((2, 3, 4, 4))
    np.testing.assert_allclose(
        loop_contract("Wii->W", [a], {"W": (2, 3)}), np.trace(a, axis1=2, axis2=3), rtol=1e-12
    )
    p, q = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    got = loop_contract("P,P->", [p, q], {"P": (2, 3)})
    assert got.shape == () and np.isclose(got, np.sum(p * q))


def test_size_one_group_axes_broadcast() -> None:
    x = rng.standard_normal((1, 3, 4))  # W's first sub-axis broadcast in this operand
    y = rng.standard_normal((5, 3, 4))
    got = loop_contract("Wa,Wa->W", [x, y], {"W": (5, 3)})
    want = np.einsum("pqa,pqa->pq", np.broadcast_to(x, y.shape), y)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_zero_extents_give_zeros_of_the_right_shape() -> None:
    x, m = np.zeros((0, 3)), rng.standard_normal((3, 2))
    got = loop_contract("Wa,ab->Wb", [x, m], {"W": (0,)})
    assert got.shape == (0, 2)
    got = loop_contract("Wa,Wb->ab", [np.zeros((0, 3)), np.zeros((0, 2))], {"W": (0,)})
    assert got.shape == (3, 2) and not got.any()


def test_explicit_loop_for_a_group_in_one_operand_only() -> None:
    # 'Wi,Cib->WCb': W and C never meet; the result is an outer product over the groups.
    w, c = rng.standard_normal((2, 3)), rng.standard_normal((4, 3, 5))
    got = loop_contract("Wi,Cib->WCb", [w, c], {"W": (2,), "C": (4,)})
    want = np.empty((2, 4, 5))
    for i in range(2):
        for j in range(4):
            want[i, j] = w[i] @ c[j]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_oracle_rejects_inconsistent_inputs() -> None:
    with pytest.raises(ValueError, match="2 input terms but 1 operands"):
        loop_contract("Wa,ab->Wb", [np.zeros((2, 3))], {"W": (2,)})
    with pytest.raises(ValueError, match="neither 1 nor 2"):
        loop_contract("Wa->Wa", [np.zeros((3, 3))], {"W": (2,)})
    with pytest.raises(ValueError, match="shape of group"):
        loop_contract("Wa->Wa", [np.zeros((3, 3))], {})


@pytest.mark.parametrize(
    ("subscripts", "runs"),
    [
        ("WKCi,Cio->WKCo", (("W", "K"),)),  # docs/solver.md worked cases
        ("WCo,WCa->Cao", ()),
        ("WCa,KCaib->WKCib", ()),
        ("Cio,WCo->WCi", ()),
        ("WKCa,WKCb->WKCab", (("W", "K", "C"),)),  # a chain of two pairs
        ("WKa,WKb->ab", (("W", "K"),)),
        ("WKa,Kb->Wab", ()),  # K once without W before it
        ("WKa,WKb->KWab", ()),  # order flips in the output
    ],
)
def test_runs_by_definition(subscripts: str, runs: tuple) -> None:
    assert runs_by_definition(subscripts) == runs


def test_harness_names_do_not_shadow_engine_names() -> None:
    # The harness re-derives the engine's answers independently; a public name shared by both
    # (once `co_travelling_runs`) invites importing the engine's where the harness's is meant.
    assert not set(contractions.testing.__all__) & set(contractions.__all__)
    assert not hasattr(contractions.testing, "co_travelling_runs")
    assert contractions.testing.runs_by_definition is runs_by_definition


def test_split_cases_enumerate_every_composition() -> None:
    assert split_cases(("W", "K"), 3) == [(0, 3), (1, 2), (2, 1), (3, 0)]
    assert len(split_cases(("W", "K", "C"), 2)) == 6
    assert all(sum(split) == 2 for split in split_cases(("W", "K", "C"), 2))


def test_shape_case_operand_and_output_shapes() -> None:
    case = ShapeCase("c", {"W": (2, 3), "C": ()}, {"a": 4, "b": 5}, broadcast=((1, "W", 0),))
    # written out by hand: W is two axes (2, 3), C none; operand 1 broadcasts W's first axis
    assert case.shapes("WCa,Wab->CWb") == [(2, 3, 4), (1, 3, 4, 5)]
    assert case.output_shape("WCa,Wab->CWb") == (2, 3, 5)


def test_call_site_cases_pin_literal_lengths_and_vary_the_rest() -> None:
    one, two = call_site_cases("WCo,KCa->WKCao", {"K": 0, "W": 3})
    assert one.group_shapes == {"W": (2, 2, 2), "C": (2,), "K": ()}
    assert two.group_shapes == {"W": (2, 2, 2), "C": (2, 2), "K": ()}
    assert one.shapes("WCo,KCa->WKCao") == [(2, 2, 2, 2, 3), (2, 2)]  # letters a=2, o=3


def test_split_case_gives_the_run_total_to_its_first_member() -> None:
    case, total = split_case("WKCa,WKCb->WKCab", ("W", "K", "C"))
    assert total == 2
    assert case.group_shapes == {"W": (2, 3), "K": (), "C": ()}
    assert case.shapes("WKCa,WKCb->WKCab") == [(2, 3, 2), (2, 3, 3)]


def test_sharded_group_shapes_put_the_device_count_on_one_sub_axis() -> None:
    shapes = sharded_group_shapes(["W", "K"], "W", 1, devices=4, axes_per_group=3, other_extent=2)
    assert shapes == {"W": (2, 4, 2), "K": (2, 2, 2)}


def test_shape_matrix_covers_empty_single_and_multi_axis_groups() -> None:
    cases = {c.name: c for c in shape_matrix("WCa,Caib,WCi->WCb")}
    assert cases["empty"].group_shapes == {"W": (), "C": ()}
    assert all(len(s) == 1 for s in cases["single"].group_shapes.values())
    assert all(len(s) == 2 for s in cases["multi"].group_shapes.values())
    assert {len(s) for c in ("mixed-0", "mixed-1", "mixed-2") for s in cases[c].group_shapes.values()} == {0, 1, 2}
    # broadcast: the first operand holding each shared group has a size-1 sub-axis there
    assert cases["broadcast"].shapes("WCa,Caib,WCi->WCb")[0][:2] == (1, 3)
    assert 0 in cases["zero-extent"].group_shapes["W"]


@pytest.mark.parametrize(
    "module_name",
    [
        "contractions.testing.cases",
        "contractions.testing.oracle",
        "contractions.testing.scan",
        "contractions.testing.sharding",
        "contractions.testing.table",
        "contractions.lint",
    ],
)
def test_harness_docstring_examples_run(module_name: str) -> None:
    module = importlib.import_module(module_name)
    results = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert results.attempted > 0, f"{module_name} has no docstring examples"
    assert results.failed == 0, f"{results.failed} docstring example(s) of {module_name} failed"
