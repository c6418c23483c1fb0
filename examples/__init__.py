"""Worked consumer code for `contractions.contract`: the corpus the evidence harness scans.

Each module is numerical code written the way a user of the library writes it, by topic:

- ``tensor_train``  stacked tensor trains: dense/probe/entry evaluation, MPO application,
  Gram matrices, tangent stacks and adjoint lifts;
- ``tucker``        Tucker tensors with stacked cores, probes, tangents and HOSVD;
- ``attention``     attention with a batch group ``B`` and head group ``H`` of any number of axes;
- ``forms``         batched bilinear and quadratic forms, traces, weighted covariances;
- ``transfer``      MPS/MPO transfer-matrix contractions and environments;
- ``jvp``           stacked Jacobian-vector and vector-Jacobian products.

Stacking letters follow the house convention: ``W`` is the probe/sample stack, ``K`` the tangent
stack, ``C`` the core/frame stack, in that order (frame-inner), each a group of zero or more axes.
All functions take numpy arrays or JAX arrays.

Each module also runs on its own and checks itself: ``python examples/tensor_train.py`` or
``python -m examples.tensor_train`` (likewise
for every module here; ``sharded_data_parallel`` needs JAX).
"""

# The modules are not imported here: `python -m examples.NAME` must find NAME not yet imported.
# `from examples import tensor_train` (or `import *`, through __all__) imports on demand.
__all__ = ["attention", "forms", "jvp", "tensor_train", "transfer", "tucker"]
