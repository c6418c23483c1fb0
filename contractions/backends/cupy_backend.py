"""The CuPy backend: the shared schedule compiled onto CuPy's own functions, on the device.

The schedule is interpreted by `compile.compile_schedule`, as for numpy and torch, with an
`ArrayOps` of ``cupy`` functions; nothing goes through the host.  The registry entry declares
``uses_einsum=False`` and ``cost_model=CUPY_MODEL``; the route a call runs is measured
(``backends/measured.py``): the steps, ``cupy.einsum`` along the path and, with three operands
or more, ``cupy.einsum`` left to right.  ``optimize=False`` is one ``cupy.einsum``.

numpy scalars mix in as 0-d device arrays; a numpy array among CuPy operands is refused by
the registry (``Backend.mixes_host_arrays``), never copied behind the caller's back.  ``out=``
takes a CuPy array; ``memory_limit=`` bounds device memory (explicit limits only).  This module
reads ``sys.modules['cupy']``, so a stand-in registered there runs the same code
(``tests/_fake_cupy.py``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..model.gpu_prices import CUPY_MODEL
from ..schedule import Schedule, describe_schedule
from .compile import ArrayOps, compile_schedule
from .measured import MeasuredRoute, measured_seconds, one_einsum_schedule, remembered

__all__ = ["ROUTES", "compile", "cupy_ops", "describe", "measured_route", "out_type", "route_seconds",
           "routes", "write_out"]

#: ``explain`` prints this backend's schedule steps (it runs them one by one).
RUNS_SCHEDULE_STEPS = True
#: ``explain``: a direct schedule's one einsum call runs along ``schedule.path`` here.
EINSUM_TAKES_PATH = True


def _cupy() -> Any:
    return sys.modules["cupy"]


@functools.lru_cache(maxsize=4)
def cupy_ops(cp: Any) -> ArrayOps:
    """The schedule's operations on the CuPy namespace ``cp`` (one instance per namespace)."""

    def total(x: Any, axes: tuple[int, ...]) -> Any:
        return x.sum(axis=axes, dtype=x.dtype)   # integer sums stay integer, as in einsum

    def set_block(out: Any, index: tuple[slice, ...], block: Any) -> None:
        out[index] = block

    def add_block(out: Any, index: tuple[slice, ...], block: Any) -> None:
        out[index] += block

    return ArrayOps(
        einsum=cp.einsum,
        matmul=cp.matmul,
        multiply=cp.multiply,
        permute=lambda x, perm: x.transpose(perm),
        reshape=lambda x, shape: x.reshape(shape),
        diagonal=lambda x, a, b: x.diagonal(0, a, b),
        sum=total,
        contiguous=cp.ascontiguousarray,
        swap_last=lambda x: x.swapaxes(-1, -2),
        copy=lambda x: x.copy(),
        as_array=lambda x: x,   # cupy.einsum's 0-d result is already a 0-d array
        common_dtype=lambda arrays: cp.result_type(*arrays),
        dtype=lambda x: x.dtype,
        astype=lambda x, dtype: x.astype(dtype),
        zeros=lambda shape, dtype, like: cp.zeros(shape, dtype),
        empty=lambda shape, dtype, like: cp.empty(shape, dtype),
        set_block=set_block,
        add_block=add_block,
    )


def _einsum_along(einsum: Callable[..., Any], path: list[Any], subscripts: str, *arrays: Any) -> Any:
    return einsum(subscripts, *arrays, optimize=path)


#: the routes a CuPy call may take (`routes`), as the benchmark's forced columns name them
ROUTES = ("steps", "one_einsum", "cupy_einsum")


def _left_to_right(n: int) -> tuple[tuple[int, int], ...]:
    return tuple((0, 1) for _ in range(n - 1))


def _direct(cp: Any, schedule: Schedule, path: Any, target: Any) -> Callable[..., Any]:
    """One ``cupy.einsum`` on the schedule's string: along ``path``, or (None) in its own order
    (left to right)."""
    ops = cupy_ops(cp)
    if path is not None and len(schedule.inputs) > 2:
        # cupy.einsum contracts left to right unless handed a path ('einsum_path' form)
        ops = replace(ops, einsum=functools.partial(_einsum_along, cp.einsum, ["einsum_path", *path]))
    return compile_schedule(one_einsum_schedule(schedule, path or _left_to_right(len(schedule.inputs))),
                            ops, target)


def routes(schedule: Schedule) -> tuple[str, ...]:
    """The routes measured for ``schedule`` (one: nothing to measure): ``'steps'``, the
    schedule's steps; ``'one_einsum'``, one ``cupy.einsum`` along its path; ``'cupy_einsum'``,
    ``cupy.einsum`` in its own order, left to right (three operands or more; the caller's
    ``cupy.einsum``, which the schedule's path on CuPy need not beat, and whose path argument
    is handled in Python, so even the same pairs may time differently)."""
    if schedule.strategy == "direct":
        return ("one_einsum",)
    if schedule.einsum is None or schedule.blocking is not None:
        return ("steps",)
    return ("steps", "one_einsum", "cupy_einsum") if len(schedule.inputs) > 2 else ("steps", "one_einsum")


def _model_pick(schedule: Schedule) -> str:
    return "steps" if CUPY_MODEL.modelled_path(schedule, schedule.optimizer) is None else "one_einsum"


def _device_name(cp: Any) -> str:
    """The current device's name ('' where CuPy cannot say): routes are kept per device."""
    runtime = getattr(cp.cuda, "runtime", None)
    if runtime is None:
        return ""
    name = runtime.getDeviceProperties(cp.cuda.Device().id).get("name", b"")
    return name.decode() if isinstance(name, bytes) else str(name)


def _capturing(cp: Any) -> bool:
    try:
        return bool(cp.cuda.get_current_stream().is_capturing())
    except Exception:   # a CuPy without stream capture (or the CPU stand-in)
        return False


def compile(plan: Any, schedule: Schedule, options: Any, route: str | None = None) -> Callable[..., Any]:
    """The callable running ``schedule`` on CuPy arrays (``preferred_element_type`` casts
    first): its route measured on the first calls (`routes`), or ``route``, forced."""
    cp = _cupy()
    target = options.preferred_element_type
    target = None if target is None else np.dtype(target)
    names = routes(schedule)
    if route is not None and route not in names:
        raise ValueError(f"route {route!r} is not one of this schedule's routes {names}")

    def build(name: str) -> Callable[..., Any]:
        if name == "steps":
            return compile_schedule(schedule, cupy_ops(cp), target)
        return _direct(cp, schedule, schedule.path if name == "one_einsum" else None, target)

    if route is not None or len(names) == 1:
        run = build(route or names[0])
    else:
        def settle(chosen: Callable[..., Any]) -> None:
            nonlocal run
            run = chosen

        device = cp.cuda.Device
        chooser = MeasuredRoute([(name, build(name)) for name in names], _model_pick(schedule), settle,
                                sync=lambda: device().synchronize(), key=_key(schedule, target),
                                capturing=lambda: _capturing(cp), where=lambda ops: _device_name(cp))
        run = chooser.entry()
    host = np.ndarray
    asarray = cp.asarray

    def execute(*operands: Any) -> Any:
        # only numpy scalars and Python numbers reach here as host arrays (0-d; the registry
        # refused any other): each becomes a 0-d device array
        for op in operands:
            if type(op) is host:
                return run(*[asarray(a) if type(a) is host else a for a in operands])
        return run(*operands)

    return execute


def _key(schedule: Schedule, target: Any) -> tuple[Any, ...]:
    return ("cupy", schedule.einsum, schedule.shapes, schedule.path, str(target))


def measured_route(schedule: Schedule, preferred_element_type: Any = None) -> str | None:
    """The route measured for ``schedule`` in this process (None: not measured yet)."""
    target = None if preferred_element_type is None else np.dtype(preferred_element_type)
    return remembered(_key(schedule, target))


def route_seconds(schedule: Schedule, preferred_element_type: Any = None) -> dict[str, float]:
    """Each route's best measured time (seconds) for ``schedule`` in this process."""
    target = None if preferred_element_type is None else np.dtype(preferred_element_type)
    return measured_seconds(_key(schedule, target))


def out_type() -> type:
    """The array type ``out=`` must be (a CuPy array, on the device)."""
    return _cupy().ndarray  # type: ignore[no-any-return]


def write_out(out: Any, result: Any, casting: str = "safe") -> None:
    """Write the result into the caller's ``out=`` (checked before any arithmetic) under the
    ``casting`` rule it was checked with."""
    _cupy().copyto(out, result, casting=casting)


def describe(plan: Any, schedule: Schedule, options: Any) -> list[str]:
    """What runs, for ``explain``: one ``cupy.einsum`` along the schedule's path (asked for),
    or the routes measured on the first calls, with the GPU time model's price of each."""
    if schedule.strategy == "direct":
        return [f"one cupy.einsum {schedule.einsum!r} along the schedule's path (GPU time model: "
                f"{CUPY_MODEL.one_einsum_ns(schedule) / 1e3:.3g} us)"]
    head = f"on the device (CuPy), GPU time model {CUPY_MODEL.steps_ns(schedule) / 1e3:.3g} us"
    names = routes(schedule)
    lines = []
    if len(names) > 1:
        head += f" (one cupy.einsum: {CUPY_MODEL.one_einsum_ns(schedule) / 1e3:.3g} us)"
        what = {"steps": "these steps", "one_einsum": "one cupy.einsum along the path",
                "cupy_einsum": "cupy.einsum in its own order"}
        target = options.preferred_element_type
        known = measured_route(schedule, target)
        lines.append("route: chosen by measurement on this shape's first calls, the fastest of "
                     + ", ".join(what[n] for n in names) + f"; the GPU model's pick: {what[_model_pick(schedule)]}"
                     + (f"; measured: {what[known]}" if known else ""))
    return [head + ":"] + ["  " + line for line in describe_schedule(schedule, plan.expansion.readable_symbol)] + lines
