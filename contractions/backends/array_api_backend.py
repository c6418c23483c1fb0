"""The Array API backend: the schedule run through any standard-conforming namespace.

An operand with ``__array_namespace__`` that numpy, jax, torch and dask do not own runs here
(array-api-strict, CuPy, ...).  The standard has no einsum, so the registry entry declares
``uses_einsum=False`` and every step is a batched ``matmul`` or a broadcast ``multiply``,
compiled with the namespace's own standard functions.  numpy operands are lifted onto the
library's device; mixing kinds (integer and floating) is the library's ``TypeError``; all-bool
operands give numpy's meaning (an any over products, counted in int64).

>>> import array_api_strict as xp
>>> from contractions import contract
>>> y = contract('Wa,ab->Wb', xp.ones((2, 3)), xp.ones((3, 4)))
>>> type(y).__module__.partition('.')[0], y.shape, float(y[0, 0])
('array_api_strict', (2, 4), 3.0)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..schedule import Schedule, describe_schedule, make_schedule
from .compile import ArrayOps, compile_schedule

__all__ = ["compile", "describe", "namespace_ops", "standard_schedule"]


def _no_einsum(subscripts: str, *arrays: Any) -> Any:
    raise AssertionError(f"a use_einsum=False schedule asked for einsum {subscripts!r}")


@functools.lru_cache(maxsize=16)
def namespace_ops(xp: Any) -> ArrayOps:
    """The schedule's operations on the Array API namespace ``xp`` (one instance per namespace).

    >>> import array_api_strict as xp
    >>> ops = namespace_ops(xp)
    >>> ops.diagonal(xp.reshape(xp.arange(12.0), (2, 3, 2)), 0, 2).shape   # axes 0, 2 -> last
    (3, 2)
    """
    permute_dims, diagonal_last = xp.permute_dims, xp.linalg.diagonal

    def diagonal(x: Any, a: int, b: int) -> Any:
        rest = tuple(k for k in range(x.ndim) if k not in (a, b))
        return diagonal_last(permute_dims(x, (*rest, a, b)))

    def swap_last(x: Any) -> Any:
        n = x.ndim
        return permute_dims(x, (*range(n - 2), n - 1, n - 2))

    def total(x: Any, axes: tuple[int, ...]) -> Any:
        return xp.sum(x, axis=axes, dtype=x.dtype)

    def set_block(out: Any, index: tuple[slice, ...], block: Any) -> None:
        out[index] = block

    def add_block(out: Any, index: tuple[slice, ...], block: Any) -> None:
        out[index] = out[index] + block

    return ArrayOps(
        einsum=_no_einsum,
        matmul=xp.matmul,
        multiply=xp.multiply,
        permute=permute_dims,
        reshape=xp.reshape,
        diagonal=diagonal,
        sum=total,
        # The standard has no memory layout: reshape copies where it must.
        contiguous=lambda x: x,
        swap_last=swap_last,
        copy=lambda x: xp.asarray(x, copy=True),
        as_array=lambda x: x,
        common_dtype=lambda arrays: xp.result_type(*arrays),
        dtype=lambda x: x.dtype,
        astype=xp.astype,
        # Blocked schedules (an explicit memory_limit) write into a preallocated result.
        zeros=lambda shape, dtype, like: xp.zeros(shape, dtype=dtype, device=like.device),
        empty=lambda shape, dtype, like: xp.empty(shape, dtype=dtype, device=like.device),
        set_block=set_block,
        add_block=add_block,
    )


def _einsum_free(schedule: Schedule) -> bool:
    inner = [s for _, s in schedule.blocking.inner] if schedule.blocking is not None else []
    return schedule.strategy == "pairwise" and all(
        step.kernel != "einsum" for s in (schedule, *inner) for step in s.steps)


def standard_schedule(plan: Any, schedule: Schedule) -> Schedule:
    """The einsum-free schedule this backend runs: ``schedule`` itself when it has no einsum
    step (the API plans with ``use_einsum=False`` for this backend, which declares it), else
    one made along ``schedule``'s path and within its memory limit (a schedule planned for
    another backend)."""
    if _einsum_free(schedule):
        return schedule
    return make_schedule(plan, tuple(schedule.path), use_einsum=False,
                         memory_limit=schedule.memory_limit)


def _namespace_dtype(xp: Any, dtype: Any) -> Any:
    if isinstance(dtype, str) or isinstance(dtype, (np.dtype, type)):
        found = getattr(xp, np.dtype(dtype).name, None)
        if found is None:
            raise TypeError(f"preferred_element_type={dtype!r} names no {xp.__name__} dtype")
        return found
    return dtype  # already the namespace's dtype object


def _namespace_and_device(operands: Sequence[Any]) -> tuple[Any, Any]:
    for op in operands:
        if not isinstance(op, np.ndarray):
            return op.__array_namespace__(), op.device
    raise TypeError("the Array API backend needs at least one non-numpy operand")


def compile(plan: Any, schedule: Schedule, options: Any) -> Callable[..., Any]:
    """The callable running the einsum-free schedule on the operands' namespace."""
    standard = standard_schedule(plan, schedule)
    target = options.preferred_element_type
    compiled: dict[Any, Callable[..., Any]] = {}   # per namespace (one schedule, many libraries)

    def execute(*operands: Any) -> Any:
        xp, device = _namespace_and_device(operands)
        arrays = [xp.asarray(op, device=device) if isinstance(op, np.ndarray) else op
                  for op in operands]
        if target is not None:
            dtype = _namespace_dtype(xp, target)
            arrays = [a if a.dtype == dtype else xp.astype(a, dtype) for a in arrays]
        run = compiled.get(xp)
        if run is None:
            run = compiled[xp] = compile_schedule(standard, namespace_ops(xp))
        if arrays and all(a.dtype == xp.bool for a in arrays):
            # numpy's meaning, an any over the products, which the standard's matmul and sum
            # (numeric only) cannot compute in bool: counted in int64, compared with zero
            return run(*(xp.astype(a, xp.int64) for a in arrays)) != 0
        return run(*arrays)

    return execute


def describe(plan: Any, schedule: Schedule, options: Any) -> list[str]:
    """What runs, for ``explain``: the einsum-free schedule, step by step."""
    name = plan.expansion.readable_symbol
    return (["pairwise without einsum (the Array API standard has none), on the operands' "
             "namespace:"]
            + ["  " + line for line in describe_schedule(standard_schedule(plan, schedule), name)])
