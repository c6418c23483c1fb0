"""Make ``contract`` one node of a ``torch.compile`` graph, without importing torch.

Registered with ``torch.compiler.allow_in_graph``, ``contract`` is one call in Dynamo's graph
instead of a traced planner: planning happens once per shape signature at compile time and
Inductor sees the schedule's plain torch operations.  ``torch._dynamo`` costs seconds to
import, so the registration happens at once if it is already loaded, else from a one-shot
import hook that fires when something imports it (the hook imports nothing and removes itself).

>>> import sys
>>> install()            # idempotent; registers now if torch._dynamo is loaded
>>> ('torch._dynamo' in sys.modules) == registered()
True
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from typing import Any

__all__ = ["install", "register", "registered"]

_DYNAMO = "torch._dynamo"
_LOCK = threading.Lock()
_STATE = {"registered": False}


def registered() -> bool:
    """Whether ``contract`` (and friends) are registered with TorchDynamo."""
    return _STATE["registered"]


def register() -> None:
    """Register with the already-imported ``torch._dynamo`` (a no-op the second time)."""
    with _LOCK:
        if _STATE["registered"]:
            return
        api: Any = sys.modules.get("contractions.api")
        if api is None or sys.modules.get(_DYNAMO) is None:
            return
        torch = sys.modules["torch"]
        # contract: one graph node, traced through by AOTAutograd (its ops reach Inductor).
        torch.compiler.allow_in_graph(api.contract)
        # contract_expression(...)(...) inside a compiled function: the expression skips
        # planning while Dynamo traces it, and its __call__ forwards to contract.
        api._is_compiling = torch.compiler.is_compiling
        _STATE["registered"] = True


class _WhenDynamoLoads(importlib.abc.MetaPathFinder):
    """A finder that finds nothing itself: it wraps the real loader of ``torch._dynamo`` so
    that `register` runs right after that module has executed."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _DYNAMO:
            return None
        _remove_finder()
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            sys.modules.setdefault(_DYNAMO, module)
            try:
                register()
            except Exception:  # never break torch's own import; compile then traces us
                pass

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_FINDER = _WhenDynamoLoads()


def _remove_finder() -> None:
    try:
        sys.meta_path.remove(_FINDER)
    except ValueError:
        pass


def install() -> None:
    """Register now if ``torch._dynamo`` is loaded, else arm the one-shot import hook."""
    if sys.modules.get(_DYNAMO) is not None:
        _remove_finder()
        register()
    elif not _STATE["registered"] and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
