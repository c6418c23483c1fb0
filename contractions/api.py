"""The public verbs: `contract`, `contract_expression`, `explain`, `expand_subscripts`.

This is the last stage: parse -> solve -> expand -> plan -> schedule -> backend, looked up in
caches keyed on ``(subscripts, shapes, supplements, optimize)``, so a warm call is one
dictionary lookup plus the arithmetic.

>>> import numpy as np
>>> x = np.ones((4, 2, 3)); cores = np.ones((2, 3, 5, 6)); z = np.ones((4, 2, 5))
>>> contract('WCa,Caib,WCi->WCb', x, cores, z).shape
(4, 2, 6)
>>> expr = contract_expression('WCa,Caib,WCi->WCb', x.shape, cores.shape, z.shape)
>>> expr(x, cores, z).shape, expr.output_shape
((4, 2, 6), (4, 2, 6))
"""

from __future__ import annotations

import decimal
import inspect
import math
import operator
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import numpy as np

from .arguments import normalise_supplements
from .backends import Backend, BackendOptions, backend_for, backend_named, load
from .caching import byte_bounded_cache, shapes_key_weight, weight
from .compat import (
    Casting,
    apply_order,
    backend_name,
    check_expression_keywords,
    check_numpy_options,
    evaluated_constants,
    from_library,
    from_sublists,
    numpy_optimize,
    out_casting,
    path_info,
    to_library,
)
from .errors import ContractionError, OperandCountError, OptionError, SizeMismatchError, quoted
from .expand import ellipsis_ranks, expand
from .model.numpy_prices import NUMPY_MODEL
from .parser import parse
from .plan import PLAN_CACHE_SIZE, Plan, make_plan
from .schedule import (
    CONVERTED,
    FORTRAN,
    STRIDED,
    ExplainedGroup,
    Explanation,
    FirstCall,
    Schedule,
    _checked_path,
    explained_steps,
    make_schedule,
    normalise_optimize,
)
from .schedule.tiers import first_schedule, remember_full
from .solver import identifiability, solve_call

if TYPE_CHECKING:
    from numpy.typing import NDArray


class _Array(Protocol):
    """What every supported array type has (for the typed overloads of `contract`)."""

    @property
    def shape(self) -> Any: ...
    @property
    def dtype(self) -> Any: ...


_ArrayT = TypeVar("_ArrayT", bound=_Array)
# Every overload takes its operands as a type variable, so that for an operand whose type holds
# Any (``x: np.ndarray`` is ``ndarray[Any, dtype[Any]]``) each overload's operand type is that
# same type, and mypy takes the first overload that matches rather than Any for ambiguity.
_NumpyT = TypeVar("_NumpyT", bound="NDArray[Any] | np.generic")
_AnyT = TypeVar("_AnyT")

__all__ = ["ContractExpression", "contract", "contract_expression", "contract_path", "explain", "explanation",
           "expand_subscripts"]

_ndarray = np.ndarray
_NUMPY = backend_named("numpy")
_DEFAULT_OPTIONS = BackendOptions()


# ------------------------------------------------------------------------------ operands
_REFUSED = (str, bytes, dict, set, frozenset, types.GeneratorType)


def _as_operands(operands: Sequence[Any], backend: Backend) -> tuple[Any, ...]:
    """Operands the backend can take: lists, tuples and scalars become numpy arrays.

    Anything else that is not an array (``None``, strings, dicts, generators, arbitrary
    objects) is a `TypeError` naming its position, raised before any arithmetic.
    """
    out = []
    for k, op in enumerate(operands):
        if type(op) is _ndarray or (backend.name != "numpy" and backend.owns(op)):
            out.append(op)
            continue
        if op is None or isinstance(op, _REFUSED) or not (
                isinstance(op, (list, tuple, int, float, complex, np.generic, np.ndarray))
                or hasattr(op, "__array__") or hasattr(op, "__array_interface__")):
            raise TypeError(
                f"operand {k} is {type(op).__name__} ({_short_repr(op)}), not an array; pass "
                "arrays (numpy, JAX, torch, dask or an Array API library) or nested lists/tuples "
                "of numbers")
        try:
            out.append(np.asarray(op))
        except ValueError as exc:  # ragged nesting, among others
            raise ContractionError(
                f"operand {k} cannot be made an array ({exc}); nested lists must be "
                "rectangular (every row the same length)") from None
    return tuple(out)


def _short_repr(op: Any) -> str:
    text = repr(op)
    return text if len(text) <= 40 else text[:37] + "..."


# ---------------------------------------------------------------------------- the caches
# Every cache keyed on the caller's subscripts is bounded by bytes as well as entries
# (contractions/caching.py), so many distinct long strings cannot pile up in memory; the hot
# dicts keep only strings up to HOT_KEY_MAX_CHARS (longer ones are served by these caches).
CACHE_BYTES = 64 * 2**20
HOT_KEY_MAX_CHARS = 4096


def _planned(subscripts: str, shapes: tuple[tuple[int, ...], ...],
             supplements: tuple[tuple[str, int], ...], optimize: Any,
             limit: Any = "default", layouts: tuple[int, ...] | None = None,
             use_einsum: bool = True, cost_model: Any = None) -> tuple[Plan, Schedule]:
    """The plan and schedule, cached once per problem however many defaults a caller spells
    out (a `contract_expression` and its numpy program share one entry, so `make_schedule`'s
    own work, such as cache-sized blocking, runs once per shape)."""
    return _planned_once(subscripts, shapes, supplements, optimize, limit, layouts, use_einsum,
                         cost_model or NUMPY_MODEL)


@byte_bounded_cache(maxsize=PLAN_CACHE_SIZE, maxbytes=CACHE_BYTES, weigh_results=False)
def _planned_once(subscripts: str, shapes: tuple[tuple[int, ...], ...],
                  supplements: tuple[tuple[str, int], ...], optimize: Any, limit: Any,
                  layouts: tuple[int, ...] | None, use_einsum: bool,
                  cost_model: Any) -> tuple[Plan, Schedule]:
    plan = make_plan(subscripts, shapes, supplements)
    return plan, make_schedule(plan, optimize, use_einsum=use_einsum, memory_limit=limit,
                               layouts=layouts, cost_model=cost_model)


def _compile(backend: Backend, subscripts: str, shapes: tuple[tuple[int, ...], ...],
             supplements: tuple[tuple[str, int], ...], optimize: Any,
             options: BackendOptions, limit: Any = "default",
             layouts: tuple[int, ...] | None = None, tiered: bool = False) -> Callable[..., Any]:
    """The runner: plan (in a cheap tier when ``tiered``: `schedule.tiers`), compile, and wrap
    it for other operand layouts (numpy) and for the full search to come (a cheap tier)."""
    module = load(backend)
    if _framework_path(backend, optimize):
        # The framework picks the path itself (JAX: jnp.einsum's own 'auto', which XLA runs
        # fastest); no schedule is built, so a new shape costs only parse/solve/expand/plan.
        return module.compile(make_plan(subscripts, shapes, supplements), None, options)
    upgrade_after = 0
    if tiered:
        plan = make_plan(subscripts, shapes, supplements)
        first = first_schedule(plan, optimize, backend.uses_einsum, limit, layouts,
                               backend.cost_model or NUMPY_MODEL)
        schedule, upgrade_after = first.schedule, first.upgrade_after
    else:
        plan, schedule = _planned(subscripts, shapes, supplements, optimize, limit, layouts,
                                  backend.uses_einsum, backend.cost_model)
        remember_full(plan, schedule, optimize, backend.uses_einsum, layouts,
                      backend.cost_model or NUMPY_MODEL)
    run = module.compile(plan, schedule, options)
    if layouts is None and backend is _NUMPY and _layout_matters(schedule):
        run = _guarded(run, backend, subscripts, shapes, supplements, optimize, options, limit)
    if upgrade_after:
        def full() -> Callable[..., Any]:
            return _runner(backend, subscripts, shapes, supplements, optimize, options, limit,
                           layouts, tiered=False)
        return _Provisional(run, upgrade_after, full)
    return run


class _Provisional:
    """A cheap tier's runner (`schedule.tiers`): it counts the calls of its shape and, on the
    ``upgrade_after``-th, runs the full search and hands the full runner to the hot dicts that
    hold this one (so later calls reach it directly)."""

    __slots__ = ("run", "calls", "upgrade_after", "full", "homes")

    def __init__(self, run: Callable[..., Any], upgrade_after: int,
                 full: Callable[[], Callable[..., Any]]) -> None:
        self.run, self.calls, self.upgrade_after, self.full = run, 0, upgrade_after, full
        self.homes: list[tuple[dict[Any, Any], Any]] = []

    def __call__(self, *arrays: Any) -> Any:
        self.calls += 1
        if self.calls == self.upgrade_after:
            self.run = self.full()
            for home, key in self.homes:
                if home.get(key) is self:
                    home[key] = self.run
            self.homes = []
        return self.run(*arrays)


def _framework_path(backend: Backend, optimize: Any) -> bool:
    """Does this backend take the default ``optimize`` as "let the framework choose"?"""
    return backend.plans_own_path and isinstance(optimize, str) and optimize == "auto"


def _caller_parts(args: tuple[Any, ...]) -> int:
    """The weight of `_compile`'s arguments that come from the caller (the subscripts, shapes,
    supplements, optimize= and layouts); the backend entry and options are shared."""
    return shapes_key_weight(args[1:5]) + weight(args[7])


_compiled = byte_bounded_cache(maxsize=PLAN_CACHE_SIZE, maxbytes=CACHE_BYTES,
                               weigh_results=False, weigh_args=_caller_parts)(_compile)


def _layout_matters(schedule: Schedule) -> bool:
    """Does this schedule (planned for C-contiguous operands of one dtype) run differently on
    other layouts?  A pairwise run does: a Fortran operand is read through its transpose
    instead of copied, and a strided or converted one is copied where the schedule counts it
    (so the call allocates what ``explain`` says, and blocks if the copies would break the
    limit).  One einsum call reads any strides itself."""
    return schedule.strategy == "pairwise"


def _guarded(run: Callable[..., Any], backend: Backend, subscripts: str,
             shapes: tuple[tuple[int, ...], ...], supplements: tuple[tuple[str, int], ...],
             optimize: Any, options: BackendOptions, limit: Any) -> Callable[..., Any]:
    """``run`` for C-contiguous operands of one dtype; any other operands are re-planned with
    their layouts (so the copies they need are counted, and blocked if need be)."""
    target = options.preferred_element_type

    def guarded(*arrays: Any) -> Any:
        dtype = arrays[0].dtype if target is None else target
        for a in arrays:
            if a.dtype != dtype or not a.flags.c_contiguous:
                layouts = _layouts_of(arrays, options)
                return _runner(backend, subscripts, shapes, supplements, optimize, options, limit,
                               layouts, tiered=True)(*arrays)
        return run(*arrays)

    return guarded


def _layouts_of(arrays: Sequence[Any], options: BackendOptions) -> tuple[int, ...] | None:
    """`Schedule.layouts` for numpy operands: which are strided, which are converted."""
    if not arrays or not all(type(a) is _ndarray for a in arrays):
        return None
    target = options.preferred_element_type
    dtype = np.dtype(target) if target is not None else np.result_type(*arrays)
    codes = tuple((0 if a.flags.c_contiguous else FORTRAN if a.flags.f_contiguous else STRIDED)
                  | (CONVERTED if a.dtype != dtype else 0) for a in arrays)
    return codes if any(codes) else None


def _runner(backend: Backend, subscripts: str, shapes: tuple[tuple[int, ...], ...],
            supplements: tuple[tuple[str, int], ...], optimize: Any,
            options: BackendOptions, limit: Any = "default",
            layouts: tuple[int, ...] | None = None, tiered: bool = False) -> Callable[..., Any]:
    """The cached runner of a call (``tiered``: a call of `contract`'s own, planned in the
    cheapest sound tier; else the full search, as for `contract_expression`)."""
    limit = _backend_limit(backend, limit)
    if backend is not _NUMPY:
        layouts = None
    try:
        return _compiled(backend, subscripts, shapes, supplements, optimize, options, limit, layouts,
                         tiered)
    except TypeError as exc:
        if "unhashable" not in str(exc):
            raise
    # An unhashable option (a list as precision, say): plan through the caches, compile afresh.
    return _compile(backend, subscripts, shapes, supplements, optimize, options, limit, layouts,
                    tiered)


def _backend_limit(backend: Backend, limit: Any) -> Any:
    """The memory limit a backend's schedule honours, from its declared capabilities: none
    where the framework plans its own buffers (JAX); ``'default'`` only where the backend
    blocks by default (numpy), else only an explicit limit (torch: an unbounded call is one
    einsum or a few kernels, which torch.compile and torch.vmap see whole; dask bounds each of
    its blocks itself)."""
    if not backend.honours_memory_limit or (limit == "default" and not backend.blocks_by_default):
        return None
    return limit


_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def normalise_memory_limit(memory_limit: Any, itemsize: int = 8) -> Any:
    """``memory_limit=`` as the schedule takes it: None, ``'default'``, ``'max_input'`` or a
    number of elements.  Strings with a byte unit (``'64MB'``, ``'1.5GiB'``) are divided by
    ``itemsize`` (the result dtype's; 8 when shapes alone are known).  A value of the wrong
    type is a `TypeError`; a number that is not a positive finite whole number of elements (or
    a string that is not a size) an `OptionError`.

    >>> normalise_memory_limit('1MiB'), normalise_memory_limit(10**6), normalise_memory_limit(None)
    (131072, 1000000, None)
    """
    if memory_limit is None or (isinstance(memory_limit, str) and memory_limit in ("default", "max_input")):
        return memory_limit
    hint = "write a number of elements, a size such as '64MB' or '1GiB', 'default', 'max_input' or None"
    if isinstance(memory_limit, bool) or type(memory_limit).__name__ == "bool_":
        raise TypeError(f"memory_limit must be a number of elements, a size like '64MB', "
                        f"'default', 'max_input' or None, not a bool ({memory_limit!r})")
    if isinstance(memory_limit, str):
        import re

        found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([kmg]i?b|b)\s*", memory_limit.lower())
        if not found:
            raise OptionError(f"memory_limit={_short_repr(memory_limit)}: {hint}")
        size = float(found.group(1)) * _UNITS[found.group(2)] / itemsize
        if not math.isfinite(size):
            raise OptionError(f"memory_limit={_short_repr(memory_limit)} is too large to be a size; {hint}")
        elements = int(size)
    else:
        try:
            elements = operator.index(memory_limit)
        except TypeError:
            if not isinstance(memory_limit, (float, np.floating, decimal.Decimal)):  # PathInfo's sizes
                raise TypeError(f"memory_limit must be a number of elements or a size string, not "
                                f"{type(memory_limit).__name__}; {hint}") from None
            if not math.isfinite(memory_limit):
                raise OptionError(f"memory_limit={memory_limit!r} is not a finite number of elements; "
                                  "pass None for no limit") from None
            if memory_limit != int(memory_limit):
                raise OptionError(f"memory_limit={memory_limit!r} is not a whole number of elements; "
                                  f"{hint} (None for no limit)") from None
            elements = int(memory_limit)
    if elements < 1:
        raise OptionError(f"memory_limit={_short_repr(memory_limit)} must be at least one element; "
                          "pass None for no limit")
    return elements


# The hot-path cache: (subscripts, *shapes, *len_items) -> the compiled numpy callable, for
# calls with default options.  Bounded by clearing when full (dict operations are atomic under
# the GIL, so concurrent callers at worst re-plan through the lru-cached `_compiled`).
_HOT: dict[tuple[Any, ...], Callable[..., Any]] = {}
HOT_CACHE_SIZE = PLAN_CACHE_SIZE


# ------------------------------------------------------------------------------ contract
# The defaults of contract's keywords, compared by identity on the hot path.
_AUTO = "auto"
_DEFAULT_LIMIT = "default"


_ORDER_K = "K"
_SAFE = "safe"
_NO_SUBSCRIPTS: Any = object()


# Typed results: a type checker gets the operands' array type back.  numpy arrays and scalars
# give NDArray[Any] (the result's shape and dtype differ from the operands'); an array type of
# any other library (jax.Array, torch.Tensor, dask's Array: none is generic in its shape) comes
# back as itself; a mix of libraries gives the `_Array` protocol, lists and Python scalars Any.
# Operands annotated ``np.ndarray`` (its shape and dtype Any) give NDArray[Any] too (`_NumpyT`).
# The keywords are the implementation's.
@overload
def contract(subscripts: str, *operands: _NumpyT, **options: Any) -> NDArray[Any]: ...
@overload
def contract(subscripts: str, *operands: _ArrayT, **options: Any) -> _ArrayT: ...
@overload
def contract(subscripts: Any = ..., *operands: _AnyT, **options: Any) -> Any: ...
def contract(subscripts: Any = _NO_SUBSCRIPTS, *operands: Any, **options: Any) -> Any:
    """Evaluate a grouped einsum.

    UPPERCASE letters are groups of zero or more consecutive axes, lowercase letters single
    axes.  Group lengths are solved from the operands' ndims; where the string cannot decide
    them, pass ``len_<G>=n``.  numpy, JAX (arrays and tracers), torch, dask (lazy: the result
    is a dask array) and Array API (CuPy, array-api-strict, ...) operands are accepted; numpy
    operands mixed with one of the others run on that one (docs/backends.md).

    ``optimize`` chooses the pairwise order: an opt_einsum preset name (``'auto'``,
    ``'greedy'``, ``'optimal'``, ``'dp'``, ...), an explicit path such as ``[(1, 2), (0, 1)]``
    (``explain`` prints the one it runs in this form), an ``opt_einsum.paths.PathOptimizer``
    (cotengra's ``HyperOptimizer`` among them), or ``False`` for one einsum call.

    ``memory_limit`` bounds the memory a call may use beyond its operands and result: a number
    of elements, a size such as ``'256MB'``, ``'max_input'`` (the largest operand), ``None``
    (no bound) or ``'default'``: on numpy the largest operand or result.  A call that would
    exceed it takes another order or runs in blocks (``explain`` shows them).  torch blocks
    only when given a limit; JAX never does (XLA plans its buffers).

    The keywords, all optional: ``optimize='auto'``, ``memory_limit='default'``,
    ``precision=None``, ``preferred_element_type=None``, ``out=None``, ``dtype=None``,
    ``order='K'``, ``casting='safe'``, ``backend=None``, ``use_blas=True`` and ``len_<G>=n``.

    np.einsum's and opt_einsum's calls work unchanged (docs/numpy-compat.md): ``...``,
    implicit output, the sublist form ``contract(a, [0, 1], b, [1, 2], [0, 2])``, ``order=``,
    ``casting=`` (numpy's rules, checked before any arithmetic), ``backend=`` (opt_einsum's
    library names; numpy operands are converted to it and the result back) and ``use_blas=``
    (accepted; BLAS is used wherever the schedule picks matmul).

    ``precision`` and ``preferred_element_type`` are passed to ``jnp.einsum`` on JAX.  On numpy
    and torch, ``preferred_element_type`` is the dtype the operands are converted to before
    contracting and ``precision`` is ignored.  ``dtype`` is np.einsum's name for the same
    thing.  ``out`` (numpy, as in np.einsum; a CuPy array for CuPy operands) is an array of
    the result's shape that the result is written into and that is returned; its dtype must
    hold the result's safely.

    >>> import numpy as np
    >>> zo, za = np.ones((3, 2, 5)), np.ones((3, 2, 4))
    >>> contract('WCo,WCa->Cao', zo, za, len_W=1).shape
    (2, 4, 5)
    >>> contract('Wa,Wab,Wb->W', np.ones((2, 3)), np.ones((2, 3, 4)), np.ones((2, 4)),
    ...          optimize=[(1, 2), (0, 1)]).tolist()
    [12.0, 12.0]
    >>> contract('...ij,jk', np.ones((5, 2, 3)), np.ones((3, 4))).shape    # numpy's forms
    (5, 2, 4)
    >>> contract(np.ones((2, 3)), [0, 1], np.ones(3), [1]), contract('i,i', np.ones(3), np.ones(3))
    (array([3., 3.]), np.float64(3.0))
    """
    # Hot path: numpy arrays, no keyword but plain-int len_* ones.  One dict lookup keyed on
    # (subscripts, *shapes, *len items) yields the compiled callable; everything else happens
    # once, on the first call of a signature (`_contract`).  The keywords arrive as one dict
    # rather than as named parameters: CPython matches every passed keyword against each named
    # one, which cost this path a fifth of its time (its signature is set below, for help()).
    if type(subscripts) is str:
        key: list[Any] = [subscripts]
        for op in operands:
            if type(op) is not _ndarray:
                for name in options:
                    if not name.startswith("len_"):
                        break
                else:  # another array library and no option but len_*: its own cached route
                    return _contract_foreign(subscripts, operands, options)
                break
            key.append(op.shape)
        else:
            for item in options.items():
                if type(item[1]) is not int:  # an option, or a bool/float length: checked route
                    break
                key.append(item)   # (an int option, memory_limit=10, is never a stored key)
            else:
                try:
                    run = _HOT.get(tuple(key))
                except TypeError:  # an unhashable shape: the checked route reports it
                    run = None
                if run is not None:
                    try:
                        return run(*operands)
                    except TypeError:
                        _check_dtypes(operands)  # a str or datetime array: say so plainly
                        raise
    return _contract(subscripts, *operands, **options)


def _contract(subscripts: str = _NO_SUBSCRIPTS, *operands: Any, optimize: Any = _AUTO,
             memory_limit: Any = _DEFAULT_LIMIT, precision: Any = None,
             preferred_element_type: Any = None, out: Any = None, dtype: Any = None,
             order: Any = _ORDER_K, casting: Any = _SAFE, backend: Any = None,
             use_blas: Any = True, **len_groups: int) -> Any:
    """`contract` with its keywords named: the first call of a signature, other options,
    other array libraries."""
    if type(subscripts) is not str:
        subscripts, operands = _sublist_call(subscripts, operands, single_call=optimize is False)
    if (optimize is _AUTO and memory_limit is _DEFAULT_LIMIT and preferred_element_type is None
            and out is None and dtype is None and order is _ORDER_K and casting is _SAFE
            and backend is None):
        # The hot path's key (`contract`): a miss plans and remembers the callable.
        key: list[Any] = [subscripts]
        for op in operands:
            if type(op) is not _ndarray:
                break
            key.append(op.shape)
        else:
            for item in len_groups.items():
                if type(item[1]) is not int:  # bool/float/np.int64: take the checked route
                    break
                key.append(item)
            else:
                try:
                    run = _HOT.get(tuple(key))
                except TypeError:  # unhashable subscripts; the checked route reports it
                    run = None
                if run is not None:
                    try:
                        return run(*operands)
                    except TypeError:
                        _check_dtypes(operands)  # a str or datetime array: say so plainly
                        raise
                return _numpy_first_call(subscripts, operands, len_groups, tuple(key))
        if precision is None:
            return _contract_foreign(subscripts, operands, len_groups)
    if dtype is not None:
        if preferred_element_type is not None and np.dtype(dtype) != np.dtype(preferred_element_type):
            raise TypeError(f"dtype={dtype!r} and preferred_element_type={preferred_element_type!r} "
                            "disagree; they mean the same thing, pass one")
        preferred_element_type = dtype
    if order is not _ORDER_K or casting is not _SAFE or dtype is not None or backend is not None:
        return _contract_numpy_style(subscripts, operands, len_groups, optimize,
                                     BackendOptions(precision, preferred_element_type), out,
                                     memory_limit, dtype, order, casting, backend)
    return _contract_general(subscripts, operands, len_groups, optimize,
                             BackendOptions(precision, preferred_element_type), out, memory_limit)


contract.__signature__ = inspect.signature(_contract)  # type: ignore[attr-defined]


def _sublist_call(first: Any, operands: tuple[Any, ...],
                  single_call: bool = False) -> tuple[str, tuple[Any, ...]]:
    """np.einsum's sublist form, or numpy's error for a call without subscripts."""
    if first is _NO_SUBSCRIPTS:
        raise OperandCountError("contract needs the subscripts string and at least one operand, "
                                "or operands each followed by its sublist, e.g. contract(a, [0, 1], "
                                "b, [1, 2], [0, 2])")
    if isinstance(first, str) or not operands:
        _check_subscripts(first)
    return from_sublists(first, operands, single_call)


def _contract_numpy_style(subscripts: str, operands: Sequence[Any], len_groups: Mapping[str, Any],
                          optimize: Any, options: BackendOptions, out: Any, memory_limit: Any,
                          dtype: Any, order: Any, casting: Any, backend: Any) -> Any:
    """``contract`` with np.einsum's ``order=``/``casting=``/``dtype=`` rules and
    opt_einsum's ``backend=``: checked before any arithmetic, then the general route."""
    _check_subscripts(subscripts)
    arrays = _as_operands(operands, backend_for(operands))  # bad operands: documented errors
    check_numpy_options(subscripts, arrays, dtype, casting, order)
    name = backend_name(backend)
    if name is not None and name != backend_for(operands).name:
        result = _on_backend(name, subscripts, operands, len_groups, optimize, options, memory_limit)
        if out is not None:
            np.copyto(out, result, casting=out_casting(casting, optimize, len(operands), out))
            return out
        return apply_order(result, order, operands)
    result = _contract_general(subscripts, operands, len_groups, optimize, options, out, memory_limit,
                               casting=casting)
    return result if out is not None else apply_order(result, order, operands)


def _on_backend(name: str, subscripts: str, operands: Sequence[Any], len_groups: Mapping[str, Any],
                optimize: Any, options: BackendOptions, memory_limit: Any) -> Any:
    """opt_einsum's ``backend=`` for numpy operands: convert them, contract, convert back."""
    if backend_for(operands).name != "numpy":
        raise ContractionError(f"backend={name!r} was asked for, but the operands are "
                               f"{backend_for(operands).name} arrays; pass backend='auto'")
    converted = to_library(name, [np.asarray(op) for op in operands])
    result = _contract_general(subscripts, converted, len_groups, optimize, options, None, memory_limit)
    return from_library(name, result, scalar=name != "object")  # opt_einsum's object: 0-d array


def _check_subscripts(subscripts: Any) -> None:
    if not isinstance(subscripts, str):
        raise TypeError(f"subscripts must be a str, got {type(subscripts).__name__}")


def _numpy_first_call(subscripts: str, operands: Sequence[Any], len_groups: Mapping[str, Any],
                      key: tuple[Any, ...]) -> Any:
    _check_subscripts(subscripts)
    _check_dtypes(operands)
    supplements = normalise_supplements(len_groups)
    shapes = tuple(op.shape for op in operands)
    run = _runner(_NUMPY, subscripts, shapes, supplements, "auto", _DEFAULT_OPTIONS, tiered=True)
    # (where copies of strided or mixed-dtype operands could break the limit, `run` checks
    # the operands and re-plans for theirs: see `_guarded`)
    _remember(_HOT, key, subscripts, run)
    return run(*operands)


def _remember(hot: dict[tuple[Any, ...], Callable[..., Any]], key: tuple[Any, ...],
              subscripts: str, run: Callable[..., Any]) -> None:
    """Keep ``run`` in a hot dict (cleared when full; strings over `HOT_KEY_MAX_CHARS` are
    left to the byte-bounded caches)."""
    if len(subscripts) <= HOT_KEY_MAX_CHARS:
        if len(hot) >= HOT_CACHE_SIZE:
            hot.clear()
        hot[key] = run
        if type(run) is _Provisional:
            run.homes.append((hot, key))


# The hot path of the other array libraries (JAX, torch, ...): default options, keyed on
# (subscripts, *(type, shape, is_cuda) of each operand, *len items).  The operand types are in
# the key because they decide the backend, ``is_cuda`` because it decides torch's entry (a CUDA
# tensor's schedule is priced for the GPU: `Backend.variant`); entries are made only for
# operands the backend takes as given (no conversion) and plain-int len_* values.
_FOREIGN_HOT: dict[tuple[Any, ...], Callable[..., Any]] = {}


def _contract_foreign(subscripts: str, operands: Sequence[Any], len_groups: Mapping[str, Any]) -> Any:
    key: tuple[Any, ...] | None = None
    for n in len_groups.values():
        if type(n) is not int:  # 2.0 == 2: only plain ints may share an entry; check the rest
            break
    else:
        try:
            key = (subscripts, *[(type(op), op.shape, getattr(op, "is_cuda", None)) for op in operands],
                   *len_groups.items())
            run = _FOREIGN_HOT.get(key)
        except (AttributeError, TypeError):  # a list operand, unhashable subscripts or shape
            key = run = None
        if run is not None:
            return run(*operands)
    return _contract_general(subscripts, operands, len_groups, _AUTO, _DEFAULT_OPTIONS,
                             hot_key=key)


def _contract_general(subscripts: str, operands: Sequence[Any], len_groups: Mapping[str, Any],
                      optimize: Any, options: BackendOptions, out: Any = None,
                      memory_limit: Any = "default", hot_key: tuple[Any, ...] | None = None,
                      casting: str = _SAFE) -> Any:
    _check_subscripts(subscripts)
    backend = backend_for(operands)
    arrays = _as_operands(operands, backend)
    _check_dtypes(arrays)
    supplements = normalise_supplements(len_groups)
    shapes = _shapes_of(arrays)
    optimize = _checked_optimize(numpy_optimize(optimize), subscripts, len(arrays))
    limit = normalise_memory_limit(memory_limit, _itemsize(arrays, options))
    layouts = _layouts_of(arrays, options) if backend is _NUMPY else None
    run = _runner(backend, subscripts, shapes, supplements, optimize, options, limit, layouts,
                  tiered=True)
    if hot_key is not None and all(a is op for a, op in zip(arrays, operands)):
        _remember(_FOREIGN_HOT, hot_key, subscripts, run)
    if out is None:
        return run(*arrays)
    plan, _ = _planned(subscripts, shapes, supplements, optimize, _backend_limit(backend, limit),
                       layouts, backend.uses_einsum, backend.cost_model)
    rule = out_casting(casting, optimize, len(arrays), out)
    _check_out(out, backend, plan, arrays, options, rule)
    return _write_out(out, backend, run(*arrays), rule)


def _shapes_of(arrays: Sequence[Any]) -> tuple[tuple[int, ...], ...]:
    shapes = []
    for k, a in enumerate(arrays):
        try:
            shapes.append(tuple(int(n) for n in a.shape))
        except (TypeError, ValueError):
            raise ContractionError(
                f"operand {k} has an unknown shape {tuple(a.shape)!r} (a lazy array whose chunk "
                "sizes are not known yet: for dask, call .compute_chunk_sizes() first)") from None
    return tuple(shapes)


def _itemsize(arrays: Sequence[Any], options: BackendOptions) -> int:
    """Bytes per element of the result (for byte-valued memory limits); 8 when unknown."""
    try:
        if options.preferred_element_type is not None:
            return int(np.dtype(options.preferred_element_type).itemsize)
        return int(max((np.dtype(a.dtype).itemsize for a in arrays), default=8))
    except (TypeError, ValueError, AttributeError):
        itemsize = [getattr(getattr(a, "dtype", None), "itemsize", None) for a in arrays]
        return max((int(i) for i in itemsize if isinstance(i, int)), default=8)


def _check_out(out: Any, backend: Backend, plan: Plan, arrays: Sequence[Any],
               options: BackendOptions, rule: Casting = "safe") -> None:
    """``out=`` is checked like np.einsum checks it, before any arithmetic (``rule``: the
    casting the result is written under, `compat.out_casting`); numpy's, and a backend whose
    module has ``out_type``/``write_out`` (CuPy, with an out on the device)."""
    module = None if backend.name == "numpy" else load(backend)
    if module is not None and not hasattr(module, "write_out"):
        raise TypeError(f"out= is supported for numpy and cupy operands only ({backend.name} "
                        "arrays were given); use the returned array")
    kind = np.ndarray if module is None else module.out_type()
    if not isinstance(out, kind):
        raise TypeError(f"out= must be a {'numpy' if module is None else backend.name} array, "
                        f"not {type(out).__module__.partition('.')[0]}.{type(out).__name__}")
    if out.shape != plan.output_shape:
        raise SizeMismatchError(f"out= has shape {out.shape} but {quoted(plan.parsed.subscripts)} gives "
                                f"{plan.output_shape} here")
    result = (np.dtype(options.preferred_element_type) if options.preferred_element_type is not None
              else np.result_type(*arrays) if module is None
              else np.result_type(*(a.dtype for a in arrays)))
    if not np.can_cast(result, out.dtype, rule):
        safely = "safely" if rule == "safe" else f"by the rule casting={rule!r}"
        raise TypeError(f"out= has dtype {out.dtype} but the result is {result}, which it cannot "
                        f"hold {safely}; pass an out of that dtype, casting='unsafe' to truncate, "
                        "or dtype= to compute in another")
    if not getattr(out.flags, "writeable", True):   # (CuPy arrays are always writeable)
        raise ValueError("out= is read-only")


def _write_out(out: Any, backend: Backend, result: Any, rule: Casting = "safe") -> Any:
    if backend.name == "numpy":
        np.copyto(out, result, casting=rule)
    else:
        load(backend).write_out(out, result, rule)
    return out


# -------------------------------------------------------------------- contract_expression
class ContractExpression:
    """A contraction compiled for fixed operand shapes; call it with operands of those shapes.

    Built by `contract_expression`.  ``plan`` and ``schedule`` are what runs (the same objects
    `contract` uses), ``output_shape`` the result's shape; ``explain()`` reports it.  One
    expression serves numpy, JAX and torch operands (each compiled on first use).

    >>> import numpy as np
    >>> expr = contract_expression('Wij,Wjk->Wik', (5, 2, 3), (5, 3, 4))
    >>> expr.output_shape, float(expr(np.ones((5, 2, 3)), np.ones((5, 3, 4)))[0, 0, 0])
    ((5, 2, 4), 3.0)
    """

    def __init__(self, subscripts: str, shapes: tuple[tuple[int, ...], ...],
                 supplements: tuple[tuple[str, int], ...], optimize: Any,
                 memory_limit: Any = "default", constants: Mapping[int, Any] | None = None) -> None:
        _check_subscripts(subscripts)
        #: opt_einsum's ``constants=``: operand position -> the array, converted once here
        self.constants: dict[int, Any] = dict(constants or {})
        self._converted: dict[tuple[str, str], dict[int, Any]] = {}  # constants per library
        self.subscripts = subscripts
        self.shapes = shapes
        self.supplements = supplements
        self.optimize = optimize
        self.memory_limit = memory_limit
        if _is_compiling():
            return  # built inside torch.compile: planned when called (see _traced_call)
        self.plan, self.schedule = _planned(subscripts, shapes, supplements, optimize, memory_limit)
        self._numpy = _runner(_NUMPY, subscripts, shapes, supplements, optimize, _DEFAULT_OPTIONS,
                              memory_limit)

    def __getattr__(self, name: str) -> Any:
        # Only reached for an expression built under torch.compile, when used outside it.
        if name in ("plan", "schedule", "_numpy"):
            self.plan, self.schedule = _planned(self.subscripts, self.shapes, self.supplements,
                                                self.optimize, self.memory_limit)
            self._numpy = _runner(_NUMPY, self.subscripts, self.shapes, self.supplements,
                                  self.optimize, _DEFAULT_OPTIONS, self.memory_limit)
            return getattr(self, name)
        raise AttributeError(name)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.plan.output_shape

    def __repr__(self) -> str:
        given = "".join(f", len_{g}={n}" for g, n in self.supplements)
        shapes = ", ".join(map(str, self.shapes))
        return f"<ContractExpression {self.subscripts!r} {shapes}{given} -> {self.output_shape}>"

    def compiled(self, backend: str = "numpy", precision: Any = None,
                 preferred_element_type: Any = None) -> Callable[..., Any]:
        """The bare compiled callable for ``backend``'s arrays: no shape or type checks.

        For the tightest loops (and for measuring the engine's own per-call cost); pass
        operands of exactly ``shapes``.
        """
        options = BackendOptions(precision, preferred_element_type)
        return _runner(_checked_backend(backend), self.subscripts, self.shapes, self.supplements,
                       self.optimize, options, self.memory_limit)

    @property
    def contraction_list(self) -> list[tuple[Any, ...]]:
        """opt_einsum's ``contraction_list`` for the path this expression runs (on its
        expanded einsum): one ``(positions, removed, einsum, remaining, blas)`` per step."""
        return list(path_info(self.plan.expansion.einsum, self.plan.shapes,
                              [tuple(step) for step in self.schedule.path]).contraction_list)

    @property
    def _evaluated_constants(self) -> dict[str, list[Any]]:
        # opt_einsum's name (its tests read it): the constants as held per library
        return evaluated_constants(len(self.shapes), self.constants, self._converted)

    def explain(self, backend: str = "numpy") -> str:
        """The `explain` report of this expression (for ``backend``'s schedule)."""
        return explain(self.subscripts, *self.shapes, optimize=self.optimize, backend=backend,
                       memory_limit=self.memory_limit,
                       **{f"len_{g}": n for g, n in self.supplements})

    @overload
    def __call__(self, *operands: _NumpyT, precision: Any = ...,
                 preferred_element_type: Any = ...,
                 out: Any = ..., backend: Any = ..., evaluate_constants: bool = ...) -> NDArray[Any]: ...
    @overload
    def __call__(self, *operands: _ArrayT, precision: Any = ...,
                 preferred_element_type: Any = ...,
                 out: Any = ..., backend: Any = ..., evaluate_constants: bool = ...) -> _ArrayT: ...
    @overload
    def __call__(self, *operands: _AnyT, precision: Any = ...,
                 preferred_element_type: Any = ...,
                 out: Any = ..., backend: Any = ..., evaluate_constants: bool = ...) -> Any: ...
    def __call__(self, *operands: Any, precision: Any = None, preferred_element_type: Any = None,
                 out: Any = None, backend: Any = None, evaluate_constants: bool = False) -> Any:
        if self.constants:
            operands = _with_constants(self, operands)
        if _is_compiling():
            # Traced by torch.compile: forward to contract, which is one node of the graph.
            return _traced_call(self, operands, precision, preferred_element_type)
        if out is not None or backend is not None:
            return _call_numpy_style(self, operands, out, backend, precision, preferred_element_type)
        if len(operands) == len(self.shapes) and preferred_element_type is None:
            for op, shape in zip(operands, self.shapes):
                if type(op) is not _ndarray or op.shape != shape:
                    break
            else:
                try:
                    return self._numpy(*operands)
                except TypeError:
                    _check_dtypes(operands)
                    raise
        if len(operands) != len(self.shapes):
            _wrong_count(self, len(self.shapes), len(operands))
        backend = backend_for(operands)
        arrays = _as_operands(operands, backend)
        _check_dtypes(arrays)
        shapes = _shapes_of(arrays)
        if shapes != self.shapes:
            raise SizeMismatchError(
                f"this expression for {quoted(self.subscripts)} was built for operand shapes "
                f"{', '.join(map(str, self.shapes))} but was called with "
                f"{', '.join(map(str, shapes))}; build another with contract_expression or call "
                "contract")
        options = BackendOptions(precision, preferred_element_type)
        return _runner(backend, self.subscripts, self.shapes, self.supplements, self.optimize,
                       options, self.memory_limit)(*arrays)


def _with_constants(expr: ContractExpression, operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """The call's operands with the expression's constants put back in their positions."""
    n = len(expr.shapes) - len(expr.constants)
    if len(operands) != n:
        _wrong_count(expr, n, len(operands))
    constants = _constants_for(expr, operands)
    given = iter(operands)
    return tuple(constants[k] if k in constants else next(given) for k in range(len(expr.shapes)))


def _wrong_count(expr: ContractExpression, n: int, given: int) -> None:
    constants = f" (positions {sorted(expr.constants)} are constants)" if expr.constants else ""
    raise OperandCountError(
        f"this `ContractExpression` takes exactly {n} operand{'s' if n != 1 else ''}{constants} "
        f"for {quoted(expr.subscripts)} but {given} were given; pass one array per term that is "
        "not a constant, in order")


def _constants_for(expr: ContractExpression, operands: tuple[Any, ...]) -> dict[int, Any]:
    """The constants as arrays of the operands' library (JAX, torch: converted once per library
    and device, then reused), so a call does not convert them again."""
    if not operands or all(type(op) is _ndarray for op in operands):
        return expr.constants
    name = backend_for(operands).name
    if name not in ("jax", "torch"):
        return expr.constants
    device = getattr(operands[0], "device", None) if name == "torch" else None
    key = (name, str(device))
    cache = expr._converted
    if key not in cache:
        numpy_ones = [k for k, c in expr.constants.items() if type(c) is _ndarray]
        converted = dict(expr.constants)
        for k, c in zip(numpy_ones, to_library(name, [expr.constants[k] for k in numpy_ones])):
            converted[k] = c if device is None else c.to(device)
        cache[key] = converted
    return cache[key]


def _call_numpy_style(expr: ContractExpression, operands: tuple[Any, ...], out: Any, backend: Any,
                      precision: Any, preferred_element_type: Any) -> Any:
    """An expression called with opt_einsum's ``out=`` or ``backend=``."""
    name = backend_name(backend)
    if name is not None and name != backend_for(operands).name:
        if backend_for(operands).name != "numpy":
            raise ContractionError(f"backend={name!r} was asked for, but the operands are "
                                   f"{backend_for(operands).name} arrays; pass backend='auto'")
        converted = to_library(name, [np.asarray(op) for op in operands])
        result = from_library(name, expr(*_without_constants(expr, converted), precision=precision,
                                         preferred_element_type=preferred_element_type),
                              scalar=False)   # opt_einsum's expressions: a 0-d array
    else:
        result = expr(*_without_constants(expr, operands), precision=precision,
                      preferred_element_type=preferred_element_type)
    if out is None:
        return result
    options = BackendOptions(precision, preferred_element_type)
    owner = backend_for(operands)   # an out on the device for CuPy; else a numpy out, as before
    chosen = owner if name is None and owner is not _NUMPY and hasattr(load(owner), "write_out") else _NUMPY
    arrays = _as_operands(operands, chosen)
    rule = out_casting(_SAFE, expr.optimize, len(expr.shapes), out)
    _check_out(out, chosen, expr.plan, arrays, options, rule)
    return _write_out(out, chosen, result, rule)


def _without_constants(expr: ContractExpression, operands: Sequence[Any]) -> tuple[Any, ...]:
    if not expr.constants:
        return tuple(operands)
    # the constants are re-inserted by the call; a converted constant replaces the stored one
    return tuple(op for k, op in enumerate(operands) if k not in expr.constants)


def contract_expression(subscripts: str, *shapes: Any, optimize: Any = "auto",
                        memory_limit: Any = "default", constants: Sequence[int] | None = None,
                        use_blas: Any = True, **len_groups: int) -> ContractExpression:
    """Plan, schedule and compile a contraction once for these operand shapes.

    The familiar opt_einsum/cotengra convention: the returned `ContractExpression` is called
    with operands of exactly these shapes (numpy, JAX or torch) and skips every lookup.
    ``memory_limit`` is as for `contract` (a byte size assumes 8-byte elements here).

    >>> import numpy as np
    >>> expr = contract_expression('WCo,WCa->Cao', (3, 2, 5), (3, 2, 4), len_W=1)
    >>> expr.schedule.path, expr(np.ones((3, 2, 5)), np.ones((3, 2, 4))).shape
    (((0, 1),), (2, 4, 5))
    """
    check_expression_keywords(subscripts, len_groups)  # opt_einsum's out=, backend=: the call's
    if type(subscripts) is not str and shapes:  # the sublist form, with shapes for operands
        subscripts, shapes = from_sublists(subscripts, shapes)
    fixed = _constant_operands(shapes, constants)
    return ContractExpression(subscripts, _checked_shapes(shapes, "contract_expression"),
                              normalise_supplements(len_groups), _checked_optimize(numpy_optimize(optimize), subscripts, len(shapes)),
                              normalise_memory_limit(memory_limit), constants=fixed)


def _constant_operands(shapes: Sequence[Any], constants: Sequence[int] | None) -> dict[int, Any]:
    """opt_einsum's ``constants=``: positions whose entry in ``shapes`` is the array itself."""
    if constants is None:
        return {}
    fixed = {}
    for k in constants:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < len(shapes):
            raise TypeError(f"constants= lists operand positions 0..{len(shapes) - 1}, got {k!r}")
        if not hasattr(shapes[k], "shape") or not hasattr(shapes[k], "dtype"):
            raise TypeError(f"constants= names operand {k}, so pass that operand's array (not its "
                            "shape) in its place")
        item = shapes[k]
        fixed[int(k)] = item if type(item) is _ndarray else (
            np.asarray(item) if isinstance(item, (np.generic, list, tuple)) else item)
    return fixed


# ---------------------------------------------------------------------------- contract_path
def contract_path(subscripts: Any, *operands: Any, optimize: Any = "auto",
                  memory_limit: Any = "default", shapes: bool = False, use_blas: bool = True,
                  **len_groups: int) -> tuple[list[tuple[int, ...]], Any]:
    """opt_einsum's ``contract_path``: the pairwise path `contract` runs and its `PathInfo`.

    ``path`` is in opt_einsum's list-of-pairs form (pass it back as ``optimize=``); the info is
    opt_einsum's own `PathInfo` for that path on the expanded einsum (one letter per axis), so
    ``contraction_list``, ``opt_cost``, ``naive_cost``, ``speedup``, ``size_list``,
    ``largest_intermediate`` and its printed table read as opt_einsum's.  With
    ``shapes=True`` the operands are shapes.

    >>> import numpy as np
    >>> path, info = contract_path('ij,jk,kl->il', np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5)))
    >>> path, info.opt_cost
    ([(0, 1), (0, 1)], Decimal('128'))
    """
    if type(subscripts) is not str:
        subscripts, operands = _sublist_call(subscripts, operands)
    _check_subscripts(subscripts)
    supplements = normalise_supplements(len_groups)
    if shapes:
        shape_list = _checked_shapes(operands, "contract_path")
    else:
        shape_list = _shapes_of(_as_operands(operands, _NUMPY if not operands else backend_for(operands)))
    opt = _checked_optimize(numpy_optimize(optimize), subscripts, len(shape_list))
    plan, schedule = _planned(subscripts, shape_list, supplements, opt,
                              normalise_memory_limit(memory_limit))
    path = [tuple(step) for step in schedule.path]
    return path, path_info(plan.expansion.einsum, plan.shapes, path, use_blas=use_blas)


# ------------------------------------------------------------------------- introspection
def _checked_shapes(items: Sequence[Any], verb: str) -> tuple[tuple[int, ...], ...]:
    shapes = []
    for k, item in enumerate(items):
        raw = item.shape if hasattr(item, "shape") else item
        if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence) and not hasattr(raw, "__iter__"):
            raise TypeError(f"{verb}: shape {k} must be a tuple of ints, got {item!r}")
        shape = []
        for n in raw:
            if isinstance(n, bool):
                raise TypeError(f"{verb}: shape {k} {tuple(raw)!r} has a bool extent")
            try:
                n = operator.index(n)
            except TypeError:
                if hasattr(item, "shape") and (n is None or isinstance(n, float)):
                    raise ContractionError(
                        f"{verb}: operand {k} has an unknown shape {tuple(raw)!r} (a lazy array whose "
                        "chunk sizes are not known yet: for dask, call .compute_chunk_sizes() first)"
                    ) from None
                raise TypeError(f"{verb}: shape {k} {tuple(raw)!r} has a non-integer extent "
                                f"{n!r}") from None
            if n < 0:
                raise ContractionError(f"{verb}: shape {k} {tuple(raw)!r} has a negative extent")
            shape.append(n)
        shapes.append(tuple(shape))
    return tuple(shapes)


def _shapes_or_ndims(items: Sequence[Any], verb: str
                     ) -> tuple[tuple[tuple[int, ...], ...] | None, tuple[int, ...]]:
    """Split explain/expand arguments into (shapes or None, ndims); never a mix."""
    is_ndim = []
    for item in items:
        if isinstance(item, bool):
            raise TypeError(f"{verb}: an ndim must be an int, not bool ({item!r})")
        # numpy integers have a .shape (of a 0-d array) but are ndims, as Python ints are
        is_ndim.append(isinstance(item, (int, np.integer))
                       or (not hasattr(item, "shape") and hasattr(item, "__index__")))
    if items and all(is_ndim):
        ndims = tuple(operator.index(i) for i in items)
        if any(n < 0 for n in ndims):
            raise ContractionError(f"{verb}: ndims must be >= 0, got {ndims}")
        return None, ndims
    if any(is_ndim):
        raise TypeError(f"{verb}: pass one shape (or array) per operand, or one ndim per operand, "
                        f"not a mix: {list(items)!r}")
    shapes = _checked_shapes(items, verb)
    return shapes, tuple(len(s) for s in shapes)


def expand_subscripts(subscripts: str, *shapes_or_ndims: Any, **len_groups: int) -> str:
    """The plain einsum string a grouped call expands to (no arithmetic).

    Pass one shape tuple, array or ndim (int) per operand.

    >>> expand_subscripts('WCa,Caib,WCi->WCb', 4, 5, 4)
    'ABCa,BCaib,ABCi->ABCb'
    >>> expand_subscripts('Vo,VWo->WVo', (3, 5), (3, 2, 2, 5))
    'Ao,ABCo->BCAo'
    """
    _check_subscripts(subscripts)
    supplements = normalise_supplements(len_groups)
    shapes, ndims = _shapes_or_ndims(shapes_or_ndims, "expand_subscripts")
    _check_axis_count(subscripts, ndims, supplements, "ndim" if shapes is None else "shape",
                      "expand_subscripts")
    if shapes is not None:
        return make_plan(subscripts, shapes, supplements).expansion.einsum
    parsed, lengths = solve_call(subscripts, ndims, supplements, what="ndim")
    return expand(parsed, lengths, ellipsis_ranks(parsed, lengths, ndims)).einsum


def explain(subscripts: str, *shapes_or_operands: Any, optimize: Any = "auto",
            backend: str | None = None, memory_limit: Any = "default", **len_groups: int) -> str:
    """A report of how ``subscripts`` is solved, expanded, scheduled and run.

    With shapes (or arrays) it includes the extents and the schedule the backend would run:
    its strategy, the pairwise path in ``optimize=`` form, each step with its kernel and
    modelled cost, any blocks, the FLOP count and the peak extra memory (elements alive at once
    beyond operands and result) against ``memory_limit``.  The backend is the operands' (with
    arrays) or ``backend`` (``'numpy'`` by default); with bare ndims (ints) the report stops at
    the expansion.  `explanation` returns the same report as data.

    >>> print(explain('WCo,WCa->Cao', (3, 2, 5), (3, 2, 4), len_W=1))  # doctest: +ELLIPSIS
    subscripts      'WCo,WCa->Cao'
    ...
    path            [(0, 1)]...
    ...
    """
    return str(explanation(subscripts, *shapes_or_operands, optimize=optimize, backend=backend,
                           memory_limit=memory_limit, **len_groups))


def explanation(subscripts: str, *shapes_or_operands: Any, optimize: Any = "auto",
                backend: str | None = None, memory_limit: Any = "default",
                **len_groups: int) -> Explanation:
    """The `explain` report as an `Explanation`: its numbers as attributes (the path, each
    step's kernel, FLOPs and modelled time, the blocks, the peak), its text as ``str()``.
    Takes exactly `explain`'s arguments.

    >>> e = explanation('WCa,Caib,WCi->WCb', (40, 2, 30), (2, 30, 50, 60), (40, 2, 50),
    ...                 optimize='greedy')
    >>> e.path, [step.kernel for step in e.steps], e.group_lengths
    (((1, 2), (0, 1)), ['matmul', 'matmul'], {'W': 1, 'C': 1})
    >>> str(e) == explain('WCa,Caib,WCi->WCb', (40, 2, 30), (2, 30, 50, 60), (40, 2, 50),
    ...                   optimize='greedy')
    True
    """
    _check_subscripts(subscripts)
    supplements = normalise_supplements(len_groups)
    shapes, ndims = _shapes_or_ndims(shapes_or_operands, "explain")
    info = identifiability(subscripts, [g for g, _ in supplements])
    _check_axis_count(subscripts, ndims, supplements, "ndim" if shapes is None else "shape", "explain")
    alone = identifiability(subscripts).describe()
    state = None
    if supplements:
        state = "determined" if not info.needs_supplement else info.describe()
    runs = tuple("".join(r) for r in info.runs if len(r) > 1)
    plan: Plan | None = None
    first_call: FirstCall | None = None
    if backend is not None:
        chosen = _checked_backend(backend)
    elif any(hasattr(item, "shape") for item in shapes_or_operands):
        chosen = backend_for(shapes_or_operands)
    else:
        chosen = _NUMPY
    if shapes is not None:
        opt = _checked_optimize(numpy_optimize(optimize), subscripts, len(shapes))
        arrays = [item for item in shapes_or_operands if hasattr(item, "dtype")]
        limit = _backend_limit(chosen, normalise_memory_limit(
            memory_limit, _itemsize(arrays, _DEFAULT_OPTIONS)))   # 8 bytes for bare shapes
        if _framework_path(chosen, opt):
            plan, schedule = make_plan(subscripts, shapes, supplements), None
        else:
            layouts = (_layouts_of(shapes_or_operands, _DEFAULT_OPTIONS)
                       if chosen is _NUMPY and arrays and len(arrays) == len(shapes_or_operands) else None)
            if opt == "auto":  # before the full search below, which a later first call would reuse
                first = first_schedule(make_plan(subscripts, shapes, supplements), opt,
                                       chosen.uses_einsum, limit, layouts, chosen.cost_model or NUMPY_MODEL,
                                       remember=False)
                if first.search_ns:  # (one einsum call has nothing to search: no line)
                    first_call = FirstCall(first.tier, first.search_ns, first.schedule.path,
                                           first.schedule.cost_ns, first.upgrade_after)
            plan, schedule = _planned(subscripts, shapes, supplements, opt, limit, layouts,
                                      chosen.uses_einsum, chosen.cost_model)
        exp, lengths = plan.expansion, plan.lengths
    else:
        parsed, lengths = solve_call(subscripts, ndims, supplements, what="ndim")
        exp = expand(parsed, lengths, ellipsis_ranks(parsed, lengths, ndims))
    groups = tuple(
        ExplainedGroup(g, n, "".join(exp.readable_symbol(lab) for lab in labels) or "-",
                       tuple(plan.extents[lab] for lab in labels) if plan is not None else None)
        for (g, labels), n in zip(exp.group_labels, lengths))
    base = Explanation(subscripts=subscripts, identifiability=alone, co_travelling=runs,
                       groups=groups, expanded=exp.readable, supplements=supplements,
                       identifiability_with=state)
    if plan is None:
        return base
    module = load(chosen)
    if schedule is None:  # the framework chooses the path: report the one it will choose
        return _framework_explanation(base, chosen, module, plan)
    runs_steps = getattr(module, "RUNS_SCHEDULE_STEPS", False)
    described = module.describe(plan, schedule, _DEFAULT_OPTIONS)
    if hasattr(module, "describe_operands") and shapes_or_operands and all(
            hasattr(item, "shape") and not isinstance(item, np.ndarray) for item in shapes_or_operands[:1]):
        # a backend whose work depends on the operands themselves (dask: their chunks)
        described = module.describe_operands(plan, schedule, _DEFAULT_OPTIONS, shapes_or_operands)
    reported = replace(
        base, output_shape=plan.output_shape, backend=chosen.name, optimizer=schedule.optimizer,
        path=schedule.path,
        path_taken=not (runs_steps and schedule.strategy == "direct" and len(plan.shapes) > 1
                        and not getattr(module, "EINSUM_TAKES_PATH", False)),
        schedule_lines=tuple(described), flops=schedule.flops, naive_flops=schedule.naive_flops)
    if not runs_steps:
        return reported
    return replace(reported, strategy=schedule.strategy, blocking=schedule.blocking,
                   steps=explained_steps(schedule, exp.readable_symbol),
                   peak_extra=schedule.peak_extra, memory_limit=schedule.memory_limit,
                   cost_ns=schedule.cost_ns if schedule.strategy == "pairwise" else None,
                   time_model=getattr(chosen.cost_model, "time_model_name", "numpy"),
                   first_call=first_call)


def _framework_explanation(base: Explanation, backend: Backend, module: Any, plan: Plan) -> Explanation:
    """explain's report for a backend that picks its own path (JAX's default): the path is the
    one ``jnp.einsum`` computes for these shapes (opt_einsum's ``'auto'``)."""
    import opt_einsum

    path, info = opt_einsum.contract_path(plan.expansion.einsum, *plan.shapes, shapes=True,
                                          optimize="auto")
    return replace(base, output_shape=plan.output_shape, backend=backend.name,
                   path=tuple(tuple(int(k) for k in p) for p in path),
                   schedule_lines=tuple(module.describe(plan, None, _DEFAULT_OPTIONS)),
                   flops=int(info.opt_cost), naive_flops=int(info.naive_cost))


# ------------------------------------------------------------------ argument validation
# Small checks at the public boundary, so a bad argument fails with a documented error that
# names it (and says what to pass) before any numpy or framework internals run.

#: Most distinct axes one expansion can name: 52 letters, then `expand.symbol_past_letters`
#: up to U+10FFFF (the surrogates skipped).
MAX_AXES = 0x110000 - 140 - (0xE000 - 0xD800)

# dtype kinds np.einsum cannot multiply: datetime, timedelta, bytes, str, structured/void.
_NOT_NUMERIC = {"M": "datetime64", "m": "timedelta64", "S": "bytes", "U": "str", "V": "structured"}


def _check_dtypes(arrays: Sequence[Any]) -> None:
    """A `TypeError` naming the first operand whose numpy dtype holds no numbers."""
    for k, a in enumerate(arrays):
        dtype = getattr(a, "dtype", None)
        # (extension float types such as ml_dtypes' bfloat16 are kind 'V' too, but not np.void)
        if isinstance(dtype, np.dtype) and dtype.kind in _NOT_NUMERIC and (
                dtype.kind != "V" or dtype.type is np.void):
            raise TypeError(
                f"operand {k} has dtype {dtype} ({_NOT_NUMERIC[dtype.kind]}), which holds no numbers "
                "to multiply; contract takes bool, integer, float, complex (or object) arrays: "
                f"convert it first (e.g. .astype(float){', or view its fields' if dtype.kind == 'V' else ''})")


def _checked_optimize(optimize: Any, subscripts: Any = None, n_operands: int | None = None) -> Any:
    """``optimize=`` normalised: an explicit path's positions must be ints (never truncated
    floats) within range for ``n_operands`` (checked once they match the string's terms, so a
    miscount is reported as such); an unknown preset is an `OptionError`."""
    if isinstance(optimize, (list, tuple)):
        for pair in optimize:
            if isinstance(pair, (list, tuple)):
                for k in pair:
                    if isinstance(k, bool) or not hasattr(type(k), "__index__"):
                        raise TypeError(f"optimize= path entries must be tuples of ints (operand "
                                        f"positions): {tuple(pair)!r} holds {k!r:.40}; write e.g. [(0, 1)]")
    try:
        normalised = normalise_optimize(optimize)
    except ContractionError:
        raise
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    if isinstance(normalised, tuple) and n_operands is not None and isinstance(subscripts, str):
        try:
            terms = len(parse(subscripts).inputs)
        except ContractionError:
            return normalised  # the call reports the string's own error
        if terms == n_operands:
            _checked_path(normalised, n_operands)
    return normalised


def _checked_backend(name: Any) -> Backend:
    """The backend named ``name``; an unknown name is an `OptionError`, a non-str a `TypeError`."""
    if not isinstance(name, str):
        raise TypeError(f"backend= must be a backend name such as 'numpy', 'jax' or 'torch', "
                        f"not {type(name).__name__}")
    try:
        return backend_named(name)
    except ValueError as exc:
        raise OptionError(f"backend={_short_repr(name)}: {exc}") from None


def _check_axis_count(subscripts: str, ndims: Sequence[int], supplements: tuple[tuple[str, int], ...],
                      what: str, verb: str) -> None:
    """An `OptionError` when the expansion would need more distinct axes than can be named
    (only ever reachable with bare ndims or huge shape tuples)."""
    if sum(ndims) <= MAX_AXES:
        return  # every distinct axis is an axis of some operand
    parsed, lengths = solve_call(subscripts, tuple(ndims), supplements, what=what)
    letters = {ch for term in parsed.terms for ch in term if not ch.isupper()}
    total = sum(lengths) + len(letters)
    if total > MAX_AXES:
        big = ", ".join(f"{g}={n:,}" for g, n in zip(parsed.groups, lengths) if n)
        raise OptionError(
            f"{verb}: {quoted(subscripts)} would expand to {total:,} distinct axes (group lengths "
            f"{big}), more than the {MAX_AXES:,} an einsum string can name; check the ndims or "
            "shapes passed")


# -------------------------------------------------------------------------- torch.compile
# TorchDynamo must not trace the planner: contract is registered as one graph node by
# backends/torch_compile_hook.py, as soon as torch._dynamo is loaded and without ever importing
# it.  The hook also replaces `_is_compiling` with torch.compiler.is_compiling, so that an
# expression built while Dynamo traces skips planning and its __call__ forwards to contract.
def _never_compiling() -> bool:
    return False


_is_compiling: Callable[[], bool] = _never_compiling


def _traced_call(expr: ContractExpression, operands: Sequence[Any], precision: Any,
                 preferred_element_type: Any) -> Any:
    shapes = tuple(tuple(op.shape) for op in operands)
    if shapes != expr.shapes:
        raise SizeMismatchError(
            f"this expression for {quoted(expr.subscripts)} was built for operand shapes "
            f"{', '.join(map(str, expr.shapes))} but was called with "
            f"{', '.join(map(str, shapes))}; build another with contract_expression or call "
            "contract")
    return contract(expr.subscripts, *operands, optimize=expr.optimize,
                    memory_limit=expr.memory_limit, precision=precision,
                    preferred_element_type=preferred_element_type,
                    **{f"len_{g}": n for g, n in expr.supplements})


def _install_compile_hook() -> None:
    from .backends import torch_compile_hook

    torch_compile_hook.install()


_install_compile_hook()
