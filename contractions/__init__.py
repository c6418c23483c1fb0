"""grouped-einsum: an einsum whose UPPERCASE letters are groups of zero or more axes.

>>> import numpy as np
>>> from contractions import contract
>>> x = np.ones((4, 2, 3)); cores = np.ones((2, 3, 5, 6)); z = np.ones((4, 2, 5))
>>> contract('WCa,Caib,WCi->WCb', x, cores, z).shape   # W = (4,), C = (2,)
(4, 2, 6)

The pipeline, one module per stage: `parser` -> `solver` -> `expand` -> `plan` ->
`backends` (numpy / jax / torch), glued together in `api`.
"""

from .api import contract, expand_subscripts, explain
from .errors import (
    ContractionError,
    InconsistentError,
    OperandCountError,
    SizeMismatchError,
    SubscriptsSyntaxError,
    SupplementError,
    UnderdeterminedError,
)
from .expand import Expansion, expansion
from .parser import ParsedSubscripts, parse
from .plan import Plan, make_plan
from .solver import Identifiability, co_travelling_runs, identifiability, solve_lengths

__version__ = "0.1.0"

__all__ = [
    "contract",
    "explain",
    "expand_subscripts",
    "identifiability",
    "co_travelling_runs",
    "solve_lengths",
    "parse",
    "expansion",
    "make_plan",
    "Identifiability",
    "ParsedSubscripts",
    "Expansion",
    "Plan",
    "ContractionError",
    "SubscriptsSyntaxError",
    "UnderdeterminedError",
    "InconsistentError",
    "OperandCountError",
    "SizeMismatchError",
    "SupplementError",
    "__version__",
]
