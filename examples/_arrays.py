"""Array-namespace helper so the examples run unchanged on numpy and JAX arrays."""

from __future__ import annotations

import sys

import numpy as np


def namespace(*arrays):
    """Return ``jax.numpy`` if any argument is a JAX array (or tracer), else ``numpy``.

    JAX is only consulted if the caller has already imported it; this never imports it.

    >>> namespace(np.zeros(2)) is np
    True
    """
    jax = sys.modules.get("jax")
    if jax is not None and any(isinstance(a, jax.Array) for a in arrays):
        import jax.numpy as jnp

        return jnp
    return np


if __name__ == "__main__":
    # python -m examples._arrays: run this module's docstring example.
    import doctest

    failed = doctest.testmod().failed
    print("namespace(): numpy arrays get numpy" if not failed else "namespace(): FAILED")
    sys.exit(1 if failed else 0)
