"""The numpy backend: compile a schedule into numpy calls (BLAS matmul, einsum's C loop).

All planning happened upstream (``contractions.schedule``: paths, layouts, the direct/pairwise
choice; ``contractions.model``: the time model and its prices).  This module supplies the numpy
`ArrayOps` and the backend interface ``compile``/``describe``.  ``build_program`` is the same
pipeline on bare integer labels, for tests and benchmarks that bypass the grouped front end.

    >>> program = build_program(((0, 1), (1, 2)), (0, 2), ((2, 3), (3, 4)))
    >>> x, y = np.ones((2, 3)), np.ones((3, 4))
    >>> program(x, y).tolist() == np.einsum('ij,jk->ik', x, y).tolist()
    True
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ContractionError, quoted
from ..model.host import cpu_model
from ..schedule import Schedule, describe_schedule, framework_path_peak, schedule_labels
from .compile import ArrayOps, compile_schedule
from .compile import compile_any_extents as compile_any_extents_with
from .measured import MeasuredRoute, measured_seconds, measuring, remembered
from .scratch import take_scratch
from .workers import split_matmul

try:  # numpy >= 2
    from numpy._core.multiarray import c_einsum as _c_einsum
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import c_einsum as _c_einsum  # type: ignore[no-redef]

__all__ = ["MEASURE_MIN_NS", "NUMPY_OPS", "PAIRS_AS_VIEWS", "NumpyProgram", "build_program", "build_program_with", "compile",
           "cpu_name", "describe", "measured_route", "route_seconds", "routes"]

#: ``explain`` prints this backend's schedule steps (it runs them one by one).
RUNS_SCHEDULE_STEPS = True

Labels = tuple[int, ...]
Shape = tuple[int, ...]


def _sum(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    # dtype=x.dtype keeps ints/bools as einsum does (add.reduce would widen small ints).
    total = np.add.reduce(x, axes, x.dtype)
    # A full sum of an object array is the bare Python object: keep an array (and its dtype).
    return total if type(total) is np.ndarray else np.asarray(total, x.dtype)


def _as_array(x: Any) -> Any:
    # einsum's 0-d object result is the bare Python object: keep the object dtype
    return np.asarray(x) if isinstance(x, (np.ndarray, np.generic)) else np.asarray(x, object)


def _matmul_c(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # matmul's default order 'K' lays its result out in the operands' memory order, so a
    # step fed a permuted view returned a permuted result, which the next step's contiguous
    # view silently copied (measured: 0.5M elements beyond the modelled peak of a three-step
    # chain).  Intermediates are asked for in C order, as the schedule counts them; the
    # keyword costs ~0.8 us a call, so the last step (whose result is only split by a
    # reshape, always a view) keeps the default.
    return np.matmul(x, y, order="C")


def _scratch_contiguous(x: np.ndarray, capacity: int) -> np.ndarray:
    if x.flags.c_contiguous or x.dtype.hasobject:
        return np.ascontiguousarray(x)
    out = take_scratch(x.shape, x.dtype, capacity)
    np.copyto(out, x)
    return out


def _scratch_matmul(x: np.ndarray, y: np.ndarray, capacity: int) -> np.ndarray:
    # matmul into a scratch buffer shaped as matmul's result; the schedule's matmul views
    # share their batch axes or one is a plain matrix, anything else takes the fresh path.
    if x.dtype != y.dtype or x.dtype.hasobject:
        return np.matmul(x, y, order="C")
    if x.shape[:-2] == y.shape[:-2] or y.ndim == 2:
        shape = x.shape[:-1] + y.shape[-1:]
    elif x.ndim == 2:
        shape = y.shape[:-2] + (x.shape[0], y.shape[-1])
    else:
        return np.matmul(x, y, order="C")
    return np.matmul(x, y, out=take_scratch(shape, x.dtype, capacity))


SCRATCH_MIN_ELEMENTS = 32768
"""Gathers and intermediates from this many elements up may use scratch buffers (256 KiB of
float64, twice glibc's default ``mmap`` and trim thresholds, below which ``malloc``'s free
lists hand memory back without page faults and a pool lookup would only add Python time)."""


def _set_block(out: np.ndarray, index: tuple[slice, ...], block: np.ndarray) -> None:
    out[index] = block


def _add_block(out: np.ndarray, index: tuple[slice, ...], block: np.ndarray) -> None:
    out[index] += block


def _matmul_into(x: np.ndarray, y: np.ndarray, dest: np.ndarray, shape: tuple[int, ...],
                 workers: int = 1) -> None:
    # The schedule checked that ``dest`` (a block's slice of the result buffer) reshapes to
    # the product's shape as a view; a reshape that copied would lose the block, so that is
    # refused here rather than trusted (a copy never overlaps its source).
    out = dest.reshape(shape)
    if not np.may_share_memory(out, dest):
        raise AssertionError("a block's slice of the result buffer did not reshape to a view")
    if workers > 1:
        split_matmul(x, y, workers, out)
    else:
        np.matmul(x, y, out=out)


def _matmul_split(x: np.ndarray, y: np.ndarray, workers: int, capacity: int = 0) -> np.ndarray:
    # a C-ordered result (or a scratch buffer of ``capacity`` elements, an intermediate's),
    # its stack computed in ``workers`` parts at once (`workers.split_matmul`)
    shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1])
    dtype = np.result_type(x, y)
    out = take_scratch(shape, dtype, capacity) if capacity and not dtype.hasobject else np.empty(shape, dtype)
    return split_matmul(x, y, workers, out)


def _common_dtype(arrays: Sequence[np.ndarray]) -> np.dtype:
    return np.result_type(*arrays)


#: numpy's implementation of the schedule's operations.  ``c_einsum`` is numpy's C einsum
#: without the Python wrapper's argument parsing (the direct strategy is overhead-bound).
NUMPY_OPS = ArrayOps(
    einsum=_c_einsum,
    matmul=np.matmul,
    matmul_c=_matmul_c,
    # order 'K' (the default) writes in the operands' memory order, ~1.5x faster than forcing
    # C order when the result order transposes them; a strided result is fine.
    multiply=np.multiply,
    # Methods, not np.ndarray's descriptors: a full sum or a 0-d einsum hands back a numpy
    # scalar, which has the same methods.
    permute=lambda x, perm: x.transpose(perm),
    reshape=lambda x, shape: x.reshape(shape),
    diagonal=lambda x, a, b: x.diagonal(0, a, b),
    sum=_sum,
    contiguous=np.ascontiguousarray,
    swap_last=lambda x: x.swapaxes(-1, -2),
    copy=np.array,
    as_array=_as_array,
    common_dtype=_common_dtype,
    dtype=lambda x: x.dtype,
    astype=lambda x, dtype: x.astype(dtype),
    zeros=lambda shape, dtype, like: np.zeros(shape, dtype),
    empty=lambda shape, dtype, like: np.empty(shape, dtype),
    set_block=_set_block,
    add_block=_add_block,
    matmul_into=_matmul_into,
    matmul_split=_matmul_split,
    scratch_contiguous=_scratch_contiguous,
    scratch_matmul=_scratch_matmul,
    scratch_min_elements=SCRATCH_MIN_ELEMENTS,
)


@dataclass(frozen=True)
class NumpyProgram:
    """A compiled numpy contraction for one shape signature; calling it does only arithmetic.

    ``schedule`` is what runs; ``execute`` is the bare callable behind ``__call__``.

        >>> p = build_program(((0, 1),), (1, 0), ((2, 3),))
        >>> p(np.arange(6.0).reshape(2, 3)).shape, p.schedule.strategy
        ((3, 2), 'direct')
    """

    schedule: Schedule
    execute: Callable[..., np.ndarray] = field(repr=False, compare=False)

    @property
    def strategy(self) -> str:
        return self.schedule.strategy

    @property
    def einsum(self) -> str | None:
        return self.schedule.einsum

    def __call__(self, *arrays: np.ndarray) -> np.ndarray:
        return self.execute(*arrays)


def _canonical(inputs: Sequence[Sequence[int]], output: Sequence[int],
               shapes: Sequence[Sequence[int]]) -> tuple[tuple[Labels, ...], Labels, tuple[Shape, ...]]:
    return (tuple(tuple(int(lab) for lab in t) for t in inputs), tuple(int(lab) for lab in output),
            tuple(tuple(int(n) for n in s) for s in shapes))


@functools.lru_cache(maxsize=4096)
def build_program(inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...]) -> NumpyProgram:
    """Schedule and compile a contraction over integer labels (cached, thread-safe).

    ``inputs[k]`` labels operand ``k``'s axes (a repeated label is a diagonal), ``output`` the
    result's (unique, each present in some input); extents must agree up to size-1 broadcasting.

        >>> float(build_program(((7, 7),), (), ((3, 3),))(np.eye(3)))  # trace
        3.0
    """
    schedule = schedule_labels(*_canonical(inputs, output, shapes))
    return NumpyProgram(schedule=schedule, execute=compile_schedule(schedule, NUMPY_OPS))


def build_program_with(strategy: str, inputs: tuple[Labels, ...], output: Labels,
                       shapes: tuple[Shape, ...]) -> NumpyProgram:
    """``build_program`` with the strategy forced (``'direct'`` or ``'pairwise'``).

    For tests (both strategies on the same problem) and for re-measuring the direct threshold;
    ``'direct'`` needs at most 52 distinct labels.

        >>> build_program_with('pairwise', ((0,), (0,)), (), ((2,), (2,))).strategy
        'pairwise'
    """
    if strategy not in ("direct", "pairwise"):
        raise ValueError(f"strategy must be 'direct' or 'pairwise', got {strategy!r}")
    schedule = schedule_labels(*_canonical(inputs, output, shapes), strategy=strategy)
    return NumpyProgram(schedule=schedule, execute=compile_schedule(schedule, NUMPY_OPS))


# ------------------------------------------------------------------------ backend interface
# numpy arrays hold at most this many axes (64 since numpy 2, 32 before).
MAX_NDIM = getattr(np, "MAXDIMS", None) or (64 if int(np.__version__.split(".")[0]) >= 2 else 32)


def compile(plan: Any, schedule: Schedule, options: Any, route: str | None = None) -> Callable[..., np.ndarray]:
    """The numpy callable for ``schedule``; ``options.preferred_element_type`` casts first.  A
    large schedule measures its `routes` on its first calls, unless ``route`` forces one."""
    if route is not None and (route not in routes(schedule) or (route != "steps" and options.preferred_element_type)):
        raise ValueError(f"route {route!r} is not one of this schedule's routes {routes(schedule)}"
                         + (" (with dtype=, the steps alone)" if options.preferred_element_type else ""))
    if len(schedule.output_shape) > MAX_NDIM:
        raise ContractionError(
            f"{quoted(plan.expansion.subscripts)} would give a result of {len(schedule.output_shape)} "
            f"axes, but numpy arrays hold at most {MAX_NDIM}; sum some groups away in the output, "
            "or run it on torch or JAX")
    ops = _OBJECT_SAFE_OPS if _has_scalar_step(schedule) else NUMPY_OPS
    target = options.preferred_element_type

    def compiled(ops: ArrayOps) -> Callable[..., Any]:
        # With a target dtype the schedule converts the operands (per block when blocked; its
        # peak counts the copies).
        return _numpy_conventions(compile_schedule(schedule, ops, None if target is None else np.dtype(target)),
                                  schedule, half_in_single=target is None)

    whole = dataclasses.replace(ops, matmul_split=None)   # (every stack run whole)
    if route == "whole":
        return compiled(whole)
    run = compiled(ops)
    if route == "einsum":
        return _einsum_route(schedule, run)
    names = routes(schedule)
    if route is not None or target is not None or len(names) == 1 or not measuring():
        return run
    candidates = [("steps", run)]
    if "whole" in names:
        candidates.append(("whole", compiled(whole)))
    if "einsum" in names:
        candidates.append(("einsum", _einsum_route(schedule, run)))

    def settle(chosen: Callable[..., Any]) -> None:
        nonlocal run
        run = chosen

    chooser = MeasuredRoute(candidates, "steps", settle, sync=_no_sync,
                            key=_key(schedule), measures=_measurable, where=_host_name, host=True)
    run = chooser.entry()

    def execute(*arrays: Any) -> Any:
        return run(*arrays)

    return execute


# --------------------------------------------------------------- routes measured on the host
#: Modelled time (ns) from which a schedule's steps are measured against np.einsum along its
#: path on the first calls: below it the steps' Python is cheaper than einsum's own planning
#: of each call (tens of us), and a wrong pick costs less than the measuring.
MEASURE_MIN_NS = 1e6

#: Does np.einsum run a pair as one batched matmul on views where the operands allow
#: (numpy 2.4's ``bmm_einsum``)?  Else its pairs go through ``tensordot`` in its own label
#: order, and the einsum route's copies are bounded without the view rule.
try:
    from numpy._core import einsumfunc as _einsumfunc
    PAIRS_AS_VIEWS = hasattr(_einsumfunc, "bmm_einsum")
except ImportError:  # pragma: no cover - numpy 1.x
    PAIRS_AS_VIEWS = False

#: The dtypes measured (np.einsum's pairwise run accumulates as the steps do: BLAS types).
_MEASURED_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "complex64", "complex128"))


def routes(schedule: Schedule) -> tuple[str, ...]:
    """The routes a numpy call of ``schedule`` chooses between by measurement on its first
    calls, for an unblocked pairwise schedule (not a 0-d result) modelled at `MEASURE_MIN_NS`
    or more: ``'steps'`` (the model's pick); ``'whole'``, the same steps with every stack of
    products run whole, where the schedule splits one over the cores (`Step.workers`: whether
    the other cores are free is the machine's, decision 63); and ``'einsum'`` (np.einsum along
    the schedule's path, numpy's own pairwise run) for C operands with no size-1 broadcasting
    whose einsum run stays within the schedule's memory limit (`framework_path_peak`).  Which
    is faster moves with the CPU and its BLAS (dev/decisions.md 61), so it is timed, not priced.

    >>> from contractions.plan import make_plan
    >>> from contractions.schedule import make_schedule
    >>> routes(make_schedule(make_plan('ab,bc->ac', ((400, 500), (500, 600)), ())))
    ('steps', 'einsum')
    >>> routes(make_schedule(make_plan('ab,bc->ac', ((4, 5), (5, 6)), ())))
    ('steps',)
    """
    if (schedule.strategy != "pairwise" or schedule.blocking is not None
            or schedule.cost_ns < MEASURE_MIN_NS or not schedule.output_shape or len(schedule.inputs) < 2):
        return ("steps",)
    found: tuple[str, ...] = ("steps", "whole") if any(s.workers > 1 for s in schedule.steps) else ("steps",)
    if (schedule.einsum is None or schedule.layouts is not None
            or any(len(pair) != 2 for pair in schedule.path)):
        return found
    extent = schedule.extents.__getitem__
    if any(n != extent(label) for term, shape in zip(schedule.inputs, schedule.shapes)
           for label, n in zip(term, shape)):
        return found   # (a size-1 axis broadcast against a longer one)
    limit = schedule.memory_limit
    if limit is not None and framework_path_peak(schedule, PAIRS_AS_VIEWS) > limit:
        return found
    return (*found, "einsum")


def _einsum_route(schedule: Schedule, steps: Callable[..., Any]) -> Callable[..., Any]:
    """np.einsum along the schedule's path; operands of a dtype not measured run ``steps``
    (a runner keyed by shapes meets other dtypes later: float16 and integer sums keep the
    steps' conventions)."""
    subscripts, path, einsum = schedule.einsum, ["einsum_path", *schedule.path], np.einsum
    assert subscripts is not None   # (`routes` offers this route only with one)
    measured = _MEASURED_DTYPES

    def along_path(*arrays: Any) -> Any:
        dtype = arrays[0].dtype
        if dtype not in measured or any(a.dtype != dtype for a in arrays):
            return steps(*arrays)
        return einsum(subscripts, *arrays, optimize=path)

    return along_path


def _measurable(arrays: Sequence[Any]) -> bool:
    dtype = arrays[0].dtype
    return dtype in _MEASURED_DTYPES and all(a.dtype == dtype and a.flags.c_contiguous for a in arrays)


def _no_sync() -> None:
    """Host arithmetic is done when its call returns."""


def _key(schedule: Schedule) -> tuple[Any, ...]:
    # (the steps' own text names them: two schedules of one path may differ in their layouts)
    steps = hashlib.blake2b(repr((schedule.preparations, schedule.steps, schedule.finish)).encode(),
                            digest_size=8).hexdigest()
    return ("numpy", np.__version__, schedule.einsum, schedule.shapes, schedule.path, steps)


@functools.lru_cache(maxsize=1)
def cpu_name() -> str:
    """This host's CPU model and count (`contractions.model.host.cpu_model`: ``/proc/cpuinfo``'s
    model name where there is one), the device name a measured route is kept under in the plan
    store."""
    return f"{cpu_model()} x{os.cpu_count()}"


def _host_name(arrays: Sequence[Any]) -> str:
    return cpu_name()


def measured_route(schedule: Schedule) -> str | None:
    """The route measured for ``schedule`` in this process (None: not measured yet)."""
    return remembered(_key(schedule))


def route_seconds(schedule: Schedule) -> dict[str, float]:
    """Each route's best measured time (seconds) for ``schedule`` in this process."""
    return measured_seconds(_key(schedule))


def compile_any_extents(schedule: Schedule, specs: Any, options: Any
                        ) -> Callable[[Any], Callable[..., Any]]:
    """``for_shape(ext)``: the numpy callable of ``schedule`` (unblocked, pairwise) at the
    extents ``ext`` of its structure: the one program compiled once, its shapes read from the
    extents (`compile.compile_any_extents`); np.einsum's conventions as in `compile`."""
    ops = _OBJECT_SAFE_OPS if _has_scalar_step(schedule) else NUMPY_OPS
    target = options.preferred_element_type
    bind = compile_any_extents_with(schedule, specs, ops, None if target is None else np.dtype(target))

    def for_shape(ext: Any) -> Callable[..., Any]:
        return _numpy_conventions(bind(ext), schedule, half_in_single=target is None)

    return for_shape


# ------------------------------------------------------------ np.einsum's result conventions
def _einsum_array(*args: Any) -> Any:
    return _as_array(_c_einsum(*args))


def _multiply_array(x: Any, y: Any) -> Any:
    return _as_array(np.multiply(x, y))


#: `NUMPY_OPS` for schedules with a 0-d intermediate: an object-dtype einsum or product of
#: 0-d operands gives the bare Python object, which the next step could not reshape.
_OBJECT_SAFE_OPS = dataclasses.replace(NUMPY_OPS, einsum=_einsum_array, multiply=_multiply_array)


def _has_scalar_step(schedule: Schedule) -> bool:
    if schedule.along_path:
        return True   # (its pairs' results are not planned: any may be 0-d)
    if schedule.blocking is not None:
        return any(_has_scalar_step(inner) for _, inner in schedule.blocking.inner)
    return any(not step.result_shape for step in schedule.steps[:-1])


_HALF = np.dtype(np.float16)


def _numpy_conventions(run: Callable[..., Any], schedule: Schedule,
                       half_in_single: bool = True) -> Callable[..., Any]:
    """np.einsum's conventions on top of a compiled schedule: a 0-d result is a numpy scalar
    (the bare object for object dtype), and float16 operands are contracted in float32 on a
    pairwise path (np.einsum's C loop accumulates half precision in single precision; a float16
    intermediate could overflow where the answer fits), the result cast back to float16 (not
    with a ``dtype=`` target: the schedule converts to that)."""
    scalar = not schedule.output_shape
    if schedule.strategy == "direct" and schedule.blocking is None and not schedule.along_path:
        if not scalar:
            return run  # c_einsum itself: np.einsum's own accumulation

        def direct_scalar(*arrays: Any) -> Any:
            result = run(*arrays)
            return result[()] if type(result) is np.ndarray else result

        return direct_scalar

    def pairwise(*arrays: Any) -> Any:
        for a in arrays if half_in_single else ():
            if a.dtype == _HALF and np.result_type(*arrays) == _HALF:
                result = run(*(b.astype(np.float32) for b in arrays))
                result = np.asarray(result).astype(_HALF)
                break
        else:
            result = run(*arrays)
        if scalar and type(result) is np.ndarray:
            return result[()]
        return result

    return pairwise


def describe(plan: Any, schedule: Schedule, options: Any) -> list[str]:
    """What runs, for ``explain``: the schedule's steps, and where the route is measured on the
    first calls (`routes`), that line."""
    lines = describe_schedule(schedule, plan.expansion.readable_symbol)
    names = routes(schedule)
    if options.preferred_element_type is None and len(names) > 1 and measuring():
        known = measured_route(schedule)
        what = {"steps": "these steps", "whole": "these steps with every stack whole",
                "einsum": "np.einsum along the path"}
        offered = [what[name] for name in names]
        if "einsum" in names:
            offered[-1] += (f" (which may hold {framework_path_peak(schedule, PAIRS_AS_VIEWS):,} elements "
                            "beyond operands and result)")
        lines.append("route: chosen by measurement on this shape's first calls (float and complex operands), "
                     + ("the faster of " if len(names) == 2 else "the fastest of ")
                     + ", ".join(offered[:-1]) + " and " + offered[-1]
                     + (f"; measured: {what[known]}" if known else ""))
    return lines
