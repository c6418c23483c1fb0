"""`contract`, and the one call path every call takes: the hot dict, else the checked route
(arguments checked, a backend chosen), the runner cache, and on a miss plan -> schedule (the
cheapest sound tier for a first call: `calls.tiers`) -> the backend's compiled runner.

A warm call is one dictionary lookup plus the arithmetic.  `expressions` (plans once for fixed
shapes) and `explaining` (reports) build on the caches here.

>>> import numpy as np
>>> x = np.ones((4, 2, 3)); cores = np.ones((2, 3, 5, 6)); z = np.ones((4, 2, 5))
>>> contract('WCa,Caib,WCi->WCb', x, cores, z).shape
(4, 2, 6)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import numpy as np

from .arguments import normalise_supplements
from .backends import Backend, BackendOptions, backend_for, load
from .calls.runners import _DEFAULT_OPTIONS, _NUMPY, HOT, keep_call, new_shape, runner
from .checks import (
    as_operands,
    check_dtypes,
    check_subscripts,
    checked_optimize,
    layouts_of,
    normalise_memory_limit,
    public_signature,
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
from .plan import Plan, make_plan

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
                run = HOT.get(hot_key)
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
                run = new_shape(subscripts, operands, hot_key)
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
    ``backend=`` conversion), then the runner (`calls.runners.runner`: cached, else planned in the cheapest
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
        check_numpy_options(subscripts, as_operands(operands, library, subscripts), dtype, casting,
                            order)
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
    arrays = as_operands(operands, library, subscripts)   # (with it: contract(s, [a, b]) is named)
    check_dtypes(arrays)
    options = (_DEFAULT_OPTIONS if precision is None and preferred_element_type is None
               else BackendOptions(precision, preferred_element_type))
    supplements = normalise_supplements(len_groups, subscripts, contract)  # (a typo: its close match)
    shapes = shapes_of(arrays)
    optimized = checked_optimize(numpy_optimize(optimize), subscripts, len(arrays))
    limit = normalise_memory_limit(memory_limit, result_itemsize(arrays, options))
    layouts = layouts_of(arrays, options) if library is _NUMPY else None
    plan = make_plan(subscripts, shapes, supplements)   # (every error of the call raised here)
    run = runner(library, plan, optimized, options, limit, layouts, tiered=True)
    if (optimize is _AUTO and memory_limit is _DEFAULT_LIMIT and options is _DEFAULT_OPTIONS
            and out is None and not numpy_style and backend is None
            and all(a is op for a, op in zip(arrays, given))
            and all(type(n) is int for n in len_groups.values())):
        # (only exact ints: 2.0 == 2 and True == 1 hash alike, but must be refused)
        keep_call(library, plan, arrays, len_groups, run, optimized, limit, layouts)
    if out is not None and convert is None:
        rule = out_casting(casting, optimize, len(arrays), out)
        _check_out(out, library, plan, arrays, options, rule)
        return _write_out(out, library, run(*arrays), rule)
    result = run(*arrays)
    if convert is not None:
        result = from_library(convert, result, scalar=convert != "object")  # object: a 0-d array
        if out is not None:
            np.copyto(out, result, casting=out_casting(casting, optimize, len(arrays), out))
            return out
    return apply_order(result, order, given) if numpy_style else result


contract.__signature__ = public_signature(_contract, returns="array")  # type: ignore[attr-defined]


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
