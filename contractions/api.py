"""The public verbs: `contract`, `explain`, `expand_subscripts`.

`contract` is the last stage of the pipeline (parse -> solve -> expand -> plan ->
execute).  Everything up to the plan is cached on ``(subscripts, operand shapes,
supplements)``, so a warm call is one dictionary lookup plus the arithmetic.

>>> import numpy as np
>>> x = np.ones((4, 2, 3)); cores = np.ones((2, 3, 5, 6)); z = np.ones((4, 2, 5))
>>> contract('WCa,Caib,WCi->WCb', x, cores, z).shape
(4, 2, 6)
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .arguments import normalise_supplements
from .expand import shape_ndims
from .parser import parse
from .plan import PLAN_CACHE_SIZE, Plan, make_plan
from .solver import identifiability, solve_call

__all__ = ["contract", "explain", "expand_subscripts", "normalise_supplements"]

_ndarray = np.ndarray


# ----------------------------------------------------------------------- backends
@functools.lru_cache(maxsize=PLAN_CACHE_SIZE)
def _numpy_runner(subscripts: str, shapes: tuple[tuple[int, ...], ...],
                  supplements: tuple[tuple[str, int], ...]) -> Callable[..., Any]:
    from .backends.numpy_backend import build_program

    exp = make_plan(subscripts, shapes, supplements).expansion
    return build_program(exp.inputs, exp.output, shapes)


def _framework(operands: Sequence[Any]) -> str:
    """'numpy', 'jax' or 'torch', judged from the operands' types.

    Frameworks are looked up in ``sys.modules`` only: if the caller never imported jax,
    no operand can be a jax array, and we must not import it for them.
    """
    jax = sys.modules.get("jax")
    torch = sys.modules.get("torch")
    found = set()
    for op in operands:
        if isinstance(op, _ndarray):
            continue
        if jax is not None and isinstance(op, jax.Array):
            found.add("jax")
        elif torch is not None and isinstance(op, torch.Tensor):
            found.add("torch")
    if len(found) > 1:
        raise TypeError("contract() got both jax arrays and torch tensors; convert one side first")
    return found.pop() if found else "numpy"


def contract(subscripts: str, *operands: Any, precision: Any = None,
             preferred_element_type: Any = None, **len_groups: int) -> Any:
    """Evaluate a grouped einsum.

    UPPERCASE letters are groups of zero or more consecutive axes, lowercase letters
    single axes.  Group lengths are solved from the operands' ndims; where the string
    cannot decide them, pass ``len_<G>=n``.  numpy, JAX (arrays and tracers) and torch
    operands are accepted; numpy mixed with JAX runs on JAX.

    ``precision`` and ``preferred_element_type`` are passed to ``jnp.einsum`` on JAX.
    On numpy and torch, ``preferred_element_type`` is the dtype the operands are
    converted to before contracting and ``precision`` is ignored.

    >>> import numpy as np
    >>> zo, za = np.ones((3, 2, 5)), np.ones((3, 2, 4))
    >>> contract('WCo,WCa->Cao', zo, za, len_W=1).shape
    (2, 4, 5)
    """
    if preferred_element_type is None:
        # Hot path: every operand a numpy array and every len_* a plain int.  One dict
        # lookup keyed on (subscripts, *shapes, *len items) yields the planned program's
        # bare callable; everything else happens once, on the first call of a signature.
        key = [subscripts]
        for op in operands:
            if type(op) is not _ndarray:
                break
            key.append(op.shape)
        else:
            for item in len_groups.items():
                if type(item[1]) is not int:  # bool/float/np.int64: take the checked route
                    break
                key.append(item)
            else:
                try:
                    run = _HOT.get(tuple(key))
                except TypeError:  # unhashable subscripts; the checked route reports it
                    run = None
                if run is not None:
                    return run(*operands)
                return _numpy_first_call(subscripts, operands, len_groups, tuple(key))
    supplements = normalise_supplements(len_groups) if len_groups else ()
    return _contract_general(subscripts, operands, supplements, precision, preferred_element_type)


# The hot-path cache: (subscripts, *shapes, *len_items) -> the program's bare callable.
# Bounded by clearing when full (dict operations are atomic under the GIL, so concurrent
# callers at worst re-plan through the lru-cached `_numpy_runner`).
_HOT: dict[tuple[Any, ...], Callable[..., Any]] = {}
HOT_CACHE_SIZE = PLAN_CACHE_SIZE


def _numpy_first_call(subscripts: str, operands: Sequence[Any], len_groups: Mapping[str, Any],
                      key: tuple[Any, ...]) -> Any:
    if not isinstance(subscripts, str):
        raise TypeError(f"subscripts must be a str, got {type(subscripts).__name__}")
    supplements = normalise_supplements(len_groups)
    shapes = tuple(op.shape for op in operands)
    run = _numpy_runner(subscripts, shapes, supplements).execute
    if len(_HOT) >= HOT_CACHE_SIZE:
        _HOT.clear()
    _HOT[key] = run
    return run(*operands)


def _contract_general(subscripts: str, operands: Sequence[Any],
                      supplements: tuple[tuple[str, int], ...], precision: Any,
                      preferred_element_type: Any) -> Any:
    if not isinstance(subscripts, str):
        raise TypeError(f"subscripts must be a str, got {type(subscripts).__name__}")
    framework = _framework(operands)
    if framework == "numpy":
        arrays = [np.asarray(op) for op in operands]
        if preferred_element_type is not None:
            arrays = [a.astype(preferred_element_type, copy=False) for a in arrays]
        shapes = tuple(a.shape for a in arrays)
        return _numpy_runner(subscripts, shapes, supplements)(*arrays)
    shapes = tuple(tuple(op.shape) if hasattr(op, "shape") else np.shape(op) for op in operands)
    expansion = make_plan(subscripts, shapes, supplements).expansion
    run = _BACKEND_RUNNERS.get(framework) or _load_backend(framework)
    if framework == "jax":
        return run(expansion, operands, precision=precision,
                   preferred_element_type=preferred_element_type)
    return run(expansion, operands, preferred_element_type=preferred_element_type)


# Backend entry points, imported on first use (an ``import`` statement inside the hot
# function would cost a module-lock round trip on every call).
_BACKEND_RUNNERS: dict[str, Callable[..., Any]] = {}


def _load_backend(framework: str) -> Callable[..., Any]:
    run: Callable[..., Any]
    if framework == "jax":
        from .backends.jax_backend import contract_jax as run
    else:
        from .backends.torch_backend import contract_torch as run  # type: ignore[no-redef]
    _BACKEND_RUNNERS[framework] = run
    return run


# ------------------------------------------------------------------ introspection
def _shapes_or_ndims(items: Sequence[Any]) -> tuple[tuple[tuple[int, ...], ...] | None, tuple[int, ...]]:
    """Split explain/expand arguments into (shapes or None, ndims)."""
    ndims = shape_ndims(items)
    if all(not isinstance(i, int) for i in items):
        shapes = tuple(tuple(int(d) for d in (i.shape if hasattr(i, "shape") else i)) for i in items)
        return shapes, ndims
    return None, ndims


def _lengths_only(subscripts: str, ndims: tuple[int, ...],
                  supplements: tuple[tuple[str, int], ...]):
    return solve_call(subscripts, ndims, supplements)


def expand_subscripts(subscripts: str, *shapes_or_ndims: Any, **len_groups: int) -> str:
    """The plain einsum string a grouped call expands to (no arithmetic).

    Pass one shape tuple, array or ndim (int) per operand.

    >>> expand_subscripts('WCa,Caib,WCi->WCb', 4, 5, 4)
    'ABCa,BCaib,ABCi->ABCb'
    >>> expand_subscripts('Vo,VWo->WVo', (3, 5), (3, 2, 2, 5))
    'Ao,ABCo->BCAo'
    """
    from .expand import expand

    supplements = normalise_supplements(len_groups)
    shapes, ndims = _shapes_or_ndims(shapes_or_ndims)
    if shapes is not None:
        return make_plan(subscripts, shapes, supplements).expansion.einsum
    parsed, lengths = _lengths_only(subscripts, ndims, supplements)
    return expand(parsed, lengths).einsum


def explain(subscripts: str, *shapes_or_operands: Any, **len_groups: int) -> str:
    """A human-readable report of how ``subscripts`` is solved, expanded and planned.

    With shapes (or arrays) it includes the extents, the contraction path and its FLOP
    count; with bare ndims (ints) it stops at the expansion.

    >>> print(explain('WCo,WCa->Cao', (3, 2, 5), (3, 2, 4), len_W=1))  # doctest: +ELLIPSIS
    subscripts      'WCo,WCa->Cao'
    ...
    """
    import opt_einsum

    from .expand import expand

    supplements = normalise_supplements(len_groups)
    shapes, ndims = _shapes_or_ndims(shapes_or_operands)
    parsed = parse(subscripts)
    info = identifiability(subscripts, [g for g, _ in supplements])
    lines = [f"subscripts      {subscripts!r}"]
    alone = identifiability(subscripts).describe()
    if supplements:
        given = ", ".join(f"len_{g}={n}" for g, n in supplements)
        state = "determined" if not info.needs_supplement else info.describe()
        lines.append(f"identifiability {state} with {given} (the string alone: {alone})")
    else:
        lines.append(f"identifiability {alone}")
    runs = [r for r in info.runs if len(r) > 1]
    lines.append("co-travelling   " + ("; ".join("".join(r) + " (only the total matters)" for r in runs)
                                       if runs else "none"))
    plan: Plan | None = None
    if shapes is not None:
        plan = make_plan(subscripts, shapes, supplements)
        exp, lengths = plan.expansion, plan.lengths
    else:
        parsed, lengths = _lengths_only(subscripts, ndims, supplements)
        exp = expand(parsed, lengths)
    lines.append("groups")
    for (g, labels), n in zip(exp.group_labels, lengths):
        syms = "".join(exp.symbols[l] for l in labels) or "-"
        ext = f" extents {tuple(plan.extents[l] for l in labels)}" if plan is not None else ""
        lines.append(f"  {g}: {n} ax{'is' if n == 1 else 'es'} -> {syms}{ext}")
    lines.append(f"expanded        {exp.einsum!r}")
    if plan is not None:
        lines.append(f"output shape    {plan.output_shape}")
        path, info_path = opt_einsum.contract_path(exp.einsum, *plan.shapes, shapes=True,
                                                  optimize="auto")
        lines.append(f"path            {path}")
        lines.append(f"FLOPs           {int(info_path.opt_cost):,} (naive single einsum: "
                     f"{int(info_path.naive_cost):,})")
        lines.append(f"largest interm. {int(info_path.largest_intermediate):,} elements")
    return "\n".join(lines)
