"""The former home of the time model, kept as an import path: everything here now lives in
`contractions.model` (the prices in `contractions.model.profile`, the protocol in
`contractions.model.protocol`, numpy's model in `contractions.model.numpy_prices`, the layout
search in `contractions.model.layout`).  It holds no prices.
"""

from .model.layout import (
    MatmulFactor,
    MatmulLayout,
    best_matmul_layout,
    factor_memory_ns,
    factor_order,
    factor_read_ns,
)
from .model.numpy_prices import (
    NUMPY_MODEL,
    NumpyCostModel,
    access_pattern,
    direct_ns,
    einsum_read_ns,
    einsum_step_ns,
    einsum_walk,
    fresh_buffer_ns,
    gather_passes,
    matmul_ns,
    thread_speedup,
)
from .model.protocol import Access, CostModel, size_of

__all__ = ["NUMPY_MODEL", "Access", "CostModel", "MatmulFactor", "MatmulLayout", "NumpyCostModel",
           "access_pattern", "best_matmul_layout", "direct_ns", "einsum_read_ns", "einsum_step_ns",
           "einsum_walk", "factor_memory_ns", "factor_order", "factor_read_ns", "fresh_buffer_ns",
           "gather_passes", "matmul_ns", "size_of", "thread_speedup"]
