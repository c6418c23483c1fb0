"""grouped-einsum: an einsum whose UPPERCASE letters are groups of zero or more axes.

>>> import numpy as np
>>> from contractions import contract
>>> x = np.ones((4, 2, 3)); cores = np.ones((2, 3, 5, 6)); z = np.ones((4, 2, 5))
>>> contract('WCa,Caib,WCi->WCb', x, cores, z).shape   # W = (4,), C = (2,)
(4, 2, 6)

The pipeline, one module per stage: `parser` -> `solver` -> `expand` -> `plan` ->
`schedule` -> `backends` (numpy / jax / torch, looked up in a registry), and `api` on top.
"""

from opt_einsum.contract import PathInfo

from ._version import __version__
from .api import contract
from .backends.scratch import ScratchInfo, clear_scratch, scratch_info, scratch_limit
from .errors import (
    ContractionError,
    InconsistentError,
    KeywordError,
    MemoryLimitError,
    OperandCountError,
    OptionError,
    PathError,
    SizeMismatchError,
    SubscriptsSyntaxError,
    SupplementError,
    UnderdeterminedError,
)
from .expand import Expansion, expansion
from .explaining import expand_subscripts, explain, explanation
from .expressions import ContractExpression, contract_expression, contract_path
from .parser import ParsedSubscripts, parse
from .plan import Plan, make_plan
from .plotting import ExplanationText
from .schedule import Explanation, Schedule, make_schedule
from .solver import Identifiability, co_travelling_runs, identifiability, solve_lengths

__all__ = [
    "contract",
    "contract_expression",
    "contract_path",
    "PathInfo",
    "ContractExpression",
    "explain",
    "ExplanationText",
    "explanation",
    "Explanation",
    "expand_subscripts",
    "identifiability",
    "co_travelling_runs",
    "solve_lengths",
    "parse",
    "expansion",
    "make_plan",
    "make_schedule",
    "Schedule",
    "Identifiability",
    "ParsedSubscripts",
    "Expansion",
    "Plan",
    "ContractionError",
    "SubscriptsSyntaxError",
    "UnderdeterminedError",
    "InconsistentError",
    "OperandCountError",
    "KeywordError",
    "PathError",
    "SizeMismatchError",
    "SupplementError",
    "MemoryLimitError",
    "OptionError",
    "scratch_limit",
    "scratch_info",
    "clear_scratch",
    "ScratchInfo",
    "__version__",
]
