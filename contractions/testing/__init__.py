"""The evidence harness (SPEC §6), public so downstream projects can adopt it.

Everything here is fed by an AST scan of source trees, so a grouped string is covered the
moment it is written:

- `scan_vocabulary`, `scan_call_sites` (`contractions.testing.scan`): what the code says;
- `loop_contract`, `co_travelling_runs` (`contractions.testing.oracle`): SPEC §1/§2 read
  literally, sharing no mechanism with the library;
- `load_table` (`contractions.testing.table`): the hand-decided identifiability table;
- `count_hlo_opcodes` and the sharding sweep (`contractions.testing.sharding`);
- the five pytest suites (`contractions.testing.suites`) and the plugin that configures them
  (`contractions.testing.plugin`). See docs/harness.md for adoption.

This package imports neither pytest nor jax at import time.
"""

from .oracle import co_travelling_runs, loop_contract, operand_shapes, split_terms
from .scan import (
    CallSite,
    ScanError,
    VocabularyEntry,
    is_grouped_subscripts,
    normalize_subscripts,
    scan_call_sites,
    scan_vocabulary,
)
from .sharding import FORBIDDEN_OPCODES, count_hlo_opcodes
from .table import IdentifiabilityTable, TableEntry, TableError, load_table, parse_table

__all__ = [
    "FORBIDDEN_OPCODES",
    "CallSite",
    "IdentifiabilityTable",
    "ScanError",
    "TableEntry",
    "TableError",
    "VocabularyEntry",
    "co_travelling_runs",
    "count_hlo_opcodes",
    "is_grouped_subscripts",
    "load_table",
    "loop_contract",
    "normalize_subscripts",
    "operand_shapes",
    "parse_table",
    "scan_call_sites",
    "scan_vocabulary",
    "split_terms",
]
