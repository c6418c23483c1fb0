"""The PyTorch backend: the shared schedule compiled onto torch operations.

Every operation used is an ordinary differentiable, batchable torch op, so ``contract``
composes with ``torch.vmap``, autograd and ``torch.func`` with no custom rules, and the
schedule's steps never reach einsum's 52-letter ceiling.  Operands are promoted to a common
dtype (or cast to ``preferred_element_type``); numpy operands join the first tensor's device.

What runs is the schedule's: its steps, or (``strategy == 'direct'``) one ``torch.einsum``
along ``schedule.path``, as the torch cost model decided when planning (`torch_route` only
reads it; dev/decisions.md 26).  On CUDA the route is measured on the shape's first calls
instead (`cuda_routes`, ``backends/measured.py``).  A blocked schedule under a ``torch.func``
transform assembles its blocks functionally rather than writing them in place; under
``torch.compile`` ``contract`` is one graph node (``torch_compile_hook.py``) and, while
tracing, an unblocked schedule runs as ``torch.einsum`` on the expanded string
(dev/decisions.md 22).

>>> import torch
>>> contract_labelled([torch.ones(2, 3), torch.ones(3, 4)], [(7, 8), (8, 9)], (9, 7)).shape
torch.Size([4, 2])
"""

from __future__ import annotations

import functools
import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ..model.gpu_prices import TORCH_CUDA_MODEL, GpuCostModel
from ..model.torch_prices import TORCH_MODEL, torch_default_path
from ..schedule import Schedule, describe_schedule, schedule_labels
from . import torch_compile_hook
from .compile import ArrayOps, compile_schedule, finisher
from .measured import MeasuredRoute, measured_seconds, remembered

__all__ = ["TORCH_EINSUM_LETTERS", "TORCH_OPS", "compile", "contract_labelled", "cuda_routes", "describe",
           "measured_route", "route_seconds", "torch_dtype", "torch_route"]

TORCH_EINSUM_LETTERS = string.ascii_letters
#: ``explain`` prints this backend's schedule steps (it runs them one by one).
RUNS_SCHEDULE_STEPS = True
#: ``explain``: a direct schedule's one einsum call runs along ``schedule.path`` here.
EINSUM_TAKES_PATH = True


def torch_dtype(dtype: Any) -> torch.dtype:
    """A torch dtype from a torch dtype, a name (``'float32'``) or a numpy/jax dtype-like.

    >>> torch_dtype('bfloat16'), torch_dtype(torch.float64)
    (torch.bfloat16, torch.float64)
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    name = dtype if isinstance(dtype, str) else None
    if name is None:
        name = np.dtype(dtype).name
    found = getattr(torch, name, None)
    if not isinstance(found, torch.dtype):
        raise TypeError(f"preferred_element_type={dtype!r} names no torch dtype")
    return found


def _as_tensor(op: Any, device: Any) -> torch.Tensor:
    # torch cannot view memory read backwards: a numpy array with a negative stride (even on
    # an axis of one element, which numpy's contiguity flags ignore) is copied in C order.
    strides = getattr(op, "strides", None)
    if strides is not None and any(s < 0 for s in strides):
        op = np.array(op, order="C")
    return torch.as_tensor(op, device=device)


def _prepare(operands: Sequence[Any], preferred_element_type: Any) -> list[torch.Tensor]:
    device = next((op.device for op in operands if isinstance(op, torch.Tensor)), None)
    tensors = [op if isinstance(op, torch.Tensor) else _as_tensor(op, device) for op in operands]
    if preferred_element_type is not None:
        target = torch_dtype(preferred_element_type)
    else:
        target = functools.reduce(torch.promote_types, (t.dtype for t in tensors))
    return [t if t.dtype == target else t.to(target) for t in tensors]


def _sum(x: torch.Tensor, axes: tuple[int, ...]) -> torch.Tensor:
    # dtype=x.dtype: integer sums stay integer, as in einsum (torch.sum would widen to int64).
    return torch.sum(x, dim=axes, dtype=x.dtype)


def _set_block(out: torch.Tensor, index: tuple[slice, ...], block: torch.Tensor) -> None:
    out[index] = block


def _add_block(out: torch.Tensor, index: tuple[slice, ...], block: torch.Tensor) -> None:
    out[index] += block


#: torch's implementation of the schedule's operations.
TORCH_OPS = ArrayOps(
    einsum=torch.einsum,
    matmul=torch.matmul,
    multiply=torch.mul,
    permute=torch.permute,
    reshape=torch.reshape,
    diagonal=lambda x, a, b: torch.diagonal(x, 0, a, b),
    sum=_sum,
    contiguous=lambda x: x.contiguous(),
    swap_last=lambda x: x.transpose(-1, -2),
    copy=torch.clone,
    as_array=lambda x: x,
    common_dtype=lambda ts: functools.reduce(torch.promote_types, (t.dtype for t in ts)),
    dtype=lambda x: x.dtype,
    astype=lambda x, dtype: x.to(dtype),
    zeros=lambda shape, dtype, like: torch.zeros(shape, dtype=dtype, device=like.device),
    empty=lambda shape, dtype, like: torch.empty(shape, dtype=dtype, device=like.device),
    set_block=_set_block,
    add_block=_add_block,
)


def torch_route(schedule: Schedule, traced: bool = False) -> tuple[str, Any]:
    """What the schedule says torch runs: ``('steps', None)``, its pairwise steps, or
    ``('einsum', path)``, one ``torch.einsum`` along ``path`` (a ``'direct'`` schedule; the
    torch cost model made that choice in `schedule.make_schedule`).  Nothing is priced here.

    ``traced`` (under ``torch.compile``): ``('einsum', None)``, ``torch.einsum`` on the
    expanded string with no path, exactly what a hand-written ``torch.einsum`` traces to, so
    Inductor receives that graph (it fuses and plans buffers itself); blocked schedules and
    those past 52 labels run their steps either way.

    >>> from contractions import make_plan, make_schedule
    >>> from contractions.model.torch_prices import TORCH_MODEL
    >>> plan = make_plan('Wa,ab->Wb', ((2, 3), (3, 4)), ())
    >>> torch_route(make_schedule(plan, cost_model=TORCH_MODEL))
    ('einsum', ((0, 1),))
    """
    if schedule.einsum is None or schedule.blocking is not None:
        return "steps", None
    if traced:
        return "einsum", None
    return ("einsum", schedule.path) if schedule.strategy == "direct" else ("steps", None)


#: Operand types that need no conversion (subclasses such as fake tensors take the checked route).
_PLAIN: tuple[type, ...] = (torch.Tensor, torch.nn.Parameter)

_VF_EINSUM = getattr(getattr(torch, "_VF", None), "einsum", None)


def _einsum_along_path(schedule: Schedule, along: Any = None) -> Callable[..., torch.Tensor]:
    """One torch einsum call on the schedule's local letters, along ``along`` (default: the
    schedule's path).  The result is what ``torch.einsum`` returns: a view of the operand for
    a pure permutation or diagonal, as torch's (and numpy's) einsum give."""
    equation = schedule.einsum
    assert equation is not None
    n = len(schedule.inputs)
    pairs = schedule.path if along is None else along
    path = [k for pair in pairs for k in pair] if n > 2 and all(
        len(pair) == 2 for pair in pairs) else None
    if _VF_EINSUM is not None:
        vf = _VF_EINSUM
        if path is None:
            return lambda *arrays: vf(equation, arrays)
        return lambda *arrays: vf(equation, arrays, path=path)
    return functools.partial(torch.einsum, equation)  # pragma: no cover - torch 2.x has _VF


def _traced_einsum(plan: Any, schedule: Schedule) -> Callable[..., torch.Tensor]:
    """``torch.einsum`` on the expanded string, as a hand-written call under torch.compile."""
    equation = plan.expansion.einsum
    if not all(ch in TORCH_EINSUM_LETTERS or ch in ",->" for ch in equation):
        equation = schedule.einsum
    return functools.partial(torch.einsum, equation)


_IS_WRAPPED = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)


def _is_transformed(t: torch.Tensor) -> bool:
    # Without the probe (a torch that lacks it), every blocked call is assembled functionally.
    return True if _IS_WRAPPED is None else bool(_IS_WRAPPED(t))


def _compile_blocked(schedule: Schedule) -> Callable[..., torch.Tensor]:
    """Blocks written in place (eager, autograd, torch.compile) or, when an operand is a
    torch.func wrapper (vmap, grad, ...), assembled without any in-place write."""
    in_place = compile_schedule(schedule, TORCH_OPS)
    blocking = schedule.blocking
    assert blocking is not None
    runs = {lengths: compile_schedule(inner, TORCH_OPS) for lengths, inner in blocking.inner}
    ranges = [[(start, min(start + chunk, n)) for start in range(0, n, chunk)]
              for chunk, n in zip(blocking.chunks, (schedule.extents[lab] for lab in blocking.labels))]
    # Blocks come out in the buffer's label order (`Blocking.storage`): they are joined along
    # its axes and the whole permuted to output order at the end, as the in-place run does.
    out_axes = [axes[0] if axes else None for axes in blocking.storage_axes]
    assert schedule.finish is not None
    to_output = finisher(schedule.finish, TORCH_OPS)

    def slices(k: int, ndim: int, combo: tuple[tuple[int, int], ...]) -> tuple[slice, ...]:
        where = [slice(None)] * ndim
        for (start, stop), axes in zip(combo, blocking.operand_axes[k]):
            for axis in axes:
                where[axis] = slice(start, stop)
        return tuple(where)

    def functional(*arrays: torch.Tensor) -> torch.Tensor:
        dtype = functools.reduce(torch.promote_types, (a.dtype for a in arrays))
        arrays = tuple(a if a.dtype == dtype else a.to(dtype) for a in arrays)

        def assemble(prefix: tuple[tuple[int, int], ...]) -> torch.Tensor:
            depth = len(prefix)
            if depth == len(ranges):
                run = runs[tuple(stop - start for start, stop in prefix)]
                return run(*[a[slices(k, a.dim(), prefix)] for k, a in enumerate(arrays)])
            parts = [assemble((*prefix, r)) for r in ranges[depth]]
            axis = out_axes[depth]
            if axis is not None:
                return torch.cat(parts, dim=axis)
            return functools.reduce(torch.add, parts)

        return to_output(assemble(()))

    def execute(*arrays: torch.Tensor) -> torch.Tensor:
        if any(_is_transformed(a) for a in arrays):
            return functional(*arrays)
        return in_place(*arrays)

    return execute


def cuda_routes(schedule: Schedule) -> dict[str, Any]:
    """The routes measured for a schedule the GPU time model planned (torch on CUDA): name ->
    None (the steps) or the path of one ``torch.einsum``; empty for any other schedule (planned
    for the CPU, one einsum asked for, blocked, past 52 labels), which runs as it says.

    ``'steps'``, ``'one_einsum'`` (along the schedule's path) and, where opt_einsum's
    ``'auto'`` path (what ``torch.einsum`` itself takes) differs, ``'einsum_auto_path'``.
    """
    if (schedule.priced_by != GpuCostModel.priced_by or schedule.strategy != "pairwise"
            or schedule.einsum is None or schedule.blocking is not None):
        return {}
    found: dict[str, Any] = {"steps": None, "one_einsum": tuple(schedule.path)}
    own = torch_default_path(schedule) if schedule.optimizer == "auto" else None
    if own is not None and own != tuple(schedule.path):
        found["einsum_auto_path"] = own
    return found


def _model_pick(schedule: Schedule, found: dict[str, Any]) -> str:
    path = TORCH_CUDA_MODEL.modelled_path(schedule, schedule.optimizer)
    return next((name for name, p in found.items() if p == path), "one_einsum")


def _on_cuda(operands: Sequence[Any]) -> bool:
    return getattr(operands[0], "is_cuda", False) is True


def _device_name(operands: Sequence[Any]) -> str:
    """The operands' CUDA device's name ('' where torch cannot say): routes are kept per device."""
    try:
        return str(torch.cuda.get_device_name(operands[0].device))
    except (RuntimeError, AssertionError, AttributeError):
        return ""


def _sync(device: Any) -> None:
    torch.cuda.synchronize(device)


def _capturing() -> bool:
    try:
        return bool(torch.cuda.is_current_stream_capturing())
    except Exception:   # a torch built without CUDA
        return False


def _key(schedule: Schedule, target: Any) -> tuple[Any, ...]:
    return ("torch", schedule.einsum, schedule.shapes, schedule.path, str(target))


def measured_route(schedule: Schedule, preferred_element_type: Any = None) -> str | None:
    """The route measured for ``schedule`` on CUDA in this process (None: not yet)."""
    return remembered(_key(schedule, preferred_element_type))


def route_seconds(schedule: Schedule, preferred_element_type: Any = None) -> dict[str, float]:
    """Each route's best measured time (seconds) for ``schedule`` on CUDA in this process."""
    return measured_seconds(_key(schedule, preferred_element_type))


def compile(plan: Any, schedule: Schedule, options: Any, route: str | None = None) -> Callable[..., torch.Tensor]:
    """The torch callable for ``schedule`` (operands converted and promoted first).  A schedule
    the GPU time model planned measures its `cuda_routes` on its first CUDA calls, unless
    ``route`` forces one."""
    found = cuda_routes(schedule)
    if route is not None and route not in found:
        raise ValueError(f"route {route!r} is not one of this schedule's routes {tuple(found)}")
    run: Callable[..., torch.Tensor]
    if route is not None:
        run = compile_schedule(schedule, TORCH_OPS) if found[route] is None else (
            _einsum_along_path(schedule, found[route]))
    elif found:
        def settle(chosen: Callable[..., torch.Tensor]) -> None:
            nonlocal run
            run = chosen

        device: list[Any] = [None]   # the operands' CUDA device: the one to wait for

        def measures(ops: Sequence[Any]) -> bool:
            if not _on_cuda(ops):
                return False
            device[0] = ops[0].device
            return True

        candidates = [(name, compile_schedule(schedule, TORCH_OPS) if path is None
                       else _einsum_along_path(schedule, path)) for name, path in found.items()]
        chooser = MeasuredRoute(candidates, _model_pick(schedule, found), settle, sync=lambda: _sync(device[0]),
                                key=_key(schedule, options.preferred_element_type),
                                measures=measures, capturing=lambda: _capturing(),
                                where=_device_name)
        run = chooser.entry()
    else:
        route_, _ = torch_route(schedule)
        if schedule.blocking is not None:
            run = _compile_blocked(schedule)
        elif route_ == "einsum":
            run = _einsum_along_path(schedule)
        else:
            run = compile_schedule(schedule, TORCH_OPS)
    traced = _traced_einsum(plan, schedule) if torch_route(schedule, traced=True)[0] == "einsum" else run
    target = options.preferred_element_type
    compiling = torch.compiler.is_compiling
    plain = _PLAIN

    if target is None:
        def execute(*operands: Any) -> torch.Tensor:
            # The warm path: plain tensors of one dtype (the hot key already fixed the shapes).
            try:
                dtype = operands[0].dtype
                for op in operands:
                    if type(op) not in plain or op.dtype != dtype:
                        break
                else:
                    if dtype.is_floating_point or dtype.is_complex:
                        return run(*operands)
            except (AttributeError, IndexError):
                pass
            # Fake and functional tensors (torch.compile's tracing), conversions, and bool and
            # integer operands come here.
            return _run_prepared(traced if compiling() else run, _prepare(operands, None))
    else:
        def execute(*operands: Any) -> torch.Tensor:
            return _run_prepared(traced if compiling() else run, _prepare(operands, target))

    return execute


_BOOL, _INT64 = torch.bool, torch.int64


def _run_prepared(run: Callable[..., torch.Tensor], tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """``run`` on operands of one dtype, giving numpy's result: that dtype, whichever route
    runs (torch's einsum sums small integers in int64, its steps keep their type; the wider
    sum cast back wraps as numpy's does), and for bool an any over the products.  torch has
    no bool contraction (its batched matmul refuses bool, its einsum counts in int64), so
    bool operands are counted in float32, where a sum of products of ones is at least one
    (never rounded to zero), and the counts compared with zero."""
    if not tensors:
        return run()
    dtype = tensors[0].dtype
    if dtype is _BOOL:
        return run(*(t.to(torch.float32) for t in tensors)) != 0
    if dtype is not _INT64 and not (dtype.is_floating_point or dtype.is_complex):
        # torch's einsum fails on some small-integer calls ('expected scalar type Char but
        # found Long'): they run in int64, whose sums cast back wrap as numpy's do
        tensors = [t.to(_INT64) for t in tensors]
    result = run(*tensors)
    return result if result.dtype == dtype else result.to(dtype)


def describe(plan: Any, schedule: Schedule, options: Any) -> list[str]:
    """What runs, for ``explain``: the schedule's steps on torch operations, or the one
    ``torch.einsum`` along its path that the torch cost model chose for the schedule; on CUDA,
    the routes measured on the first calls (`cuda_routes`)."""
    found = cuda_routes(schedule)
    if found:
        what = {"steps": "these steps", "one_einsum": "one torch.einsum along the path",
                "einsum_auto_path": "one torch.einsum along opt_einsum's 'auto' path (torch's own)"}
        known = measured_route(schedule, options.preferred_element_type)
        return describe_schedule(schedule, plan.expansion.readable_symbol) + [
            "route (CUDA): chosen by measurement on this shape's first calls, the fastest of "
            + ", ".join(what[n] for n in found) + f"; the GPU model's pick: {what[_model_pick(schedule, found)]}"
            + (f"; measured: {what[known]}" if known else "")]
    route, path = torch_route(schedule)
    if route == "einsum":
        lines = [f"one torch.einsum {schedule.einsum!r} along the schedule's path (torch time model: "
                 f"{TORCH_MODEL.one_einsum_ns(schedule, path) / 1e3:.3g} us)"]
        return lines + ([f"priced by: {schedule.priced_by}"] if schedule.priced_by else [])
    return describe_schedule(schedule, plan.expansion.readable_symbol)


def contract_labelled(tensors: Sequence[torch.Tensor], inputs: Sequence[Sequence[int]],
                      output: Sequence[int],
                      letters: int = len(TORCH_EINSUM_LETTERS)) -> torch.Tensor:
    """Contract integer-labelled tensors with any number of distinct labels.

    Up to ``letters`` distinct labels run as one ``torch.einsum``; more run the pairwise
    schedule.  Tests lower ``letters`` to exercise the pairwise route on small arrays.

    >>> contract_labelled([torch.ones(2, 3), torch.ones(3, 4)], [(7, 8), (8, 9)], (9, 7),
    ...                   letters=0).shape
    torch.Size([4, 2])
    """
    inputs_t = tuple(tuple(int(lab) for lab in t) for t in inputs)
    output_t = tuple(int(lab) for lab in output)
    tensors = _prepare(tensors, None)
    shapes = tuple(tuple(t.shape) for t in tensors)
    distinct = len({lab for t in inputs_t for lab in t})
    strategy = "direct" if distinct <= min(letters, len(TORCH_EINSUM_LETTERS)) else "pairwise"
    schedule = schedule_labels(inputs_t, output_t, shapes, strategy=strategy)
    return compile_schedule(schedule, TORCH_OPS)(*tensors)


# torch is loaded (this module imports it): make contract a torch.compile graph node as soon as
# torch._dynamo is (never importing it here: that costs seconds).
torch_compile_hook.install()
