"""JAX backend: with the default optimize the traced program is the hand-expanded jnp.einsum
(jnp.einsum's own path); an explicit optimize= runs along the schedule's path (which `explain`
prints); eager calls hit a cache,
precision / preferred_element_type / dtypes pass through, > 52 axes, mixed numpy + jax,
and jax is never imported for a caller who did not import it."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp

from contractions import contract, contract_expression, expand_subscripts, explain
from contractions.backends import jax_backend
from contractions.backends.jax_backend import jitted_einsum
from contractions.calls import runners

from ._references import loop_reference

REPO = Path(__file__).resolve().parents[1]
rng = np.random.default_rng(20240611)


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def lowered_text(fn, *args) -> str:
    """StableHLO of jit(fn) with the module name (taken from the function) normalised away."""
    text = jax.jit(fn).lower(*args).as_text()
    return re.sub(r"module @\S+", "module @m", text)


def stablehlo_ops(text: str) -> list[str]:
    return re.findall(r"\b(stablehlo\.[a-z_]+|func\.call|call)\b", text)


# ------------------------------------------------------------- traced == hand-expanded
LOWERING_CASES = [
    # (subscripts, shapes, supplements, hand-expanded einsum)
    ("WCa,Caib,WCi->WCb", [(4, 2, 3), (2, 3, 5, 6), (4, 2, 5)], {}, "ABa,Baib,ABi->ABb"),
    ("WCa,Caib,WCi->WCb", [(4, 3, 2, 3), (2, 3, 5, 6), (4, 3, 2, 5)], {}, "ABCa,Caib,ABCi->ABCb"),
    ("WCo,WCa->Cao", [(3, 2, 2, 5), (3, 2, 2, 4)], {"len_W": 1}, "ABCo,ABCa->BCao"),
    ("Wii->W", [(3, 4, 4)], {}, "Aii->A"),
    ("Wa,Wa->", [(2, 3, 4), (2, 3, 4)], {}, "ABa,ABa->"),
    ("KWa,ab->WKb", [(2, 3, 4), (4, 5)], {"len_K": 1}, "ABa,ab->BAb"),
]


@pytest.mark.parametrize("subscripts,shapes,supp,hand", LOWERING_CASES)
def test_lowered_program_equals_hand_expanded_einsum(subscripts, shapes, supp, hand):
    ops = [jnp.asarray(randn(*s)) for s in shapes]
    assert expand_subscripts(subscripts, *shapes, **supp) == hand

    def f(*xs):  # both functions are named f so the module names agree
        return contract(subscripts, *xs, **supp)

    ours = lowered_text(f, *ops)

    def f(*xs):
        return jnp.einsum(hand, *xs)

    theirs = lowered_text(f, *ops)
    assert stablehlo_ops(ours) == stablehlo_ops(theirs)
    assert ours == theirs


# A four-operand string where the numpy time model's path and jnp.einsum's own differ.
FOUR = ("GFa,Gaib,Fo,Gio->GFb", [(3, 40, 16), (3, 16, 16, 16), (40, 80), (3, 16, 80)],
        "ABa,Aaib,Bo,Aio->ABb")


@pytest.mark.parametrize("optimize", [[(0, 1), (0, 1), (0, 1)], "greedy", False])
def test_explicit_optimize_is_honoured_on_jax(optimize):
    subscripts, shapes, hand = FOUR
    ops = [jnp.asarray(randn(*s)) for s in shapes]
    path = list(contract_expression(subscripts, *shapes, optimize=optimize).schedule.path)

    def f(*xs):
        return contract(subscripts, *xs, optimize=optimize)

    ours = lowered_text(f, *ops)

    def f(*xs):
        return jnp.einsum(hand, *xs, optimize=path)

    assert ours == lowered_text(f, *ops)
    np.testing.assert_allclose(np.asarray(jax.jit(lambda *xs: contract(subscripts, *xs, optimize=optimize))(*ops)),
                               np.einsum(hand, *map(np.asarray, ops)), rtol=2e-3, atol=1e-2)


def test_default_runs_jnp_einsums_own_path_not_the_numpy_schedules():
    subscripts, shapes, hand = FOUR
    ops = [jnp.asarray(randn(*s)) for s in shapes]
    numpy_path = list(contract_expression(subscripts, *shapes).schedule.path)
    jax_path = [p for p in jnp.einsum_path(hand, *ops)[0] if p != "einsum_path"]
    assert numpy_path != jax_path  # else this case proves nothing

    def f(*xs):
        return contract(subscripts, *xs)

    ours = lowered_text(f, *ops)

    def f(*xs):
        return jnp.einsum(hand, *xs, optimize=numpy_path)

    assert ours != lowered_text(f, *ops)
    report = explain(subscripts, *ops)
    assert f"path            {[tuple(p) for p in jax_path]}" in report
    assert "jnp.einsum's own path" in report


def test_default_jax_call_builds_no_schedule(monkeypatch):
    """A new shape on JAX costs parse/solve/expand/plan only: the numpy schedule is never built."""
    from contractions.calls import runners, tiers

    def refuse(*args, **kwargs):
        raise AssertionError("the JAX default path built a schedule")

    monkeypatch.setattr(tiers, "make_schedule", refuse)
    monkeypatch.setattr(runners, "first_schedule", refuse)
    x, y = jnp.asarray(randn(7, 3, 2)), jnp.asarray(randn(3, 2, 5))
    out = contract("WCa,Cab->WCb", x, y)
    jax.jit(lambda a, b: contract("WCa,Cab->WCb", a, b))(x, y)
    np.testing.assert_allclose(out, np.einsum("pca,cab->pcb", np.asarray(x), np.asarray(y)), rtol=1e-5)


def test_lowered_program_equal_with_precision_and_preferred_type():
    x, y = jnp.asarray(randn(4, 2, 3)), jnp.asarray(randn(2, 3, 5))

    def f(x, y):
        return contract("WCa,Cab->WCb", x, y, precision=jax.lax.Precision.HIGHEST,
                        preferred_element_type=jnp.float32)

    ours = lowered_text(f, x, y)

    def f(x, y):
        return jnp.einsum("ABa,Bab->ABb", x, y, precision=jax.lax.Precision.HIGHEST,
                          preferred_element_type=jnp.float32)

    assert ours == lowered_text(f, x, y)
    assert "HIGHEST" in ours


def test_closed_over_concrete_operands_inside_jit_are_inlined():
    """All-concrete operands inside a jit are still traced inline, not a nested cached call."""
    a, b = jnp.asarray(randn(2, 3)), jnp.asarray(randn(3, 4))

    def f(s):
        return contract("Wa,ab->Wb", a, b) * s

    text = jax.jit(f).lower(1.0).as_text()
    assert "func.call" not in text and "call @" not in text
    np.testing.assert_allclose(jax.jit(f)(2.0), 2 * (np.asarray(a) @ np.asarray(b)), rtol=1e-5)


# --------------------------------------------------------------------- eager cache
def test_eager_call_uses_cached_jitted_function():
    x, y = jnp.asarray(randn(4, 2, 3)), jnp.asarray(randn(2, 3, 5))
    jitted_einsum.cache_clear()
    first = contract("WCa,Cab->WCb", x, y)
    info = jitted_einsum.cache_info()
    assert (info.misses, info.currsize) == (1, 1)
    second = contract("WCa,Cab->WCb", x * 2, y)
    assert jitted_einsum.cache_info().currsize == 1   # the same compiled function served both
    np.testing.assert_allclose(first, np.einsum("ABa,Bab->ABb", np.asarray(x), np.asarray(y)),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second, 2 * np.asarray(first), rtol=1e-5, atol=1e-5)
    # A different precision is a different cache entry; the results agree.
    third = contract("WCa,Cab->WCb", x, y, precision="highest")
    assert jitted_einsum.cache_info().currsize == 2
    np.testing.assert_allclose(third, first, rtol=1e-5, atol=1e-5)
    assert jitted_einsum.cache_info().maxsize == jax_backend.EAGER_CACHE_SIZE


def test_eager_call_does_not_replan_with_jnp_einsum(monkeypatch):
    """After the first call (trace), eager calls never reach jnp.einsum's Python planner."""
    x, y = jnp.asarray(randn(3, 2, 4)), jnp.asarray(randn(4, 5))
    contract("Wa,ab->Wb", x, y)  # warm: traces jnp.einsum once inside the cached jit
    calls = []
    real = jnp.einsum
    monkeypatch.setattr(jnp, "einsum", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    for _ in range(3):
        contract("Wa,ab->Wb", x, y)
    assert calls == []


def test_eager_unhashable_precision_fails_like_jnp_einsum():
    """An unhashable precision is not cached; jnp.einsum's own error reaches the caller."""
    x, y = jnp.asarray(randn(3, 4)), jnp.asarray(randn(4, 5))
    with pytest.raises(ValueError, match="Non-hashable") as theirs:
        jnp.einsum("Aa,ab->Ab", x, y, precision=["highest", "highest"])
    with pytest.raises(type(theirs.value), match="Non-hashable"):
        contract("Wa,ab->Wb", x, y, precision=["highest", "highest"])  # a list: unhashable


def test_eager_result_is_bit_identical_to_eager_jnp_einsum():
    x, c, z = (jnp.asarray(randn(*s)) for s in [(4, 2, 3), (2, 3, 5, 6), (4, 2, 5)])
    ours = contract("WCa,Caib,WCi->WCb", x, c, z)
    path = contract_expression("WCa,Caib,WCi->WCb", x.shape, c.shape, z.shape).schedule.path
    theirs = jnp.einsum("ABa,Baib,ABi->ABb", x, c, z, optimize=list(path))
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


# ------------------------------------------------- precision, preferred type, dtypes
def test_preferred_element_type_passes_through():
    x = jnp.asarray(randn(2, 3, 4)).astype(jnp.bfloat16)
    y = jnp.asarray(randn(4, 5)).astype(jnp.bfloat16)
    out = contract("Wa,ab->Wb", x, y, preferred_element_type=jnp.float32)
    assert out.dtype == jnp.float32
    jaxpr = jax.make_jaxpr(lambda x, y: contract("Wa,ab->Wb", x, y,
                                                 preferred_element_type=jnp.float32))(x, y)
    (dot,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert dot.params["preferred_element_type"] == jnp.float32
    ref = np.einsum("wva,ab->wvb", np.asarray(x, np.float32), np.asarray(y, np.float32))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("precision", [jax.lax.Precision.HIGHEST, "highest",
                                       (jax.lax.Precision.HIGH, jax.lax.Precision.DEFAULT)])
def test_precision_passes_through(precision):
    x, y = jnp.asarray(randn(2, 3, 4)), jnp.asarray(randn(4, 5))
    jaxpr = jax.make_jaxpr(lambda x, y: contract("Wa,ab->Wb", x, y, precision=precision))(x, y)
    (dot,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"]
    expected = jax.make_jaxpr(lambda x, y: jnp.einsum("ABa,ab->ABb", x, y,
                                                      precision=precision))(x, y)
    (ref,) = [e for e in expected.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert dot.params["precision"] == ref.params["precision"]
    assert dot.params["precision"] is not None
    # Eager path too: the cached jit keys on the precision and gives the same numbers.
    np.testing.assert_allclose(contract("Wa,ab->Wb", x, y, precision=precision),
                               np.einsum("wva,ab->wvb", np.asarray(x), np.asarray(y)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(jnp.float32, 1e-5), (jnp.bfloat16, 5e-2),
                                       (jnp.complex64, 1e-5)])
def test_dtypes(dtype, tol):
    def make(*shape):
        a = randn(*shape)
        if dtype == jnp.complex64:
            a = a + 1j * randn(*shape)
        return jnp.asarray(a).astype(dtype)

    x, c, z = make(4, 2, 3), make(2, 3, 5, 6), make(4, 2, 5)
    for fn in (contract, jax.jit(contract, static_argnums=0)):
        out = fn("WCa,Caib,WCi->WCb", x, c, z)
        assert out.dtype == dtype
        ref = np.einsum("wca,caib,wci->wcb", *(np.asarray(a).astype(np.complex128) for a in (x, c, z)))
        np.testing.assert_allclose(np.asarray(out).astype(np.complex128), ref,
                                   rtol=tol, atol=tol * np.abs(ref).max())


def test_dtype_promotion_follows_jnp_einsum():
    x = jnp.asarray(randn(2, 3)).astype(jnp.bfloat16)
    y = jnp.asarray(randn(3, 4))  # float32
    assert contract("Wa,ab->Wb", x, y).dtype == jnp.einsum("xa,ab->xb", x, y).dtype == jnp.float32
    xc = jnp.asarray(randn(2, 3)).astype(jnp.complex64)
    assert contract("Wa,ab->Wb", xc, y).dtype == jnp.complex64


def test_mixed_numpy_and_jax_operands_give_jax_array():
    x = randn(4, 2, 3)
    c = jnp.asarray(randn(2, 3, 5, 6))
    z = randn(4, 2, 5)
    out = contract("WCa,Caib,WCi->WCb", x, c, z)
    assert isinstance(out, jax.Array)
    ref = np.einsum("wca,caib,wci->wcb", x, np.asarray(c), z)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    # ... also under jit, with the numpy operand closed over.
    out_jit = jax.jit(lambda c: contract("WCa,Caib,WCi->WCb", x, c, z))(c)
    np.testing.assert_allclose(out_jit, ref, rtol=1e-4, atol=1e-4)


def test_inputs_are_not_modified():
    x, y = randn(3, 4), jnp.asarray(randn(4, 5))
    x0 = x.copy()
    contract("Wa,ab->Wb", x, y)
    np.testing.assert_array_equal(x, x0)


# ------------------------------------------------------------------------- > 52 axes
def ones_shape(n: int, big: dict[int, int]) -> tuple[int, ...]:
    return tuple(big.get(i, 1) for i in range(n))


def test_more_than_52_axes_unicode_symbols_accepted_by_jnp_einsum():
    x = randn(*ones_shape(50, {0: 2, 7: 3, 31: 2, 45: 2}))
    y = randn(*ones_shape(30, {1: 2, 12: 3, 25: 2}))  # B = 20 axes shared, C = 10 axes
    hand = expand_subscripts("AB,BC->AC", x.ndim, y.ndim, len_A=30)
    assert any(ord(ch) > 127 for ch in hand)  # past 52: opt_einsum's unicode symbols
    ref = loop_reference("AB,BC->AC", [x, y], {"A": 30, "B": 20, "C": 10})
    eager = contract("AB,BC->AC", jnp.asarray(x), jnp.asarray(y), len_A=30)
    np.testing.assert_allclose(eager, ref, rtol=1e-4, atol=1e-4)
    jitted = jax.jit(lambda x, y: contract("AB,BC->AC", x, y, len_A=30))(x, y)
    np.testing.assert_allclose(jitted, ref, rtol=1e-4, atol=1e-4)
    # One contraction, lowered exactly as jnp.einsum lowers the unicode string (any reshape
    # in there is jnp.einsum's own handling of the size-1 axes, not the library's).

    def f(x, y):
        return contract("AB,BC->AC", x, y, len_A=30)

    ours = lowered_text(f, x, y)

    def f(x, y):
        return jnp.einsum(hand, x, y)

    assert ours == lowered_text(f, x, y)
    assert stablehlo_ops(ours).count("stablehlo.dot_general") == 1


def test_more_than_52_axes_three_operands_and_grad():
    x = randn(*ones_shape(40, {0: 2, 39: 2}))
    y = randn(*ones_shape(20, {3: 2}))
    z = randn(*ones_shape(15, {0: 2, 14: 3}))
    s = "AB,BC,CD->AD"
    hand = expand_subscripts(s, x.ndim, y.ndim, z.ndim, len_A=30, len_C=10)
    assert len(set(hand) - set(",->")) > 52
    ref = loop_reference(s, [x, y, z], {"A": 30, "B": 10, "C": 10, "D": 5})
    out = contract(s, jnp.asarray(x), jnp.asarray(y), jnp.asarray(z), len_A=30, len_C=10)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    g = jax.grad(lambda y: contract(s, x, y, z, len_A=30, len_C=10).sum())(jnp.asarray(y))
    assert g.shape == y.shape


# ---------------------------------------------------------------- import hygiene
def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def test_numpy_contract_never_imports_jax_or_torch():
    proc = run_python("""
        import sys
        import numpy as np
        import contractions
        from contractions import contract, explain
        out = contract('WCa,Caib,WCi->WCb', np.ones((4, 2, 3)), np.ones((2, 3, 5, 6)), np.ones((4, 2, 5)))
        out2 = contract('Wa,ab->Wb', np.ones((2, 3), np.float32), np.ones((3, 4)),
                        preferred_element_type=np.float64)
        explain('WCa,Caib,WCi->WCb', (4, 2, 3), (2, 3, 5, 6), (4, 2, 5))
        assert out.shape == (4, 2, 6) and out2.dtype == np.float64
        print(sorted(m for m in ('jax', 'jaxlib', 'torch') if m in sys.modules))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_jax_backend_module_does_not_import_torch():
    proc = run_python("""
        import sys
        import jax.numpy as jnp
        from contractions import contract
        contract('Wa,ab->Wb', jnp.ones((2, 3)), jnp.ones((3, 4)))
        print('torch' in sys.modules)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


# ------------------------------------------------------------------ the JAX hot path
def test_warm_jax_calls_are_served_by_one_cache_entry_per_signature():

    runners.HOT.clear()
    x, y = jnp.asarray(randn(3, 2, 4)), jnp.asarray(randn(4, 5))
    first = contract("Wa,ab->Wb", x, y)
    assert len(runners.HOT) == 1
    np.testing.assert_allclose(contract("Wa,ab->Wb", 2 * x, y), 2 * np.asarray(first), rtol=1e-5)
    assert len(runners.HOT) == 1
    # a numpy operand beside a jax one is another signature (its type is in the key)
    mixed = contract("Wa,ab->Wb", np.asarray(x), y)
    assert isinstance(mixed, jax.Array) and len(runners.HOT) == 2
    np.testing.assert_allclose(mixed, first, rtol=1e-5)


def test_jax_hot_path_still_checks_len_values_and_shapes():
    from contractions import ContractionError

    x, y = jnp.asarray(randn(3, 2, 4)), jnp.asarray(randn(3, 2, 4))
    assert contract("WCa,WCa->C", x, y, len_W=1).shape == (2,)
    with pytest.raises(TypeError, match="len_W"):
        contract("WCa,WCa->C", x, y, len_W=1.0)   # 1.0 == 1 must not reuse the int entry
    with pytest.raises(ContractionError):
        contract("WCa,WCa->C", x, jnp.asarray(randn(3, 2, 5)), len_W=1)
