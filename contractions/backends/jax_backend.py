"""The JAX backend: one ``jnp.einsum`` on the expanded string, along the schedule's path.

Under a transformation (``jit``, ``vmap``, ``grad``, ``jvp``, ...) the operands are tracers and
the call is exactly ``jnp.einsum(expansion.einsum, *operands, optimize=schedule.path, ...)``:
the traced program is the one the hand-expanded einsum gives with that path, so the library
costs nothing at run time, every group sub-axis stays an honest einsum axis (nothing is
reshaped or transposed here, so any sub-axis can be sharded without collectives), and JAX's own
batching/differentiation rules apply.  The path is the schedule's (``explain`` prints it), so
the pairwise order JAX runs is the one reported.

Eager calls on concrete arrays go through a jitted ``jnp.einsum`` cached per
``(einsum string, path, precision, preferred_element_type)``: eager ``jnp.einsum`` re-plans in
Python on every call, the cached jitted function costs one C++ dispatch
(``bench/eager_overhead.py``).  ``jnp.einsum`` accepts the non-ASCII symbols the expansion hands
out past 52 axes, so large expansions need no special route.

This module imports jax at top level; the registry imports it only after it has seen a jax
array or tracer among the operands.

>>> import jax.numpy as jnp
>>> jitted_einsum('ab,bc->ac', ((0, 1),))(jnp.ones((2, 3)), jnp.ones((3, 4))).shape
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

_Tracer = jax.core.Tracer

try:  # Private, but the cheapest exact answer to "is any trace active?"; optional.
    from jax._src.core import trace_state_clean as _trace_state_clean
except ImportError:  # pragma: no cover - depends on the jax version
    def _trace_state_clean() -> bool:
        return True


@functools.lru_cache(maxsize=EAGER_CACHE_SIZE)
def jitted_einsum(einsum: str, path: tuple[tuple[int, ...], ...], precision: Any = None,
                  preferred_element_type: Any = None) -> Callable[..., jax.Array]:
    """The jitted ``jnp.einsum(einsum, *operands, optimize=path, ...)`` for eager calls.

    jit keys its executables on the operands' shapes, dtypes and shardings, so one cached
    function serves every call with this string and path.

    >>> jitted_einsum('ab,bc->ac', ((0, 1),)) is jitted_einsum('ab,bc->ac', ((0, 1),))
    True
    """
    return jax.jit(functools.partial(jnp.einsum, einsum, optimize=list(path), precision=precision,
                                     preferred_element_type=preferred_element_type))


def _tracing(operands: Sequence[Any]) -> bool:
    for op in operands:
        if isinstance(op, _Tracer):
            return True
    # Concrete operands closed over inside a jit still belong to that trace: call jnp.einsum
    # directly there too, so the staged program has no extra nested call.
    return not _trace_state_clean()


def compile(plan: Any, schedule: Schedule, options: Any) -> Callable[..., jax.Array]:
    """The callable running ``plan.expansion.einsum`` along ``schedule.path`` on JAX."""
    einsum, path = plan.expansion.einsum, schedule.path
    precision, preferred = options.precision, options.preferred_element_type
    traced = functools.partial(jnp.einsum, einsum, optimize=list(path), precision=precision,
                               preferred_element_type=preferred)
    try:
        eager = jitted_einsum(einsum, path, precision, preferred)
    except TypeError:  # unhashable precision: not cacheable; jnp.einsum reports it on the call
        eager = traced

    def run(*operands: Any) -> jax.Array:
        return traced(*operands) if _tracing(operands) else eager(*operands)

    return run


def describe(plan: Any, schedule: Schedule, options: Any) -> list[str]:
    """What runs, for ``explain``."""
    return [f"one jnp.einsum({plan.expansion.readable!r}, optimize={[tuple(p) for p in schedule.path]})"
            " (XLA lowers each pair to a dot_general; nothing is reshaped)"]
