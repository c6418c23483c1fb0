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

import functools
import math
import operator
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .arguments import normalise_supplements
from .backends import Backend, BackendOptions, backend_for, backend_named, load
from .errors import ContractionError, SizeMismatchError, quoted
from .expand import expand
from .plan import PLAN_CACHE_SIZE, Plan, make_plan
from .schedule import CONVERTED, FORTRAN, STRIDED, Schedule, make_schedule, normalise_optimize
from .solver import identifiability, solve_call

__all__ = ["ContractExpression", "contract", "contract_expression", "explain", "expand_subscripts"]

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
@functools.lru_cache(maxsize=PLAN_CACHE_SIZE)
def _planned(subscripts: str, shapes: tuple[tuple[int, ...], ...],
             supplements: tuple[tuple[str, int], ...], optimize: Any,
             limit: Any = "default", layouts: tuple[int, ...] | None = None,
             use_einsum: bool = True) -> tuple[Plan, Schedule]:
    plan = make_plan(subscripts, shapes, supplements)
    return plan, make_schedule(plan, optimize, use_einsum=use_einsum, memory_limit=limit,
                               layouts=layouts)


@functools.lru_cache(maxsize=PLAN_CACHE_SIZE)
def _compiled(backend: Backend, subscripts: str, shapes: tuple[tuple[int, ...], ...],
              supplements: tuple[tuple[str, int], ...], optimize: Any,
              options: BackendOptions, limit: Any = "default",
              layouts: tuple[int, ...] | None = None) -> Callable[..., Any]:
    plan, schedule = _planned(subscripts, shapes, supplements, optimize, limit, layouts,
                              backend.uses_einsum)
    run = load(backend).compile(plan, schedule, options)
    if layouts is None and backend is _NUMPY and _copies_could_break(schedule):
        return _guarded(run, backend, subscripts, shapes, supplements, optimize, options, limit)
    return run


def _copies_could_break(schedule: Schedule) -> bool:
    """Could copies of strided or converted operands (which a schedule planned for
    C-contiguous operands of one dtype does not count) take a call past its limit?"""
    if schedule.memory_limit is None or schedule.strategy != "pairwise":
        return False
    operands = sum(math.prod(s) for s in schedule.shapes)
    return schedule.peak_extra + operands > schedule.memory_limit


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
                               layouts)(*arrays)
        return run(*arrays)

    return guarded


def _layouts_of(arrays: Sequence[Any], options: BackendOptions) -> tuple[int, ...] | None:
    """`Schedule.layouts` for numpy operands: which are strided, which are converted."""
    if not all(type(a) is _ndarray for a in arrays):
        return None
    target = options.preferred_element_type
    dtype = np.dtype(target) if target is not None else np.result_type(*arrays)
    codes = tuple((0 if a.flags.c_contiguous else FORTRAN if a.flags.f_contiguous else STRIDED)
                  | (CONVERTED if a.dtype != dtype else 0) for a in arrays)
    return codes if any(codes) else None


def _runner(backend: Backend, subscripts: str, shapes: tuple[tuple[int, ...], ...],
            supplements: tuple[tuple[str, int], ...], optimize: Any,
            options: BackendOptions, limit: Any = "default",
            layouts: tuple[int, ...] | None = None) -> Callable[..., Any]:
    limit = _backend_limit(backend, limit)
    if backend is not _NUMPY:
        layouts = None
    try:
        return _compiled(backend, subscripts, shapes, supplements, optimize, options, limit, layouts)
    except TypeError as exc:
        if "unhashable" not in str(exc):
            raise
    # An unhashable option (a list as precision, say): plan through the caches, compile afresh.
    plan, schedule = _planned(subscripts, shapes, supplements, optimize, limit, layouts,
                              backend.uses_einsum)
    return load(backend).compile(plan, schedule, options)


def _backend_limit(backend: Backend, limit: Any) -> Any:
    """The memory limit a backend's schedule honours, from its declared capabilities: none
    where the framework plans its own buffers (JAX); ``'default'`` only where the backend
    blocks by default (numpy), else only an explicit limit (torch: blocks are written in
    place, which torch.vmap cannot batch; dask bounds each of its blocks itself)."""
    if not backend.honours_memory_limit or (limit == "default" and not backend.blocks_by_default):
        return None
    return limit


_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def normalise_memory_limit(memory_limit: Any, itemsize: int = 8) -> Any:
    """``memory_limit=`` as the schedule takes it: None, ``'default'``, ``'max_input'`` or a
    number of elements.  Strings with a byte unit (``'64MB'``, ``'1.5GiB'``) are divided by
    ``itemsize`` (the result dtype's; 8 when shapes alone are known).

    >>> normalise_memory_limit('1MiB'), normalise_memory_limit(10**6), normalise_memory_limit(None)
    (131072, 1000000, None)
    """
    if memory_limit is None or (isinstance(memory_limit, str) and memory_limit in ("default", "max_input")):
        return memory_limit
    if isinstance(memory_limit, bool):
        raise TypeError("memory_limit must be a number of elements, a size like '64MB', "
                        "'default', 'max_input' or None, not a bool")
    if isinstance(memory_limit, str):
        import re

        found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([kmg]i?b|b)\s*", memory_limit.lower())
        if not found:
            raise ValueError(f"memory_limit={memory_limit!r}: write a number of elements, a size "
                             "such as '64MB' or '1GiB', 'default', 'max_input' or None")
        memory_limit = float(found.group(1)) * _UNITS[found.group(2)] / itemsize
    try:
        elements = int(memory_limit)
    except (TypeError, ValueError):
        raise TypeError(f"memory_limit must be a number of elements or a size string, not "
                        f"{type(memory_limit).__name__}") from None
    if elements < 1:
        raise ValueError(f"memory_limit={memory_limit!r} must be at least one element")
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


def contract(subscripts: str, *operands: Any, optimize: Any = _AUTO,
             memory_limit: Any = _DEFAULT_LIMIT, precision: Any = None,
             preferred_element_type: Any = None, out: Any = None, dtype: Any = None,
             **len_groups: int) -> Any:
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

    ``precision`` and ``preferred_element_type`` are passed to ``jnp.einsum`` on JAX.  On numpy
    and torch, ``preferred_element_type`` is the dtype the operands are converted to before
    contracting and ``precision`` is ignored.  ``dtype`` is np.einsum's name for the same
    thing.  ``out`` (numpy only, as in np.einsum) is an array of the result's shape that the
    result is written into and that is returned; its dtype must hold the result's safely.

    >>> import numpy as np
    >>> zo, za = np.ones((3, 2, 5)), np.ones((3, 2, 4))
    >>> contract('WCo,WCa->Cao', zo, za, len_W=1).shape
    (2, 4, 5)
    >>> contract('Wa,Wab,Wb->W', np.ones((2, 3)), np.ones((2, 3, 4)), np.ones((2, 4)),
    ...          optimize=[(1, 2), (0, 1)]).tolist()
    [12.0, 12.0]
    """
    if (optimize is _AUTO and memory_limit is _DEFAULT_LIMIT and preferred_element_type is None
            and out is None and dtype is None):
        # Hot path: every operand a numpy array and every len_* a plain int.  One dict lookup
        # keyed on (subscripts, *shapes, *len items) yields the compiled callable; everything
        # else happens once, on the first call of a signature.
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
                    return run(*operands)
                return _numpy_first_call(subscripts, operands, len_groups, tuple(key))
    if dtype is not None:
        if preferred_element_type is not None and np.dtype(dtype) != np.dtype(preferred_element_type):
            raise TypeError(f"dtype={dtype!r} and preferred_element_type={preferred_element_type!r} "
                            "disagree; they mean the same thing, pass one")
        preferred_element_type = dtype
    return _contract_general(subscripts, operands, len_groups, optimize,
                             BackendOptions(precision, preferred_element_type), out, memory_limit)


def _check_subscripts(subscripts: Any) -> None:
    if not isinstance(subscripts, str):
        raise TypeError(f"subscripts must be a str, got {type(subscripts).__name__}")


def _numpy_first_call(subscripts: str, operands: Sequence[Any], len_groups: Mapping[str, Any],
                      key: tuple[Any, ...]) -> Any:
    _check_subscripts(subscripts)
    supplements = normalise_supplements(len_groups)
    shapes = tuple(op.shape for op in operands)
    run = _runner(_NUMPY, subscripts, shapes, supplements, "auto", _DEFAULT_OPTIONS)
    # (where copies of strided or mixed-dtype operands could break the limit, `run` checks
    # the operands and re-plans for theirs: see `_guarded`)
    if len(_HOT) >= HOT_CACHE_SIZE:
        _HOT.clear()
    _HOT[key] = run
    return run(*operands)


def _contract_general(subscripts: str, operands: Sequence[Any], len_groups: Mapping[str, Any],
                      optimize: Any, options: BackendOptions, out: Any = None,
                      memory_limit: Any = "default") -> Any:
    _check_subscripts(subscripts)
    backend = backend_for(operands)
    arrays = _as_operands(operands, backend)
    supplements = normalise_supplements(len_groups)
    shapes = _shapes_of(arrays)
    optimize = normalise_optimize(optimize)
    limit = normalise_memory_limit(memory_limit, _itemsize(arrays, options))
    layouts = _layouts_of(arrays, options) if backend is _NUMPY else None
    run = _runner(backend, subscripts, shapes, supplements, optimize, options, limit, layouts)
    if out is None:
        return run(*arrays)
    plan, _ = _planned(subscripts, shapes, supplements, optimize, _backend_limit(backend, limit),
                       layouts)
    _check_out(out, backend, plan, arrays, options)
    np.copyto(out, run(*arrays), casting="safe")
    return out


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
               options: BackendOptions) -> None:
    """``out=`` is checked like np.einsum checks it, before any arithmetic."""
    if backend.name != "numpy":
        raise TypeError(f"out= is supported for numpy operands only ({backend.name} arrays were "
                        "given); use the returned array")
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out= must be a numpy array, not {type(out).__name__}")
    if out.shape != plan.output_shape:
        raise SizeMismatchError(f"out= has shape {out.shape} but {quoted(plan.parsed.subscripts)} gives "
                                f"{plan.output_shape} here")
    result = (np.dtype(options.preferred_element_type) if options.preferred_element_type is not None
              else np.result_type(*arrays))
    if not np.can_cast(result, out.dtype, "safe"):
        raise TypeError(f"out= has dtype {out.dtype} but the result is {result}, which it cannot "
                        "hold safely; pass an out of that dtype (or dtype= to compute in another)")
    if not out.flags.writeable:
        raise ValueError("out= is read-only")


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
                 memory_limit: Any = "default") -> None:
        _check_subscripts(subscripts)
        self.subscripts = subscripts
        self.shapes = shapes
        self.supplements = supplements
        self.optimize = optimize
        self.memory_limit = memory_limit
        self.plan, self.schedule = _planned(subscripts, shapes, supplements, optimize, memory_limit)
        self._numpy = _runner(_NUMPY, subscripts, shapes, supplements, optimize, _DEFAULT_OPTIONS,
                              memory_limit)

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
        return _runner(backend_named(backend), self.subscripts, self.shapes, self.supplements,
                       self.optimize, options, self.memory_limit)

    def explain(self, backend: str = "numpy") -> str:
        """The `explain` report of this expression (for ``backend``'s schedule)."""
        return explain(self.subscripts, *self.shapes, optimize=self.optimize, backend=backend,
                       memory_limit=self.memory_limit,
                       **{f"len_{g}": n for g, n in self.supplements})

    def __call__(self, *operands: Any, precision: Any = None,
                 preferred_element_type: Any = None) -> Any:
        if len(operands) == len(self.shapes) and preferred_element_type is None:
            for op, shape in zip(operands, self.shapes):
                if type(op) is not _ndarray or op.shape != shape:
                    break
            else:
                return self._numpy(*operands)
        backend = backend_for(operands)
        arrays = _as_operands(operands, backend)
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


def contract_expression(subscripts: str, *shapes: Sequence[int], optimize: Any = "auto",
                        memory_limit: Any = "default", **len_groups: int) -> ContractExpression:
    """Plan, schedule and compile a contraction once for these operand shapes.

    The familiar opt_einsum/cotengra convention: the returned `ContractExpression` is called
    with operands of exactly these shapes (numpy, JAX or torch) and skips every lookup.
    ``memory_limit`` is as for `contract` (a byte size assumes 8-byte elements here).

    >>> import numpy as np
    >>> expr = contract_expression('WCo,WCa->Cao', (3, 2, 5), (3, 2, 4), len_W=1)
    >>> expr.schedule.path, expr(np.ones((3, 2, 5)), np.ones((3, 2, 4))).shape
    (((0, 1),), (2, 4, 5))
    """
    return ContractExpression(subscripts, _checked_shapes(shapes, "contract_expression"),
                              normalise_supplements(len_groups), normalise_optimize(optimize),
                              normalise_memory_limit(memory_limit))


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
    supplements = normalise_supplements(len_groups)
    shapes, ndims = _shapes_or_ndims(shapes_or_ndims, "expand_subscripts")
    if shapes is not None:
        return make_plan(subscripts, shapes, supplements).expansion.einsum
    parsed, lengths = solve_call(subscripts, ndims, supplements, what="ndim")
    return expand(parsed, lengths).einsum


def explain(subscripts: str, *shapes_or_operands: Any, optimize: Any = "auto",
            backend: str | None = None, memory_limit: Any = "default", **len_groups: int) -> str:
    """A report of how ``subscripts`` is solved, expanded, scheduled and run.

    With shapes (or arrays) it includes the extents and the schedule the backend would run:
    its strategy, the pairwise path in ``optimize=`` form, each step with its kernel and
    modelled cost, any blocks, the FLOP count and the peak extra memory (elements alive at once
    beyond operands and result) against ``memory_limit``.  The backend is the operands' (with
    arrays) or ``backend`` (``'numpy'`` by default); with bare ndims (ints) the report stops at
    the expansion.

    >>> print(explain('WCo,WCa->Cao', (3, 2, 5), (3, 2, 4), len_W=1))  # doctest: +ELLIPSIS
    subscripts      'WCo,WCa->Cao'
    ...
    path            [(0, 1)]...
    ...
    """
    supplements = normalise_supplements(len_groups)
    shapes, ndims = _shapes_or_ndims(shapes_or_operands, "explain")
    info = identifiability(subscripts, [g for g, _ in supplements])
    lines = [f"subscripts      {subscripts!r}"]
    alone = identifiability(subscripts).describe()
    if supplements:
        given = ", ".join(f"len_{g}={n}" for g, n in supplements)
        state = "determined" if not info.needs_supplement else info.describe()
        lines.append(f"identifiability {state} with {given} (the string alone: {alone})")
    else:
        lines.append(f"identifiability {alone}")
    runs = [r for r in info.runs if len(r) > 1]
    lines.append("co-travelling   " + ("; ".join("".join(r) + " (only the total matters)" for r in runs)
                                       if runs else "none"))
    plan: Plan | None = None
    if backend is not None:
        chosen = backend_named(backend)
    elif any(hasattr(item, "shape") for item in shapes_or_operands):
        chosen = backend_for(shapes_or_operands)
    else:
        chosen = _NUMPY
    if shapes is not None:
        opt = normalise_optimize(optimize)
        arrays = [item for item in shapes_or_operands if hasattr(item, "dtype")]
        limit = _backend_limit(chosen, normalise_memory_limit(
            memory_limit, _itemsize(arrays, _DEFAULT_OPTIONS)))   # 8 bytes for bare shapes
        layouts = (_layouts_of(shapes_or_operands, _DEFAULT_OPTIONS)
                   if chosen is _NUMPY and arrays and len(arrays) == len(shapes_or_operands) else None)
        plan, schedule = _planned(subscripts, shapes, supplements, opt, limit, layouts,
                                  chosen.uses_einsum)
        exp, lengths = plan.expansion, plan.lengths
    else:
        parsed, lengths = solve_call(subscripts, ndims, supplements, what="ndim")
        exp = expand(parsed, lengths)
    lines.append("groups")
    for (g, labels), n in zip(exp.group_labels, lengths):
        syms = "".join(exp.readable_symbol(lab) for lab in labels) or "-"
        ext = f" extents {tuple(plan.extents[lab] for lab in labels)}" if plan is not None else ""
        lines.append(f"  {g}: {n} ax{'is' if n == 1 else 'es'} -> {syms}{ext}")
    lines.append(f"expanded        {exp.readable!r}")
    if plan is None:
        return "\n".join(lines)
    module = load(chosen)
    runs_steps = getattr(module, "RUNS_SCHEDULE_STEPS", False)
    lines.append(f"output shape    {plan.output_shape}")
    strategy = f"{schedule.strategy}, " if runs_steps else ""
    lines.append(f"backend         {chosen.name} ({strategy}optimize={schedule.optimizer!r})")
    path = f"{[tuple(p) for p in schedule.path]}"
    if runs_steps and schedule.strategy == "direct" and len(plan.shapes) > 1:
        path += "  (not taken: one einsum call; pass it as optimize= to run pairwise)"
    lines.append(f"path            {path}")
    lines.append("schedule")
    described = module.describe(plan, schedule, _DEFAULT_OPTIONS)
    if hasattr(module, "describe_operands") and shapes_or_operands and all(
            hasattr(item, "shape") and not isinstance(item, np.ndarray) for item in shapes_or_operands[:1]):
        # a backend whose work depends on the operands themselves (dask: their chunks)
        described = module.describe_operands(plan, schedule, _DEFAULT_OPTIONS, shapes_or_operands)
    lines.extend("  " + line for line in described)
    lines.append(f"FLOPs           {schedule.flops:,} (naive single einsum: {schedule.naive_flops:,})")
    if runs_steps:
        bound = ("no limit" if schedule.memory_limit is None
                 else f"limit {schedule.memory_limit:,}")
        lines.append(f"peak extra      {schedule.peak_extra:,} elements beyond operands and result "
                     f"({bound})")
    else:
        lines.append("peak extra      planned by the framework")
    if runs_steps and schedule.strategy == "pairwise":
        lines.append(f"modelled time   {schedule.cost_ns / 1e3:.3g} us (numpy time model)")
    return "\n".join(lines)
