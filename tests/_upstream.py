"""numpy's and opt_einsum's own einsum test suites, run against `contract` (a pytest plugin).

The thin wrapper a user switching libraries would write: in numpy's ``test_einsum.py`` the
module's ``np`` is numpy with ``einsum`` replaced by `contract`; in opt_einsum's test modules the
names ``contract``, ``contract_expression`` and ``contract_path`` (and ``oe.*`` of the same
names) are this library's.  numpy itself, opt_einsum's internals and the references the suites
compare with (``np.einsum`` in opt_einsum's tests) are left alone.

Used by ``tests/test_dropin_upstream.py`` as ``python -m pytest -p tests._upstream --pyargs
numpy._core.tests.test_einsum`` (or ``opt_einsum.tests``) in a subprocess.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import opt_einsum
import pytest

import contractions

_OURS = {"contract": contractions.contract, "contract_expression": contractions.contract_expression,
         "contract_path": contractions.contract_path}


class _Proxy(types.ModuleType):
    """A module that is ``module`` except for the names in ``replaced``."""

    def __init__(self, module: types.ModuleType, replaced: dict[str, Any]) -> None:
        super().__init__(module.__name__, module.__doc__)
        self.__dict__.update(replaced)
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


NUMPY = _Proxy(np, {"einsum": contractions.contract})
OPT_EINSUM = _Proxy(opt_einsum, _OURS)


def _patch(module: types.ModuleType) -> None:
    name = module.__name__
    if name.endswith("test_einsum") and getattr(module, "np", None) is np:
        module.np = NUMPY  # type: ignore[attr-defined]
    elif name.startswith("opt_einsum.tests."):
        for attr, ours in _OURS.items():
            if attr in vars(module):
                setattr(module, attr, ours)
        if vars(module).get("oe") is opt_einsum:
            module.oe = OPT_EINSUM  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    # The module is imported while it is collected; values its decorators capture at import
    # (numpy's ``parametrize("einsum_fn", [np.einsum, ...])``) must already be ours.
    if isinstance(collector, pytest.Module):
        saved = {"einsum": np.einsum}
        np.einsum = contractions.contract  # type: ignore[assignment]
        saved_oe = {attr: getattr(opt_einsum, attr) for attr in _OURS}
        for attr, ours in _OURS.items():
            setattr(opt_einsum, attr, ours)
        try:
            yield
        finally:
            np.einsum = saved["einsum"]  # type: ignore[assignment]
            for attr, theirs in saved_oe.items():
                setattr(opt_einsum, attr, theirs)
        module = getattr(collector, "_obj", None)
        if module is not None:
            _patch(module)
        return
    yield
