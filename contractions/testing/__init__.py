"""The evidence harness, public so downstream projects can adopt it (docs/harness.md).

Everything here is fed by an AST scan of source trees, so a grouped string is covered the
moment it is written:

- `scan_tree`, `scan_vocabulary`, `scan_call_sites` (`contractions.testing.scan`): what the code
  says;
- `loop_contract`, `runs_by_definition` (`contractions.testing.oracle`): the dialect's meaning
  and the co-travelling-run definition read literally, sharing no mechanism with the library;
- `load_table` (`contractions.testing.table`): the hand-decided identifiability table;
- `count_hlo_opcodes` and the sharding sweep (`contractions.testing.sharding`);
- the pytest suites (`contractions.testing.suites`, wired up by
  `contractions.testing.collection`) and the opt-in plugin that configures them
  (`contractions.testing.plugin`).

The names below are loaded on first use, so importing one submodule (the engine's linter
imports only `contractions.testing.scan`) loads nothing else: no numpy, pytest or jax. The
harness uses only the public API of `contractions`.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the submodule defining it
_EXPORTS = {
    "loop_contract": "oracle",
    "operand_shapes": "oracle",
    "runs_by_definition": "oracle",
    "split_terms": "oracle",
    "CallSite": "scan",
    "Finding": "scan",
    "ScanError": "scan",
    "ScanReport": "scan",
    "VocabularyEntry": "scan",
    "is_grouped_subscripts": "scan",
    "normalize_subscripts": "scan",
    "scan_tree": "scan",
    "scan_call_sites": "scan",
    "scan_vocabulary": "scan",
    "FORBIDDEN_OPCODES": "sharding",
    "count_hlo_opcodes": "sharding",
    "IdentifiabilityTable": "table",
    "TableEntry": "table",
    "TableError": "table",
    "load_table": "table",
    "parse_table": "table",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
