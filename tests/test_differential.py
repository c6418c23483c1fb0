"""Differential tests: random grouped calls, under every option, against ``np.einsum`` on a
hand-expanded string.

Each example draws a grouped string with its group shapes (`tests/_strategies.py`, expanded
by hand with letters of its own), then how a user's code would call it: dtypes (one for all,
or a mix), layouts (C, Fortran, transposed, negative strides, strided, broadcast), the verb
(`contract` once or repeatedly as a loop would, `contract_expression`), ``optimize=``,
``memory_limit=`` (small bounds included), ``dtype=``/``casting=``, ``order=``, ``out=``, and
the library (numpy, torch, torch tensors mixed with numpy arrays).  Every result is checked:

- its values against ``np.einsum`` (numpy's C loop: operands cast to the result type) with a
  tolerance scaled to the precision of the result's dtype (exact for bool and integers), so a
  step computed in a narrower type than the result (bool sums saturating, float32 rounding
  under a float64 result) fails;
- its dtype, shape and layout (``order=``), ``out=`` returned, no operand changed, no numpy
  result sharing memory with an operand;
- every `MemoryLimitError`'s advice: the call is replayed with ``err.smallest_limit``.

The quick profile runs in every suite run; ``-m slow`` runs the long one (10,000 examples,
CONTRIBUTING.md).  JAX is checked under ``jax.jit`` against the dtype JAX promotes to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from contractions import MemoryLimitError, contract, contract_expression, identifiability

from ._strategies import Problem, grouped_problems, hand_expand

QUICK = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))

DTYPES = ("float64", "float32", "float16", "complex128", "int64", "int8", "uint8", "bool")
LAYOUTS = ("C", "F", "transposed", "reversed", "strided", "broadcast")
OPTIMIZE = ("auto", "greedy", "optimal", "dp", "auto-hq", "branch-2", True, False, None)


@dataclass(frozen=True)
class Call:
    """How one example calls the library (everything but the string and its shapes)."""

    dtypes: tuple[str, ...]
    layouts: tuple[str, ...]
    verb: str                  # 'contract', 'loop' (the same call three times), 'expression'
    optimize: Any
    memory_limit: Any          # '' for not passed
    target: str | None         # dtype=
    casting: str               # casting= with dtype= ('unsafe' on torch)
    order: str
    out: bool
    library: str               # 'numpy', 'torch', 'mixed' (torch tensors and numpy arrays)
    seed: int


def _values(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.6
    if dtype in ("int64", "int8"):
        return rng.integers(-3, 4, shape).astype(dtype)
    if dtype == "uint8":
        return rng.integers(0, 4, shape).astype(dtype)
    if dtype == "complex128":
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    if dtype == "float16":   # small values: sums of products stay far from float16's overflow
        return rng.uniform(-1, 1, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _laid_out(a: np.ndarray, layout: str) -> np.ndarray:
    """``a`` (or, for 'broadcast', ``a`` made constant along an axis) in the given memory
    layout; the reference sees the very same array."""
    if a.ndim == 0 or layout == "C":
        return a
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "transposed":
        axes = tuple(reversed(range(a.ndim)))
        return np.ascontiguousarray(a.transpose(axes)).transpose(axes)
    if layout == "reversed":
        return a[::-1].copy()[::-1]
    if layout == "strided":
        wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        wide[..., ::2] = a
        return wide[..., ::2]
    # broadcast: a stride-0 axis (read-only, as np.broadcast_to gives)
    axis = int(np.argmax(a.shape))
    return np.broadcast_to(np.take(a, [0], axis=axis), a.shape)


@st.composite
def calls(draw: Any, n_operands: int) -> Call:
    one = draw(st.booleans())
    dtypes = ((draw(st.sampled_from(DTYPES)),) * n_operands if one
              else tuple(draw(st.sampled_from(DTYPES)) for _ in range(n_operands)))
    layouts = tuple(draw(st.sampled_from(LAYOUTS)) for _ in range(n_operands))
    library = draw(st.sampled_from(("numpy", "numpy", "numpy", "torch", "mixed")))
    numpy = library == "numpy"
    return Call(
        dtypes=dtypes,
        layouts=layouts,
        verb=draw(st.sampled_from(("contract", "loop", "expression"))),
        optimize=draw(st.sampled_from(OPTIMIZE)),
        memory_limit=draw(st.sampled_from(("", "", None, "max_input", 1, 2, 3, 5, 8, 20, 64))),
        target=draw(st.sampled_from((None, None, None, "float64", "float32", "complex128", "int64",
                                     "bool"))),
        casting=draw(st.sampled_from(("unsafe", "same_kind", "safe"))) if numpy else "unsafe",
        order=draw(st.sampled_from(("K", "K", "C", "F", "A"))) if numpy else "K",
        out=draw(st.booleans()) if numpy else False,
        library=library,
        seed=draw(st.integers(0, 2**32 - 1)),
    )


@st.composite
def examples(draw: Any) -> tuple[Problem, Call]:
    problem = draw(grouped_problems(max_terms=5, max_group_axes=2))
    return problem, draw(calls(len(problem.inputs)))


def _optional(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        return None


def _supplements(problem: Problem) -> dict[str, int]:
    info = identifiability(problem.subscripts)
    return {f"len_{g}": len(problem.group_shapes[g]) for g in info.completion}


def _torch_dtype_of(dtypes: list[np.dtype]) -> np.dtype:
    """The result dtype under torch's promotion (which differs from numpy's: int64 with
    float16 is float16 there)."""
    import torch

    found = torch.tensor([], dtype=_to_torch(dtypes[0])).dtype
    for d in dtypes[1:]:
        found = torch.promote_types(found, _to_torch(d))
    return np.dtype(str(found).removeprefix("torch."))


def _to_torch(dtype: Any) -> Any:
    import torch

    return getattr(torch, np.dtype(dtype).name)


def _tolerance(dtype: np.dtype, expanded: str, arrays: list[np.ndarray]) -> np.ndarray | float:
    """What two correct summations in ``dtype`` may differ by: a rounding of the result's
    precision per summed term, on the scale of the products' absolute values.  A step
    computed in a narrower type (float32 under float64, float16 under float32) is orders of
    magnitude outside it."""
    if dtype.kind in "biu":
        return 0.0
    inputs, output = expanded.split("->")
    extents = {ch: n for term, a in zip(inputs.split(","), arrays) for ch, n in zip(term, a.shape)}
    summed = int(np.prod([n for ch, n in extents.items() if ch not in output]))
    eps = float(np.finfo(dtype).eps)
    return (8 + summed) * eps * (_magnitude(expanded, arrays) + 1)


def _magnitude(expanded: str, arrays: list[np.ndarray]) -> np.ndarray:
    return np.einsum(expanded, *(np.abs(a.astype(np.complex128)).astype(np.float64) for a in arrays))


def _run(problem: Problem, call: Call, operands: list[Any], memory_limit: Any,
         out: np.ndarray | None = None) -> list[Any]:
    """The results of the call as the example's verb makes it (``memory_limit=''``: not
    passed), the last one as returned (``out`` itself when given), the others copies."""
    planning: dict[str, Any] = dict(_supplements(problem), optimize=call.optimize)
    if memory_limit != "":
        planning["memory_limit"] = memory_limit
    at_call: dict[str, Any] = {} if out is None else {"out": out}
    if call.verb == "expression":
        expr = contract_expression(problem.subscripts, *[tuple(op.shape) for op in operands], **planning)
        if call.target is not None:
            at_call["preferred_element_type"] = call.target
        run = lambda: expr(*operands, **at_call)
        times = 2
    else:
        if call.target is not None:
            at_call.update(dtype=call.target, casting=call.casting)
        if call.order != "K":
            at_call["order"] = call.order
        run = lambda: contract(problem.subscripts, *operands, **planning, **at_call)
        times = 3 if call.verb == "loop" else 1
    # (a loop's calls may take different tiers, which may round differently: each is checked)
    results = [_copied(run()) for _ in range(times - 1)]
    return [*results, run()]


def _copied(result: Any) -> Any:
    return result.clone() if type(result).__module__.startswith("torch") else np.array(result)


def _as_numpy(r: Any) -> np.ndarray:
    if type(r).__module__.startswith("torch"):
        return r.detach().cpu().numpy()
    return np.asarray(r)


def check_example(problem: Problem, call: Call) -> None:
    """One example: the call (its advice replayed on a `MemoryLimitError`) against the
    reference, and every promise the call makes."""
    rng = np.random.default_rng(call.seed)
    expanded = hand_expand(problem)
    arrays = [_laid_out(_values(shape, dtype, rng), layout)
              for shape, dtype, layout in zip(problem.operand_shapes(), call.dtypes, call.layouts)]
    before = [a.copy() for a in arrays]
    operands: list[Any] = list(arrays)
    if call.library != "numpy":
        # (without torch, its examples are rejected and the numpy ones still run)
        torch = _optional("torch")
        assume(torch is not None)
        operands = [torch.from_numpy(np.array(a)) if k % 2 == 0 or call.library == "torch" else a
                    for k, a in enumerate(arrays)]
    # The reference: numpy's C loop on the operands cast to the result type (cast first:
    # np.einsum's dtype= leaves a call that only views its operand, '->' or 'ij->ji', alone).
    if call.target is not None:
        result_dtype = np.dtype(call.target)
    elif call.library == "numpy":
        result_dtype = np.result_type(*arrays)
    else:
        result_dtype = _torch_dtype_of([a.dtype for a in arrays])
    want = np.einsum(expanded, *(a.astype(result_dtype) for a in arrays))

    if call.target is not None and call.verb != "expression":
        # numpy's casting rule, checked before any arithmetic (np.einsum itself skips it on a
        # call that only views its operand, '->' or 'ij->ji')
        if not all(np.can_cast(a.dtype, result_dtype, call.casting) for a in arrays):
            with pytest.raises(TypeError, match="cast"):
                _run(problem, call, operands, call.memory_limit)
            return

    out = None
    if call.out:
        out = np.empty(np.shape(want), result_dtype)
    # The advice of a MemoryLimitError, replayed, must work.  An expression decides twice:
    # when it is built (C operands of one dtype) and when it is called, where operands to
    # convert (preferred_element_type=, mixed dtypes, other layouts) add copies to the peak
    # and the call's own error advises for them.
    limit, replays = call.memory_limit, 0
    while True:
        try:
            got = _run(problem, call, operands, limit, out)
            break
        except MemoryLimitError as err:
            assert isinstance(err.smallest_limit, int) and err.smallest_limit >= 1, err
            assert f"pass memory_limit={err.smallest_limit} or more" in str(err)
            assert replays < (2 if call.verb == "expression" else 1), f"the advice {limit} did not work"
            assert limit in ("", None, "max_input") or err.smallest_limit > limit
            limit, replays = err.smallest_limit, replays + 1

    *earlier, got = got
    if out is not None:
        assert got is out, "out= is the array returned"
    if call.library == "numpy" and np.ndim(want) == 0 and out is None:
        assert isinstance(got, np.generic), "a 0-d result is a numpy scalar"
    bound = _tolerance(result_dtype, expanded, arrays)
    for each in (*earlier, got):
        result = _as_numpy(each)
        assert result.shape == np.shape(want), (result.shape, np.shape(want))
        assert result.dtype == result_dtype, (result.dtype, result_dtype, call)
        if result_dtype.kind == "b":
            assert np.array_equal(result, want), (problem.subscripts, call)
        else:
            error = np.abs(result.astype(np.complex128) - np.asarray(want).astype(np.complex128))
            assert np.all(error <= bound), (
                f"{problem.subscripts} ({expanded}) {call}: off by {np.max(error):.3g}")
    result = _as_numpy(got)
    if call.order in ("C", "F") and result.ndim > 1 and out is None and call.verb != "expression":
        flag = "C_CONTIGUOUS" if call.order == "C" else "F_CONTIGUOUS"
        assert np.asarray(got).flags[flag], f"order={call.order!r} not honoured"
    for a, b in zip(arrays, before):
        assert np.array_equal(a, b, equal_nan=True), "an operand was changed"
    if call.library == "numpy" and isinstance(got, np.ndarray):
        for a in arrays:
            assert not np.shares_memory(got, a), "the result shares memory with an operand"


@QUICK
@given(examples())
def test_random_calls_agree_with_numpy(example: tuple[Problem, Call]) -> None:
    check_example(*example)


@pytest.mark.slow
@LONG
@given(examples())
def test_random_calls_agree_with_numpy_long(example: tuple[Problem, Call]) -> None:
    check_example(*example)


# ------------------------------------------------------------------------------ JAX, jitted
JAX_DTYPES = ("float64", "float32", "float16", "complex128", "int64", "int8", "bool")


@st.composite
def jax_examples(draw: Any) -> tuple[Problem, tuple[str, ...], Any, int]:
    problem = draw(grouped_problems(max_terms=4, max_group_axes=2))
    n = len(problem.inputs)
    dtypes = ((draw(st.sampled_from(JAX_DTYPES)),) * n if draw(st.booleans())
              else tuple(draw(st.sampled_from(JAX_DTYPES)) for _ in range(n)))
    optimize = draw(st.sampled_from(("auto", "greedy", "optimal", False)))
    return problem, dtypes, optimize, draw(st.integers(0, 2**32 - 1))


def check_jax_example(problem: Problem, dtypes: tuple[str, ...], optimize: Any, seed: int) -> None:
    """Under ``jax.jit``, against ``np.einsum`` in the dtype JAX promotes the operands to (the
    framework's own rule: int64 with float32 is float32 there)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    arrays = [_values(shape, dtype, rng) for shape, dtype in zip(problem.operand_shapes(), dtypes)]
    expanded = hand_expand(problem)
    result_dtype = np.dtype(jnp.result_type(*arrays))
    want = np.einsum(expanded, *(a.astype(result_dtype) for a in arrays))
    supplements = _supplements(problem)

    @jax.jit
    def run(*ops: Any) -> Any:
        return contract(problem.subscripts, *ops, optimize=optimize, **supplements)

    result = np.asarray(run(*(jnp.asarray(a) for a in arrays)))
    assert result.dtype == result_dtype and result.shape == np.shape(want)
    if result_dtype.kind in "biu":
        assert np.array_equal(result, want), (problem.subscripts, dtypes)
    else:
        error = np.abs(result.astype(np.complex128) - np.asarray(want).astype(np.complex128))
        assert np.all(error <= _tolerance(result_dtype, expanded, arrays)), (
            f"{problem.subscripts} {dtypes}: off by {np.max(error):.3g}")


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(jax_examples())
def test_random_jitted_jax_calls_agree_with_numpy(example: Any) -> None:
    check_jax_example(*example)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(jax_examples())
def test_random_jitted_jax_calls_agree_with_numpy_long(example: Any) -> None:
    check_jax_example(*example)
