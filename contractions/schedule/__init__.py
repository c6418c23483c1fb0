"""Stage 5 of the pipeline: turn a `Plan` into a `Schedule`, the execution as frozen data.

A schedule says exactly what runs, with no arrays involved:

* ``strategy == 'direct'``: one einsum call on ``einsum`` (small problems, where Python
  overhead would dominate a pairwise run), or with ``along_path`` one einsum call per pair
  of ``path`` (`path_einsums`: a structure's first call, nothing else planned);
* ``strategy == 'pairwise'``: per operand a `Preparation` (drop size-1 axes, take diagonals,
  sum the axes no one else needs), then the pairwise `Step` list in opt_einsum's path order
  (each a batched ``matmul``, a broadcast ``multiply`` or a small relabelled ``einsum``, with
  the views it needs and its modelled cost), then the `Finish` (final permutation/reshape).

Backends *compile* a schedule (``contractions.backends``); they never re-derive extents,
letters or paths.  ``path`` is the pairwise order in opt_einsum's list-of-pairs form: it can
be passed back as ``optimize=`` and is what the JAX backend hands to ``jnp.einsum``.

>>> from contractions.plan import make_plan
>>> plan = make_plan('WCa,Caib,WCi->WCb', ((40, 2, 30), (2, 30, 50, 60), (40, 2, 50)), ())
>>> from contractions.model import NumpyCostModel, Profile
>>> s = make_schedule(plan, cost_model=NumpyCostModel(Profile()))   # at the built-in prices
>>> s.strategy, s.path, [step.kernel for step in s.steps]
('pairwise', ((1, 2), (0, 1)), ['matmul', 'matmul'])
"""

from ..model.numpy_prices import NUMPY_MODEL
from ..model.protocol import CostModel
from .blocking import MAX_BLOCKS, make_schedule, schedule_labels
from .describe import ExplainedGroup, ExplainedStep, Explanation, FirstCall, explained_steps
from .describe import describe_schedule as describe_schedule
from .ir import CONVERTED, EINSUM_LETTERS, FORTRAN, STRIDED, Finish, Preparation, Schedule, Step, View
from .ir import Blocking as Blocking
from .lowering import DIRECT_MAX_OPERANDS, framework_path_peak, path_einsums
from .memory import DEFAULT_LIMIT_FLOOR as DEFAULT_LIMIT_FLOOR
from .memory import scratch_sites as scratch_sites
from .memory import step_tokens as step_tokens
from .paths import _checked_path as _checked_path
from .paths import normalise_optimize

__all__ = [
    "CONVERTED",
    "FORTRAN",
    "MAX_BLOCKS",
    "NUMPY_MODEL",
    "STRIDED",
    "CostModel",
    "DIRECT_MAX_OPERANDS",
    "EINSUM_LETTERS",
    "ExplainedGroup",
    "ExplainedStep",
    "Explanation",
    "FirstCall",
    "explained_steps",
    "framework_path_peak",
    "Finish",
    "Preparation",
    "Schedule",
    "Step",
    "View",
    "make_schedule",
    "normalise_optimize",
    "path_einsums",
    "schedule_labels",
]
