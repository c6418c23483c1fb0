"""The backend registry: which library owns an operand, and how to compile for it.

A backend is one module with two functions, ``compile(plan, schedule, options)`` returning a
callable and ``describe(plan, schedule, options)`` returning the lines ``explain`` prints, plus
one `Backend` entry here saying which operands it owns.  An entry names the framework module
that must already be imported (``sys.modules`` only: no framework is ever imported for a
caller who did not import it) and an ``owns(operand)`` test run only once that module is
loaded.  The answer is cached per operand type.  dev/internals.md ("Adding a backend") walks
through it.

>>> import numpy as np
>>> backend_for([np.ones(2), [1.0, 2.0]]).name
'numpy'
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.gpu_prices import CUPY_MODEL, TORCH_CUDA_MODEL  # pure Python: imports no framework
from ..model.torch_prices import TORCH_MODEL  # pure Python: imports no torch

__all__ = [
    "Backend",
    "BackendOptions",
    "backend_for",
    "backend_named",
    "load",
    "register_backend",
    "registered_backends",
]


@dataclass(frozen=True)
class BackendOptions:
    """Keyword options passed through to a backend (hashable when the values are)."""

    precision: Any = None
    preferred_element_type: Any = None


@dataclass(frozen=True)
class Backend:
    """One registry entry.

    ``framework``: the top-level module that must be in ``sys.modules`` before ``owns`` is
    asked (``None``: always available); ``owns(operand)``: does this backend run on it;
    ``module``: the import path of the module with ``compile`` and ``describe``.

    Capabilities, which the API reads instead of testing names: ``honours_memory_limit``
    (its schedules may be blocked; False: the framework plans its own buffers and the schedule
    is always unbounded), ``blocks_by_default`` (the default ``memory_limit='default'`` bounds
    it; False: only an explicit limit does), ``uses_einsum`` (False: it is handed a schedule
    without einsum steps, every step a matmul or a multiply), ``plans_own_path`` (True: with
    the default ``optimize`` the framework chooses the pairwise order itself and ``compile`` is
    called with ``schedule=None``; JAX, whose jitted programs XLA runs fastest that way),
    ``cost_model`` (the `model.protocol.CostModel` its schedules are planned with; None: numpy's.
    torch: `model.torch_prices.TORCH_MODEL`, which also decides whether a schedule runs as its
    steps or as one einsum call along a path; CuPy and torch on CUDA: `model.gpu_prices`' GPU
    models).
    ``einsum_along_path`` (its one einsum call of a direct schedule can follow a pairwise
    path: numpy one einsum call per pair, torch its C++ einsum's own path; a structure's first
    call may then run unplanned, `calls.tiers`).
    ``variant(operand)``: the entry that runs a call whose first operand of this backend is
    ``operand`` (None: this one; torch: its CUDA entry, priced for the GPU, for a tensor on a
    CUDA device); ``mixes_host_arrays`` (False: a numpy array or list among its operands is
    refused rather than copied to the device; numpy scalars and Python numbers still mix in).
    """

    name: str
    framework: str | None
    owns: Callable[[Any], bool]
    module: str
    honours_memory_limit: bool = True
    blocks_by_default: bool = False
    uses_einsum: bool = True
    plans_own_path: bool = False
    cost_model: Any = None
    variant: Callable[[Any], Backend] | None = None
    mixes_host_arrays: bool = True
    einsum_along_path: bool = False


def _is_jax(op: Any) -> bool:
    return isinstance(op, sys.modules["jax"].Array)  # tracers included (an instance check)


def _is_torch(op: Any) -> bool:
    return isinstance(op, sys.modules["torch"].Tensor)


def _is_cupy(op: Any) -> bool:
    return isinstance(op, sys.modules["cupy"].ndarray)


def _torch_on_device(op: Any) -> Backend:
    # `is_cuda` is a plain attribute read; a tensor elsewhere (CPU, meta, a wrapper without
    # it) keeps the CPU-priced entry
    return _TORCH_CUDA if getattr(op, "is_cuda", False) is True else _TORCH


def _is_dask(op: Any) -> bool:
    array = sys.modules.get("dask.array")  # no dask array exists before dask.array is imported
    return array is not None and isinstance(op, array.Array)


# What a namespace must offer for the Array API backend to run a schedule on it.
_ARRAY_API_FUNCTIONS = ("asarray", "astype", "matmul", "multiply", "permute_dims", "reshape",
                        "result_type", "sum")


def _array_namespace(op: Any) -> Any:
    """``op``'s Array API namespace, or None (no namespace, or it raised)."""
    if not hasattr(type(op), "__array_namespace__"):
        return None
    try:
        return op.__array_namespace__()
    except Exception:
        return None


def _is_array_api(op: Any) -> bool:
    # Asked after jax, torch and dask, so their arrays keep their dedicated backends.
    namespace = _array_namespace(op)
    if namespace is None or getattr(namespace, "__name__", "").partition(".")[0] == "numpy":
        return False
    linalg = getattr(namespace, "linalg", None)
    return (all(callable(getattr(namespace, f, None)) for f in _ARRAY_API_FUNCTIONS)
            and callable(getattr(linalg, "diagonal", None)))


# Blocks are written in place, which torch.vmap cannot batch: only an explicit limit blocks.
# Priced for torch: one torch.einsum call along a path, or the steps (model/torch_prices.py); on
# a CUDA device for the GPU (model/gpu_prices.py), whose steps are never einsum calls.
_TORCH = Backend("torch", "torch", _is_torch, "contractions.backends.torch_backend",
                 cost_model=TORCH_MODEL, variant=_torch_on_device, einsum_along_path=True)
_TORCH_CUDA = Backend("torch", "torch", _is_torch, "contractions.backends.torch_backend",
                      cost_model=TORCH_CUDA_MODEL, uses_einsum=False)

_REGISTRY: list[Backend] = [
    # XLA plans its own buffers: only the path is taken, never blocks.
    Backend("jax", "jax", _is_jax, "contractions.backends.jax_backend", honours_memory_limit=False,
            plans_own_path=True),
    _TORCH,
    # CuPy: the schedule on the device (cupy.matmul, CuPy's own functions), priced for the GPU;
    # its steps are matmuls and multiplies, or the whole call one cupy.einsum along a path.
    # Host arrays are refused, never copied to the device; only an explicit limit blocks.
    Backend("cupy", "cupy", _is_cupy, "contractions.backends.cupy_backend", uses_einsum=False,
            cost_model=CUPY_MODEL, mixes_host_arrays=False),
    # dask bounds each of its blocks itself (numpy's default per block).
    Backend("dask", "dask", _is_dask, "contractions.backends.dask_backend"),
    # Any other library implementing the Array API standard (array-api-strict, CuPy, ...).
    Backend("array_api", None, _is_array_api, "contractions.backends.array_api_backend",
            uses_einsum=False),
]
_NUMPY = Backend("numpy", None, lambda op: isinstance(op, np.ndarray),
                 "contractions.backends.numpy_backend", blocks_by_default=True, einsum_along_path=True)
_BY_TYPE: dict[type, Backend | None] = {np.ndarray: _NUMPY}
_LOCK = threading.Lock()


def register_backend(backend: Backend) -> None:
    """Add (or replace, by name) a backend; it is asked before the built-in ones."""
    with _LOCK:
        _REGISTRY[:] = [backend] + [b for b in _REGISTRY if b.name != backend.name]
        _BY_TYPE.clear()
        _BY_TYPE[np.ndarray] = _NUMPY


def registered_backends() -> tuple[Backend, ...]:
    """Every backend, numpy last (it takes whatever no other backend owns); a backend's
    `Backend.variant` entries are not listed (they share its name)."""
    return (*_REGISTRY, _NUMPY)


def backend_named(name: str) -> Backend:
    """The backend called ``name`` (``'numpy'``, ``'jax'``, ``'torch'``, ...)."""
    for backend in registered_backends():
        if backend.name == name:
            return backend
    known = ", ".join(b.name for b in registered_backends())
    raise ValueError(f"no backend named {name!r}; registered: {known}")


def _owner(op: Any) -> Backend | None:
    kind = type(op)
    try:
        return _BY_TYPE[kind]
    except KeyError:
        pass
    found = None
    for backend in _REGISTRY:
        # .get: sys.modules[name] = None is how a module is blocked; it is not loaded then
        if backend.framework is None or sys.modules.get(backend.framework) is not None:
            if backend.owns(op):
                found = backend
                break
    if found is not None or not _maybe_foreign(op):
        _BY_TYPE[kind] = found  # a type's answer never changes once its library is loaded
    return found


def _maybe_foreign(op: Any) -> bool:
    """An array of a library that may be lazy or device-resident (never silently converted)."""
    root = type(op).__module__.partition(".")[0]
    if root in ("dask", "cupy") or hasattr(op, "__dask_graph__"):
        return True
    if hasattr(type(op), "__array_namespace__"):
        try:
            namespace = op.__array_namespace__()
        except Exception:
            return True
        return getattr(namespace, "__name__", "").partition(".")[0] != "numpy"
    return False


def _supported() -> str:
    return "numpy arrays (and lists, tuples, scalars), " + ", ".join(
        f"{b.name} arrays" for b in _REGISTRY)


def backend_for(operands: Sequence[Any]) -> Backend:
    """The backend that runs a call on ``operands``.

    numpy arrays, Python scalars and nested lists go with any backend (numpy when alone) but
    one that declares ``mixes_host_arrays=False`` (CuPy: there only scalars do).  An
    operand that is lazy or lives on a device and that no backend owns (a dask collection that
    is not a dask array, a namespace lacking a function the Array API backend needs) is refused
    with `TypeError`, never converted; so are operands of two different libraries in one call
    (two Array API libraries included), and the message names both.  The entry returned is
    the backend's `Backend.variant` for its first operand (torch on CUDA: the GPU-priced one).
    """
    found: Backend | None = None
    first = 0
    for k, op in enumerate(operands):
        owner = _owner(op)
        if owner is None or owner is _NUMPY:
            if owner is None and _maybe_foreign(op):
                raise TypeError(
                    f"operand {k} is a {type(op).__module__}.{type(op).__qualname__}, which no "
                    f"backend runs and which is not converted to numpy behind your back (it may "
                    f"be lazy or on a device); supported: {_supported()}")
            continue
        if found is None:
            found, first = owner, k
        elif owner is not found or _library(op, owner) != _library(operands[first], found):
            # Two Array API libraries share one backend: compare the libraries, not backends.
            a, b = operands[first], op
            raise TypeError(
                f"operands mix {_library(a, found)} and {_library(b, owner)} arrays (operand "
                f"{first} is a {type(a).__module__}.{type(a).__qualname__}, operand {k} a "
                f"{type(b).__module__}.{type(b).__qualname__}); convert them to one library first")
    if found is None:
        return _NUMPY
    if not found.mixes_host_arrays:
        _refuse_host_arrays(operands, found, first)
    return found if found.variant is None else found.variant(operands[first])


def _refuse_host_arrays(operands: Sequence[Any], backend: Backend, first: int) -> None:
    for k, op in enumerate(operands):
        if isinstance(op, (np.ndarray, list, tuple)):
            what = "numpy array" if isinstance(op, np.ndarray) else type(op).__name__
            raise TypeError(
                f"operand {k} is a {what} but operand {first} is a {backend.name} array; a host "
                f"array is not copied to the device behind your back: pass {backend.name}."
                f"asarray(operand {k}) (or contract on the host, with .get() on the "
                f"{backend.name} arrays); numpy scalars and Python numbers mix in as they are")


def _library(op: Any, backend: Backend) -> str:
    """The library an operand belongs to, as an error message names it."""
    if backend.owns is _is_array_api:
        namespace = _array_namespace(op)
        return str(getattr(namespace, "__name__", type(op).__module__.partition(".")[0]))
    return backend.name


_MODULES: dict[str, Any] = {}


def load(backend: Backend) -> Any:
    """The backend's module (imported on first use; its framework is already loaded)."""
    module = _MODULES.get(backend.module)
    if module is None:
        module = _MODULES[backend.module] = importlib.import_module(backend.module)
    return module
