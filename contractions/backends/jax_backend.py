"""JAX execution: one ``jnp.einsum`` on the expanded string, nothing else.

Under a transformation (``jit``, ``vmap``, ``grad``, ``jvp``, ...) the operands are tracers and
the call is exactly ``jnp.einsum(expansion.einsum, *operands, ...)``: the traced program is the
one the hand-expanded einsum would give, so the library costs nothing at run time, every group
sub-axis stays an honest einsum axis (nothing is reshaped or transposed here, so any sub-axis
can be sharded without collectives), and JAX's own batching/differentiation rules apply.

Eager calls on concrete arrays go through a jitted ``jnp.einsum`` cached per
``(einsum string, precision, preferred_element_type)``.  Eager ``jnp.einsum`` re-plans its
contraction path in Python on every call; the cached jitted function skips that and costs one
C++ dispatch (see ``bench/eager_overhead.py``).

``jnp.einsum`` accepts the non-ASCII symbols `opt_einsum.get_symbol` hands out past 52 axes,
so large expansions need no special route.

This module imports jax at top level; the dispatcher imports it only after it has seen a jax
array or tracer among the operands.

>>> import jax.numpy as jnp
>>> from types import SimpleNamespace
>>> exp = SimpleNamespace(einsum='ab,bc->ac')
>>> contract_jax(exp, (jnp.ones((2, 3)), jnp.ones((3, 4)))).shape
(2, 4)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["EAGER_CACHE_SIZE", "contract_jax", "jitted_einsum"]

EAGER_CACHE_SIZE = 512

_Tracer = jax.core.Tracer

try:  # Private, but the cheapest exact answer to "is any trace active?"; optional.
    from jax._src.core import trace_state_clean as _trace_state_clean
except ImportError:  # pragma: no cover - depends on the jax version
    def _trace_state_clean() -> bool:
        return True


@functools.lru_cache(maxsize=EAGER_CACHE_SIZE)
def jitted_einsum(einsum: str, precision: Any = None,
                  preferred_element_type: Any = None) -> Callable[..., jax.Array]:
    """The jitted ``jnp.einsum(einsum, *operands, ...)`` used for eager calls (bounded cache).

    jit keys its compiled executables on the operands' shapes, dtypes and shardings, so one
    cached function serves every shape the expansion is called with.

    >>> f = jitted_einsum('ab,bc->ac')
    >>> f is jitted_einsum('ab,bc->ac')
    True
    """
    return jax.jit(functools.partial(jnp.einsum, einsum, precision=precision,
                                     preferred_element_type=preferred_element_type))


def _tracing(operands: Sequence[Any]) -> bool:
    for op in operands:
        if isinstance(op, _Tracer):
            return True
    # Concrete operands closed over inside a jit still belong to that trace: call jnp.einsum
    # directly there too, so the staged program has no extra nested call.
    return not _trace_state_clean()


def contract_jax(expansion: Any, operands: Sequence[Any], precision: Any = None,
                 preferred_element_type: Any = None) -> jax.Array:
    """Run ``expansion.einsum`` on ``operands`` (jax arrays, tracers, numpy arrays mixed).

    ``precision`` and ``preferred_element_type`` are passed to ``jnp.einsum`` unchanged.
    Mixed numpy and jax operands give a jax array.
    """
    if _tracing(operands):
        return jnp.einsum(expansion.einsum, *operands, precision=precision,
                          preferred_element_type=preferred_element_type)
    try:
        run = jitted_einsum(expansion.einsum, precision, preferred_element_type)
    except TypeError:  # unhashable precision: not cacheable; let jnp.einsum report it
        return jnp.einsum(expansion.einsum, *operands, precision=precision,
                          preferred_element_type=preferred_element_type)
    return run(*operands)
