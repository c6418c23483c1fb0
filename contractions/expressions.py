"""The verbs that plan once for fixed shapes: `contract_expression` (and the `ContractExpression`
it returns, opt_einsum's convention) and `contract_path` (opt_einsum's path and `PathInfo`).
Both always run the full search at once (`schedule.make_schedule`), never a cheaper first-call
tier (dev/decisions.md, "Planning that pays for itself").

>>> import numpy as np
>>> expr = contract_expression('WCa,Caib,WCi->WCb', (4, 2, 3), (2, 3, 5, 6), (4, 2, 5))
>>> expr(np.ones((4, 2, 3)), np.ones((2, 3, 5, 6)), np.ones((4, 2, 5))).shape, expr.output_shape
((4, 2, 6), (4, 2, 6))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from . import api as _api
from .api import (
    _SAFE,
    _AnyT,
    _ArrayT,
    _check_out,
    _NumpyT,
    _sublist_call,
    _write_out,
    contract,
)
from .arguments import normalise_supplements
from .backends import BackendOptions, backend_for, load
from .calls.runners import _DEFAULT_OPTIONS, _NUMPY, planned, runner
from .checks import (
    as_operands,
    check_dtypes,
    check_subscripts,
    checked_backend,
    checked_optimize,
    checked_shapes,
    normalise_memory_limit,
    shapes_of,
)
from .compat import (
    backend_name,
    check_expression_keywords,
    evaluated_constants,
    from_library,
    from_sublists,
    numpy_optimize,
    out_casting,
    path_info,
    to_library,
)
from .errors import ContractionError, OperandCountError, SizeMismatchError, quoted
from .explaining import explain
from .plan import make_plan

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["ContractExpression", "contract_expression", "contract_path"]

_ndarray = np.ndarray


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
        check_subscripts(subscripts)
        #: opt_einsum's ``constants=``: operand position -> the array, converted once here
        self.constants: dict[int, Any] = dict(constants or {})
        self._converted: dict[tuple[str, str], dict[int, Any]] = {}  # constants per library
        self.subscripts = subscripts
        self.shapes = shapes
        self.supplements = supplements
        self.optimize = optimize
        self.memory_limit = memory_limit
        if _api._is_compiling():
            return  # built inside torch.compile: planned when called (see _traced_call)
        self._plan_now()

    def _plan_now(self) -> None:
        # the expression's entry point: its plan made once, passed to the schedule and runners
        self.plan = make_plan(self.subscripts, self.shapes, self.supplements)
        self.schedule = planned(self.plan, self.optimize, self.memory_limit)
        self._numpy = runner(_NUMPY, self.plan, self.optimize, _DEFAULT_OPTIONS, self.memory_limit)

    def __getattr__(self, name: str) -> Any:
        # Only reached for an expression built under torch.compile, when used outside it.
        if name in ("plan", "schedule", "_numpy"):
            self._plan_now()
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
        return runner(checked_backend(backend), self.plan, self.optimize, options, self.memory_limit)

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
        if _api._is_compiling():
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
                    check_dtypes(operands)
                    raise
        if len(operands) != len(self.shapes):
            _wrong_count(self, len(self.shapes), len(operands))
        backend = backend_for(operands)
        arrays = as_operands(operands, backend)
        check_dtypes(arrays)
        shapes = shapes_of(arrays)
        if shapes != self.shapes:
            raise SizeMismatchError(
                f"this expression for {quoted(self.subscripts)} was built for operand shapes "
                f"{', '.join(map(str, self.shapes))} but was called with "
                f"{', '.join(map(str, shapes))}; build another with contract_expression or call "
                "contract")
        options = BackendOptions(precision, preferred_element_type)
        return runner(backend, self.plan, self.optimize, options, self.memory_limit)(*arrays)


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
    arrays = as_operands(operands, chosen)
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
    return ContractExpression(subscripts, checked_shapes(shapes, "contract_expression"),
                              normalise_supplements(len_groups, subscripts, contract_expression), checked_optimize(numpy_optimize(optimize), subscripts, len(shapes)),
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
    check_subscripts(subscripts)
    supplements = normalise_supplements(len_groups, subscripts, contract_path)
    if shapes:
        shape_list = checked_shapes(operands, "contract_path")
    else:
        shape_list = shapes_of(as_operands(operands, _NUMPY if not operands else backend_for(operands)))
    opt = checked_optimize(numpy_optimize(optimize), subscripts, len(shape_list))
    plan = make_plan(subscripts, shape_list, supplements)
    schedule = planned(plan, opt, normalise_memory_limit(memory_limit))
    path = [tuple(step) for step in schedule.path]
    return path, path_info(plan.expansion.einsum, plan.shapes, path, use_blas=use_blas)


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
