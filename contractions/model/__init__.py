"""The time models' home: the prices (`profile`), the protocol the schedule asks (`protocol`),
numpy's model (`numpy_prices`), the matmul layout search (`layout`), host probing (`host`) and
the measuring of a profile (`calibrate`, imported on demand by ``contractions calibrate``).

Modules in data-flow order: host, profile, protocol, numpy_prices, layout, calibrate.
"""

from .layout import MatmulFactor, MatmulLayout, best_matmul_layout
from .numpy_prices import NUMPY_MODEL, NumpyCostModel
from .profile import Profile, ProfileWarning, active_profile, load_profile, save_profile
from .protocol import Access, CostModel, size_of

__all__ = ["NUMPY_MODEL", "Access", "CostModel", "MatmulFactor", "MatmulLayout", "NumpyCostModel",
           "Profile", "ProfileWarning", "active_profile", "best_matmul_layout", "load_profile",
           "save_profile", "size_of"]
