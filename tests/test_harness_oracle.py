"""The loop oracle and the SPEC §2 run definition, checked against hand-expanded einsums.

The oracle must be right independently of the library, so its references here are plain
`np.einsum` calls on strings expanded by hand (one letter per group axis) and explicit loops.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from contractions.testing.cases import shape_matrix, split_cases
from contractions.testing.oracle import (
    co_travelling_runs,
    loop_contract,
    operand_shapes,
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
    with pytest.raises(ValueError, match="exactly one '->'"):
        split_terms("Wa,Wb")


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
        ("WKCi,Cio->WKCo", (("W", "K"),)),  # SPEC §2 worked cases
        ("WCo,WCa->Cao", ()),
        ("WCa,KCaib->WKCib", ()),
        ("Cio,WCo->WCi", ()),
        ("WKCa,WKCb->WKCab", (("W", "K", "C"),)),  # a chain of two pairs
        ("WKa,WKb->ab", (("W", "K"),)),
        ("WKa,Kb->Wab", ()),  # K once without W before it
        ("WKa,WKb->KWab", ()),  # order flips in the output
    ],
)
def test_co_travelling_runs_by_definition(subscripts: str, runs: tuple) -> None:
    assert co_travelling_runs(subscripts) == runs


def test_split_cases_enumerate_every_composition() -> None:
    assert split_cases(("W", "K"), 3) == [(0, 3), (1, 2), (2, 1), (3, 0)]
    assert len(split_cases(("W", "K", "C"), 2)) == 6
    assert all(sum(split) == 2 for split in split_cases(("W", "K", "C"), 2))


def test_shape_matrix_covers_empty_single_and_multi_axis_groups() -> None:
    cases = {c.name: c for c in shape_matrix("WCa,Caib,WCi->WCb")}
    assert cases["empty"].group_shapes == {"W": (), "C": ()}
    assert all(len(s) == 1 for s in cases["single"].group_shapes.values())
    assert all(len(s) == 2 for s in cases["multi"].group_shapes.values())
    assert {len(s) for c in ("mixed-0", "mixed-1", "mixed-2") for s in cases[c].group_shapes.values()} == {0, 1, 2}
    # broadcast: the first operand holding each shared group has a size-1 sub-axis there
    assert cases["broadcast"].shapes("WCa,Caib,WCi->WCb")[0][:2] == (1, 3)
    assert 0 in cases["zero-extent"].group_shapes["W"]
