"""The JAX backend: one ``jnp.einsum`` on the expanded string.

With the default ``optimize`` the call is exactly ``jnp.einsum(expansion.einsum, *operands)``,
so a jitted `contract` lowers to the same program as the jitted hand-expanded einsum (the
numpy time model's orders ran slower under ``jit``: dev/decisions.md 16).  An explicit
``optimize=`` is honoured by handing the schedule's path to ``jnp.einsum(..., optimize=path)``.
Nothing is reshaped or transposed, so every group sub-axis can be sharded without
collectives, and nothing touches the host.  Eager calls go through a jitted ``jnp.einsum``
cached per (string, path, precision, preferred_element_type): one C++ dispatch instead of
einsum's Python planning.

>>> import jax.numpy as jnp
>>> jitted_einsum('ab,bc->ac')(jnp.ones((2, 3)), jnp.ones((3, 4))).shape
(2, 4)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ..schedule import Schedule

__all__ = ["EAGER_CACHE_SIZE", "compile", "describe", "jitted_einsum"]

EAGER_CACHE_SIZE = 512

#: ``jnp.einsum``'s own default ``optimize``; what a hand-written call uses.
JAX_DEFAULT_OPTIMIZE = "auto"

_Tracer = jax.core.Tracer

try:  # Private, but the cheapest exact answer to "is any trace active?"; optional.
    from jax._src.core import trace_state_clean as _trace_state_clean
except ImportError:  # pragma: no cover - depends on the jax version
    def _trace_state_clean() -> bool:
        return True


@functools.lru_cache(maxsize=EAGER_CACHE_SIZE)
def jitted_einsum(einsum: str, path: tuple[tuple[int, ...], ...] | None = None, precision: Any = None,
                  preferred_element_type: Any = None) -> Callable[..., jax.Array]:
    """The jitted ``jnp.einsum(einsum, *operands, optimize=..., ...)`` for eager calls.

    ``path=None`` is ``jnp.einsum``'s own choice.  jit keys its executables on the operands'
    shapes, dtypes and shardings, so one cached function serves every call with this string
    and path.

    >>> jitted_einsum('ab,bc->ac', ((0, 1),)) is jitted_einsum('ab,bc->ac', ((0, 1),))
    True
    """
    return jax.jit(_einsum(einsum, path, precision, preferred_element_type))


def _einsum(einsum: str, path: tuple[tuple[int, ...], ...] | None, precision: Any,
            preferred_element_type: Any) -> Callable[..., jax.Array]:
    optimize: Any = JAX_DEFAULT_OPTIMIZE if path is None else list(path)
    call = functools.partial(jnp.einsum, einsum, optimize=optimize, precision=precision,
                             preferred_element_type=preferred_element_type)
    if preferred_element_type is not None:
        # (jnp's meaning: operands as they are, accumulated in that type, e.g. bfloat16
        # products summed in float32)
        return call

    def promoted(*operands: Any) -> jax.Array:
        # jnp.einsum contracts pair by pair, each pair in its own type with the result's as
        # preferred element type, which some mixes refuse (an int64 pair under a float32
        # result: "must not be narrower"): the operands are cast to the type of the result
        # first, as numpy's one einsum call casts them.  Operands of that type are untouched,
        # so the traced program is a hand-written jnp.einsum's.
        dtype = jnp.result_type(*operands)
        return call(*(jnp.asarray(op, dtype) for op in operands))

    return promoted


def _tracing(operands: Sequence[Any]) -> bool:
    for op in operands:
        if isinstance(op, _Tracer):
            return True
    # Concrete operands closed over inside a jit still belong to that trace: call jnp.einsum
    # directly there too, so the staged program has no extra nested call.
    return not _trace_state_clean()


def compile(plan: Any, schedule: Schedule | None, options: Any) -> Callable[..., jax.Array]:
    """The callable running ``plan.expansion.einsum`` on JAX: along ``schedule.path`` when a
    schedule is given (an explicit ``optimize=``), else with ``jnp.einsum``'s own path."""
    einsum = plan.expansion.einsum
    path = None if schedule is None else schedule.path
    precision, preferred = options.precision, options.preferred_element_type
    traced = _einsum(einsum, path, precision, preferred)
    try:
        eager = jitted_einsum(einsum, path, precision, preferred)
    except TypeError:  # unhashable precision: not cacheable; jnp.einsum reports it on the call
        eager = traced

    def run(*operands: Any) -> jax.Array:
        return traced(*operands) if _tracing(operands) else eager(*operands)

    return run


def describe(plan: Any, schedule: Schedule | None, options: Any) -> list[str]:
    """What runs, for ``explain``."""
    if schedule is None:
        return [f"one jnp.einsum({plan.expansion.readable!r}) with jnp.einsum's own path "
                "(opt_einsum 'auto', as a hand-written call; XLA lowers each pair to a "
                "dot_general; nothing is reshaped)"]
    return [f"one jnp.einsum({plan.expansion.readable!r}, optimize={[tuple(p) for p in schedule.path]})"
            " (XLA lowers each pair to a dot_general; nothing is reshaped)"]
