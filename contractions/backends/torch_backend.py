"""The PyTorch backend: the shared schedule compiled onto torch operations.

Every operation used (``einsum`` on at most 52 local letters per call, ``matmul``, ``mul``,
``permute``, ``reshape``, ``diagonal``, ``sum``, ``contiguous``, ``clone``) is an ordinary
differentiable, batchable torch op, so ``contract`` composes with ``torch.vmap`` (nested,
``chunk_size``), autograd in reverse and forward mode, and ``torch.func.grad``/``jacrev``/
``jacfwd`` with no custom rules.  Because the schedule is the same one numpy runs, there is no
52-letter ceiling: a step never uses more than a handful of letters.

Operands are promoted to a common dtype first (``torch.einsum`` refuses mixed dtypes), or cast
to ``preferred_element_type`` when one is given.  Non-tensor operands (numpy arrays) are
converted with ``torch.as_tensor``.  This module imports torch at top level; the registry
imports it only after it has seen a torch tensor among the operands.

>>> import torch
>>> contract_labelled([torch.ones(2, 3), torch.ones(3, 4)], [(7, 8), (8, 9)], (9, 7)).shape
torch.Size([4, 2])
"""

from __future__ import annotations

import functools
import string
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..schedule import Schedule, describe_schedule, schedule_labels
from .compile import ArrayOps, compile_schedule

__all__ = ["TORCH_EINSUM_LETTERS", "TORCH_OPS", "compile", "contract_labelled", "describe", "torch_dtype"]

TORCH_EINSUM_LETTERS = string.ascii_letters
#: ``explain`` prints this backend's schedule steps (it runs them one by one).
RUNS_SCHEDULE_STEPS = True


def torch_dtype(dtype: Any) -> torch.dtype:
    """A torch dtype from a torch dtype, a name (``'float32'``) or a numpy/jax dtype-like.

    >>> torch_dtype('bfloat16'), torch_dtype(torch.float64)
    (torch.bfloat16, torch.float64)
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    name = dtype if isinstance(dtype, str) else None
    if name is None:
        import numpy as np  # numpy is a core dependency
        name = np.dtype(dtype).name
    found = getattr(torch, name, None)
    if not isinstance(found, torch.dtype):
        raise TypeError(f"preferred_element_type={dtype!r} names no torch dtype")
    return found


def _prepare(operands: Sequence[Any], preferred_element_type: Any) -> list[torch.Tensor]:
    tensors = [op if isinstance(op, torch.Tensor) else torch.as_tensor(op) for op in operands]
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


def compile(plan: Any, schedule: Schedule, options: Any) -> Callable[..., torch.Tensor]:
    """The torch callable for ``schedule`` (operands converted and promoted first)."""
    run = compile_schedule(schedule, TORCH_OPS)
    target = options.preferred_element_type

    def execute(*operands: Any) -> torch.Tensor:
        return run(*_prepare(operands, target))

    return execute


def describe(plan: Any, schedule: Schedule, options: Any) -> list[str]:
    """What runs, for ``explain`` (the same schedule as numpy, on torch operations)."""
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
