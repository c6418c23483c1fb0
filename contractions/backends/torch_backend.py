"""PyTorch execution: ``torch.einsum`` on the expanded string.

Everything here is an ordinary differentiable, batchable torch op (``einsum``, ``diagonal``,
``sum``, ``expand``, ``permute``, ``reshape``, ``matmul``), so ``contract`` composes with
``torch.vmap`` (nested, ``chunk_size``), autograd in reverse and forward mode, and
``torch.func.grad``/``jacrev``/``jacfwd`` with no custom rules.

``torch.einsum`` knows only the 52 letters ``a-zA-Z`` (also in its sublist form), so:

- up to 52 distinct axes: one ``torch.einsum`` (axes relabelled to letters if the expansion
  used other symbols);
- more: a pairwise schedule along an opt_einsum path.  Each step relabels its own axes with
  local letters and is one ``torch.einsum``; a step that itself touches more than 52 axes is
  run as diagonals/sums, then one batched ``matmul`` on operands flattened to
  ``(batch, free, contracted)`` (reshapes are fine here: torch has no sharding invariant).

Operands are promoted to a common dtype first (``torch.einsum`` refuses mixed dtypes), or cast
to ``preferred_element_type`` when one is given.  Non-tensor operands (numpy arrays) are
converted with ``torch.as_tensor``.

This module imports torch at top level; the dispatcher imports it only after it has seen a
torch tensor among the operands.

>>> import torch
>>> from types import SimpleNamespace
>>> exp = SimpleNamespace(einsum='ab,bc->ac', inputs=((0, 1), (1, 2)), output=(0, 2))
>>> contract_torch(exp, (torch.ones(2, 3), torch.ones(3, 4))).shape
torch.Size([2, 4])
"""

from __future__ import annotations

import functools
import math
import string
from collections.abc import Iterable, Sequence
from typing import Any

import opt_einsum
import torch

__all__ = ["TORCH_EINSUM_LETTERS", "contract_torch", "torch_dtype"]

TORCH_EINSUM_LETTERS = string.ascii_letters
_LETTER_SET = frozenset(TORCH_EINSUM_LETTERS)


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


def _ascii_letters_only(einsum: str) -> bool:
    return all(ch in _LETTER_SET for ch in einsum.replace(",", "").replace("->", ""))


def _einsum_string(inputs: Iterable[Sequence[int]], output: Sequence[int]) -> str:
    """Spell integer-labelled terms with local letters, in first-appearance order."""
    letter: dict[int, str] = {}
    for term in (*inputs, output):
        for label in term:
            if label not in letter:
                letter[label] = TORCH_EINSUM_LETTERS[len(letter)]
    spell = lambda term: "".join(letter[l] for l in term)
    return ",".join(spell(t) for t in inputs) + "->" + spell(output)


def contract_torch(expansion: Any, operands: Sequence[Any],
                   preferred_element_type: Any = None) -> torch.Tensor:
    """Run ``expansion`` on torch tensors (one ``torch.einsum`` when it has <= 52 axes)."""
    tensors = _prepare(operands, preferred_element_type)
    if _ascii_letters_only(expansion.einsum):
        return torch.einsum(expansion.einsum, *tensors)
    inputs = tuple(tuple(term) for term in expansion.inputs)
    output = tuple(expansion.output)
    return contract_labelled(tensors, inputs, output)


def contract_labelled(tensors: Sequence[torch.Tensor], inputs: Sequence[Sequence[int]],
                      output: Sequence[int],
                      letters: int = len(TORCH_EINSUM_LETTERS)) -> torch.Tensor:
    """Contract integer-labelled operands, any number of distinct labels.

    ``letters`` is the most distinct labels one ``torch.einsum`` may take; tests lower it to
    exercise the pairwise and matmul routes on small arrays.

    >>> contract_labelled([torch.ones(2, 3), torch.ones(3, 4)], [(7, 8), (8, 9)], (9, 7),
    ...                   letters=0).shape
    torch.Size([4, 2])
    """
    inputs = [tuple(t) for t in inputs]
    output = tuple(output)
    if len({label for term in (*inputs, output) for label in term}) <= letters:
        return torch.einsum(_einsum_string(inputs, output), *tensors)
    operands = list(zip(tensors, inputs))
    if len(operands) > 1:
        path = opt_einsum.paths.greedy([set(t) for t in inputs], set(output),
                                       _extents(operands))
        for step in path:
            picked = [operands[i] for i in step]
            for i in sorted(step, reverse=True):
                del operands[i]
            keep = set(output).union(*(set(labels) for _, labels in operands))
            operands.append(_contract_step(picked, keep, letters))
    (tensor, labels), = operands
    tensor, labels = _reduce(tensor, labels, set(output))
    return tensor.permute([labels.index(l) for l in output])


def _extents(operands: Sequence[tuple[torch.Tensor, Sequence[int]]]) -> dict[int, int]:
    extent: dict[int, int] = {}
    for tensor, labels in operands:
        for label, size in zip(labels, tensor.shape):
            extent[label] = max(extent.get(label, 1), int(size))
    return extent


def _contract_step(picked: list[tuple[torch.Tensor, tuple[int, ...]]], keep: set[int],
                   letters: int) -> tuple[torch.Tensor, tuple[int, ...]]:
    """One path step: contract ``picked`` operands, keeping the labels in ``keep``."""
    seen: list[int] = []
    for _, labels in picked:
        seen.extend(l for l in labels if l not in seen)
    kept = tuple(l for l in seen if l in keep)
    if len(seen) <= letters:
        spec = _einsum_string([labels for _, labels in picked], kept)
        return torch.einsum(spec, *(t for t, _ in picked)), kept
    if len(picked) == 1:
        return _reduce(picked[0][0], picked[0][1], keep)
    (x, xl), (y, yl) = picked  # opt_einsum paths contract pairs
    return _matmul_step(x, xl, y, yl, keep)


def _reduce(tensor: torch.Tensor, labels: Sequence[int],
            keep: set[int]) -> tuple[torch.Tensor, tuple[int, ...]]:
    """Take the diagonal of repeated labels, then sum out labels not in ``keep``."""
    labels = list(labels)
    while len(set(labels)) < len(labels):
        label = next(l for l in labels if labels.count(l) > 1)
        i = labels.index(label)
        j = labels.index(label, i + 1)
        tensor = torch.diagonal(tensor, dim1=i, dim2=j)  # the diagonal becomes the last axis
        labels = [l for k, l in enumerate(labels) if k not in (i, j)] + [label]
    gone = [k for k, l in enumerate(labels) if l not in keep]
    if gone:
        tensor = tensor.sum(dim=gone)
        labels = [l for l in labels if l in keep]
    return tensor, tuple(labels)


def _matmul_step(x: torch.Tensor, xl: Sequence[int], y: torch.Tensor, yl: Sequence[int],
                 keep: set[int]) -> tuple[torch.Tensor, tuple[int, ...]]:
    """Contract two operands with more than 52 distinct labels as one batched matmul."""
    x, xl = _reduce(x, xl, keep | set(yl))
    y, yl = _reduce(y, yl, keep | set(xl))
    shared = [l for l in xl if l in yl]
    batch = [l for l in shared if l in keep]
    summed = [l for l in shared if l not in keep]
    left = [l for l in xl if l not in yl]
    right = [l for l in yl if l not in xl]
    extent = _extents([(x, xl), (y, yl)])
    # Size-1 axes broadcast as in numpy's einsum: expand them (a view) to the shared extent.
    x = x.expand([extent[l] for l in xl])
    y = y.expand([extent[l] for l in yl])
    size = lambda ls: math.prod(extent[l] for l in ls)
    x3 = x.permute([xl.index(l) for l in (*batch, *left, *summed)]).reshape(
        size(batch), size(left), size(summed))
    y3 = y.permute([yl.index(l) for l in (*batch, *summed, *right)]).reshape(
        size(batch), size(summed), size(right))
    out = torch.matmul(x3, y3).reshape([extent[l] for l in (*batch, *left, *right)])
    return out, (*batch, *left, *right)
