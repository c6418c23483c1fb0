"""`contract`, and the one call path every call takes: the hot dict, else the checked route
(arguments checked, a backend chosen), the runner cache, and on a miss plan -> schedule (the
cheapest sound tier for a first call: `schedule.tiers`) -> the backend's compiled runner.

A warm call is one dictionary lookup plus the arithmetic.  `expressions` (plans once for fixed
shapes) and `explaining` (reports) build on the caches here.

>>> import numpy as np
>>> x = np.ones((4, 2, 3)); cores = np.ones((2, 3, 5, 6)); z = np.ones((4, 2, 5))
>>> contract('WCa,Caib,WCi->WCb', x, cores, z).shape
(4, 2, 6)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import numpy as np

from .arguments import normalise_supplements
from .backends import Backend, BackendOptions, backend_for, backend_named, load
from .caching import byte_bounded_cache, shapes_key_weight, weight
from .checks import (
    as_operands,
    check_dtypes,
    check_subscripts,
    checked_optimize,
    layouts_of,
    normalise_memory_limit,
    result_itemsize,
    shapes_of,
)
from .compat import (
    Casting,
    apply_order,
    backend_name,
    check_numpy_options,
    from_library,
    from_sublists,
    numpy_optimize,
    out_casting,
    to_library,
)
from .errors import ContractionError, OperandCountError, SizeMismatchError, quoted
from .model.numpy_prices import NUMPY_MODEL
from .plan import PLAN_CACHE_SIZE, Plan, make_plan
from .schedule import Schedule, make_schedule
from .schedule.blocking import as_one_einsum
from .schedule.tiers import first_schedule, remember_full
from .structures import DECLINED, Structure, known_structure, remember_structure, structure_key_of

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

__all__ = ["contract"]

_ndarray = np.ndarray
_NUMPY = backend_named("numpy")
_DEFAULT_OPTIONS = BackendOptions()


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
             layouts: tuple[int, ...] | None = None, tiered: bool = False,
             unplanned_first: bool = True) -> Callable[..., Any]:
    """The runner: plan (in a cheap tier when ``tiered``: `schedule.tiers`; the ``'first'``
    tier only with ``unplanned_first``), compile, and wrap it for other operand layouts (numpy)
    and for the full search to come (a cheap tier)."""
    module = load(backend)
    if _framework_path(backend, optimize):
        # The framework picks the path itself (JAX: jnp.einsum's own 'auto', which XLA runs
        # fastest); no schedule is built, so a new shape costs only parse/solve/expand/plan.
        return module.compile(make_plan(subscripts, shapes, supplements), None, options)
    upgrade_after = 0
    if tiered:
        plan = make_plan(subscripts, shapes, supplements)
        first = first_schedule(plan, optimize, backend.uses_einsum, limit, layouts,
                               backend.cost_model or NUMPY_MODEL,
                               along_path=backend.einsum_along_path and unplanned_first)
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
            if tiered and first.tier == "first":
                # the structure's first call ran unplanned: plan the shape again, now in the
                # cheapest tier that follows a structure that has been called
                return _compile(backend, subscripts, shapes, supplements, optimize, options, limit,
                                layouts, tiered=True, unplanned_first=False)
            return _runner(backend, subscripts, shapes, supplements, optimize, options, limit,
                           layouts, tiered=False)
        return _Provisional(run, upgrade_after, full)
    return run


class _Provisional:
    """A cheap tier's runner (`schedule.tiers`): it counts the calls of its shape and, on the
    ``upgrade_after``-th, runs the full search (after the ``'first'`` tier: the next tier) and
    hands the runner it gets to the hot dicts that hold this one (so later calls reach it
    directly)."""

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
            if type(self.run) is _Provisional:  # (a cheap tier again: its upgrade updates them)
                self.run.homes.extend(self.homes)
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
                layouts = layouts_of(arrays, options)
                return _runner(backend, subscripts, shapes, supplements, optimize, options, limit,
                               layouts, tiered=True)(*arrays)
        return run(*arrays)

    return guarded


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


# The hot dict: (subscripts, *operand keys, *len_items) -> the call's runner, for calls with
# default options; an operand's key is its shape for a numpy array, else (type, shape, is_cuda):
# the type decides the backend, a torch tensor's device its prices (`_operand_key`).  Bounded by
# clearing when full (dict operations are atomic under the GIL, so concurrent callers at worst
# re-plan through the cached `_compiled`).
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
    # Hot path: no keyword but plain-int len_* ones.  One dict lookup keyed on (subscripts,
    # *operand keys, *len items) yields the runner; everything else happens once, on the first
    # call of a signature (`_contract`).  The keywords arrive as one dict rather than as named
    # parameters: CPython matches every passed keyword against each named one, which cost this
    # path a fifth of its time (its signature is set below, for help()).
    if type(subscripts) is str:
        key: list[Any] = [subscripts]
        try:
            for op in operands:
                key.append(op.shape if type(op) is _ndarray
                           else (type(op), op.shape, getattr(op, "is_cuda", None)))
        except AttributeError:  # a list or a scalar: the checked route converts it
            return _contract(subscripts, *operands, **options)
        for item in options.items():
            if type(item[1]) is not int:  # an option, or a bool/float length: checked route
                break
            key.append(item)   # (an int option, memory_limit=10, is never a stored key)
        else:
            hot_key = tuple(key)
            try:
                run = _HOT.get(hot_key)
            except TypeError:  # an unhashable shape: the checked route reports it
                return _contract(subscripts, *operands, **options)
            if run is not None:
                try:
                    return run(*operands)
                except TypeError:
                    check_dtypes(operands)  # a str or datetime array: say so plainly
                    raise
            if operands:
                # A new shape: a known structure runs it without planning (`structures`).
                run = _new_shape(subscripts, operands, hot_key)
                if run is not None:
                    return run(*operands)
    return _contract(subscripts, *operands, **options)


def _contract(subscripts: str = _NO_SUBSCRIPTS, *operands: Any, optimize: Any = _AUTO,
              memory_limit: Any = _DEFAULT_LIMIT, precision: Any = None,
              preferred_element_type: Any = None, out: Any = None, dtype: Any = None,
              order: Any = _ORDER_K, casting: Any = _SAFE, backend: Any = None,
              use_blas: Any = True, **len_groups: int) -> Any:
    """The checked route, every call the hot dict did not answer, each stage reached once:
    the arguments checked (numpy's ``order``/``casting``/``dtype`` rules, opt_einsum's
    ``backend=`` conversion), then the runner (`_runner`: cached, else planned in the cheapest
    sound tier and compiled), remembered in the hot dict for default options, and run."""
    if type(subscripts) is not str:
        subscripts, operands = _sublist_call(subscripts, operands, single_call=optimize is False)
    check_subscripts(subscripts)
    if dtype is not None:
        if preferred_element_type is not None and np.dtype(dtype) != np.dtype(preferred_element_type):
            raise TypeError(f"dtype={dtype!r} and preferred_element_type={preferred_element_type!r} "
                            "disagree; they mean the same thing, pass one")
        preferred_element_type = dtype
    library = backend_for(operands)
    numpy_style = order is not _ORDER_K or casting is not _SAFE or dtype is not None
    if numpy_style or backend is not None:
        # np.einsum's rules, checked before any arithmetic (bad operands: documented errors)
        check_numpy_options(subscripts, as_operands(operands, library), dtype, casting, order)
    given = operands
    convert = backend_name(backend) if backend is not None else None
    if convert == library.name:
        convert = None
    if convert is not None:  # opt_einsum's backend= for numpy operands: convert, contract, back
        if library.name != "numpy":
            raise ContractionError(f"backend={convert!r} was asked for, but the operands are "
                                   f"{library.name} arrays; pass backend='auto'")
        operands = tuple(to_library(convert, [np.asarray(op) for op in operands]))
        library = backend_for(operands)
    arrays = as_operands(operands, library)
    check_dtypes(arrays)
    options = (_DEFAULT_OPTIONS if precision is None and preferred_element_type is None
               else BackendOptions(precision, preferred_element_type))
    supplements = normalise_supplements(len_groups)
    shapes = shapes_of(arrays)
    optimized = checked_optimize(numpy_optimize(optimize), subscripts, len(arrays))
    limit = normalise_memory_limit(memory_limit, result_itemsize(arrays, options))
    layouts = layouts_of(arrays, options) if library is _NUMPY else None
    run = _runner(library, subscripts, shapes, supplements, optimized, options, limit, layouts,
                  tiered=True)
    if (optimize is _AUTO and memory_limit is _DEFAULT_LIMIT and options is _DEFAULT_OPTIONS
            and out is None and not numpy_style and backend is None
            and all(a is op for a, op in zip(arrays, given))
            and all(type(n) is int for n in len_groups.values())):
        # (only exact ints: 2.0 == 2 and True == 1 hash alike, but must be refused)
        _remember((subscripts, *map(_operand_key, arrays), *len_groups.items()), subscripts, run)
        if library.name in _STRUCTURED and len(subscripts) <= HOT_KEY_MAX_CHARS:
            remember_structure(
                structure_key_of(subscripts, arrays, tuple(len_groups.items())),
                lambda: _structure(library, subscripts, shapes, supplements, optimized, options,
                                   limit, layouts))
    if out is not None and convert is None:
        rule = out_casting(casting, optimize, len(arrays), out)
        _check_out(out, library, make_plan(subscripts, shapes, supplements), arrays, options, rule)
        return _write_out(out, library, run(*arrays), rule)
    result = run(*arrays)
    if convert is not None:
        result = from_library(convert, result, scalar=convert != "object")  # object: a 0-d array
        if out is not None:
            np.copyto(out, result, casting=out_casting(casting, optimize, len(arrays), out))
            return out
    return apply_order(result, order, given) if numpy_style else result


contract.__signature__ = inspect.signature(_contract)  # type: ignore[attr-defined]


def _operand_key(op: Any) -> Any:
    """An operand's part of a hot-dict key, as `contract`'s hot path builds it."""
    return op.shape if type(op) is _ndarray else (type(op), op.shape, getattr(op, "is_cuda", None))


def _new_shape(subscripts: str, operands: tuple[Any, ...], hot_key: tuple[Any, ...]
               ) -> Callable[..., Any] | None:
    """The runner of a default-option call of a new shape whose structure is known
    (`structures`: numpy, and torch on the CPU), now in the hot dict; None: the checked route
    takes the call."""
    n = len(operands)
    try:
        structure = known_structure(structure_key_of(subscripts, operands, hot_key[n + 1:]))
    except (AttributeError, TypeError):   # (no flags or dtype, a symbolic size: never known)
        return None
    if structure is None:
        return None
    run = structure.runner(tuple([tuple(k[1]) if k and isinstance(k[0], type) else k
                                  for k in hot_key[1:n + 1]]))
    if run is DECLINED:
        return None
    _remember(hot_key, subscripts, run)
    return run  # type: ignore[no-any-return]


#: The backends whose new shapes a known structure runs (`structures`): numpy (one einsum
#: call or the steps' program) and torch on the CPU (one einsum call; its steps' choice
#: against one einsum is priced per shape, so a shape past one einsum call is planned).
_STRUCTURED = ("numpy", "torch")


def _structure(backend: Backend, subscripts: str, shapes: tuple[tuple[int, ...], ...],
               supplements: tuple[tuple[str, int], ...], optimize: Any, options: BackendOptions,
               limit: Any, layouts: tuple[int, ...] | None) -> Structure:
    """The `Structure` of a default-option call: its programs compiled by the backend, a new
    shape's runner provisional until its full search (`_Provisional`)."""
    module, model = load(backend), backend.cost_model or NUMPY_MODEL
    plan = make_plan(subscripts, shapes, supplements)
    limit = _backend_limit(backend, limit)

    def compile_direct(schedule: Schedule) -> Callable[..., Any]:
        return module.compile(plan, schedule, options)  # (one einsum call: any shape)

    def compile_steps(schedule: Schedule, specs: Any) -> Callable[[Any], Callable[..., Any]] | None:
        if backend is _NUMPY:
            return module.compile_any_extents(schedule, specs, options)  # type: ignore[no-any-return]
        # torch: the structure's steps as its model ran them, one einsum call along a path
        # (any shape), or declined (the steps' choice is then priced per shape)
        one_call = as_one_einsum(schedule, "auto", model)
        if one_call.strategy != "direct":
            return None
        run = module.compile(plan, one_call, options)
        return lambda ext: run

    def provisional(run: Callable[..., Any], upgrade_after: int,
                    new_shapes: tuple[tuple[int, ...], ...]) -> Callable[..., Any]:
        if layouts is None and backend is _NUMPY:
            run = _guarded(run, backend, subscripts, new_shapes, supplements, optimize, options,
                           limit)

        def full() -> Callable[..., Any]:
            return _runner(backend, subscripts, new_shapes, supplements, optimize, options, limit,
                           layouts, tiered=False)

        return _Provisional(run, upgrade_after, full)   # (it counts the call it is made for)

    return Structure(plan, layouts, backend.uses_einsum, model, limit,
                     compile_direct, compile_steps, provisional,
                     runs_cheap_plans=getattr(model, "cheap_first_plans", True),
                     one_call_for_steps=backend is not _NUMPY)


def _sublist_call(first: Any, operands: tuple[Any, ...],
                  single_call: bool = False) -> tuple[str, tuple[Any, ...]]:
    """np.einsum's sublist form, or numpy's error for a call without subscripts."""
    if first is _NO_SUBSCRIPTS:
        raise OperandCountError("contract needs the subscripts string and at least one operand, "
                                "or operands each followed by its sublist, e.g. contract(a, [0, 1], "
                                "b, [1, 2], [0, 2])")
    if isinstance(first, str) or not operands:
        check_subscripts(first)
    return from_sublists(first, operands, single_call)


def _remember(key: tuple[Any, ...], subscripts: str, run: Callable[..., Any]) -> None:
    """Keep ``run`` in the hot dict (cleared when full; strings over `HOT_KEY_MAX_CHARS` are
    left to the byte-bounded caches)."""
    if len(subscripts) <= HOT_KEY_MAX_CHARS:
        if len(_HOT) >= HOT_CACHE_SIZE:
            _HOT.clear()
        try:
            _HOT[key] = run
        except TypeError:  # an unhashable shape (torch.compile's symbolic sizes): not kept
            return
        if type(run) is _Provisional:
            run.homes.append((_HOT, key))


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
    """The result written into ``out=`` under the casting ``rule``, by the library that owns
    it (numpy's `copyto`, or the backend's ``write_out``: CuPy's, on the device)."""
    if backend.name == "numpy":
        np.copyto(out, result, casting=rule)
    else:
        load(backend).write_out(out, result, rule)
    return out


# -------------------------------------------------------------------------- torch.compile
# TorchDynamo must not trace the planner: contract is registered as one graph node by
# backends/torch_compile_hook.py, as soon as torch._dynamo is loaded and without ever importing
# it.  The hook also replaces `_is_compiling` with torch.compiler.is_compiling, so that an
# expression built while Dynamo traces skips planning and its __call__ forwards to contract.
def _never_compiling() -> bool:
    return False


_is_compiling: Callable[[], bool] = _never_compiling


def _install_compile_hook() -> None:
    from .backends import torch_compile_hook

    torch_compile_hook.install()


_install_compile_hook()
