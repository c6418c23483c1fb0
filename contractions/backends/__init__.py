"""Execution backends.  Each is imported only when operands of its framework are seen.

- `numpy_backend`: BLAS-aware pairwise planner/executor on integer axis labels.
- `jax_backend`: one ``jnp.einsum`` on the expanded string (no reshapes: shardable).
- `torch_backend`: ``torch.einsum`` on the expanded string.
"""
