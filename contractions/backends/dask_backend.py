"""The dask backend: a lazy, blockwise contraction whose blocks run the numpy schedule.

``contract`` on dask arrays (numpy operands lifted to one-block dask arrays) returns a dask
array and computes nothing.  The graph is one ``dask.array.blockwise`` layer over the
operands' chunks, indexed by the expansion's integer labels: each block runs a numpy schedule
compiled for its shapes (cached per block-shape signature; memory limit per block); kept axes
keep their chunks; a contracted axis split over chunks leaves partial sums that dask's tree
reduction adds, as ``dask.array.einsum`` does; differing chunks are unified as dask's own
``blockwise`` does, a diagonal's two axes first within their operand.  Only numpy-backed dask
arrays are supported.

>>> import dask.array as da, numpy as np
>>> from contractions import contract
>>> x = da.ones((6, 4), chunks=(3, 2))
>>> y = contract('Wa,ab->Wb', x, np.ones((4, 5)))
>>> type(y).__name__, y.chunks, float(y[0, 0].compute())
('Array', ((3, 3), (5,)), 4.0)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
from dask.array.core import blockwise, common_blockdim, unify_chunks

from ..schedule import Schedule, describe_schedule, schedule_labels
from .compile import compile_schedule
from .numpy_backend import NUMPY_OPS

__all__ = ["BLOCK_CACHE_SIZE", "GraphSummary", "compile", "describe", "describe_operands", "summarise"]

BLOCK_CACHE_SIZE = 1024

Labels = tuple[int, ...]
Shape = tuple[int, ...]


# ---------------------------------------------------------------------------- one block
@functools.lru_cache(maxsize=BLOCK_CACHE_SIZE)
def _block_program(inputs: tuple[Labels, ...], output: Labels, shapes: tuple[Shape, ...],
                   path: tuple[tuple[int, ...], ...] | None, limit: Any) -> Callable[..., np.ndarray]:
    """The numpy callable for one block-shape signature (``path`` None: one direct einsum;
    ``limit`` the block's memory limit, as numpy's ``memory_limit``)."""
    if path is None:
        schedule = schedule_labels(inputs, output, shapes, strategy="direct", memory_limit=limit)
    else:
        schedule = schedule_labels(inputs, output, shapes, optimize=path, strategy="pairwise",
                                   memory_limit=limit)
    return compile_schedule(schedule, NUMPY_OPS)


def _unwrap(block: Any) -> Any:
    # A contracted label in a single chunk is a blockwise "dummy" index: the block arrives
    # wrapped in one-element lists (one level per such label); the list never has more.
    while isinstance(block, list):
        (block,) = block
    return block


def _run_block(inputs: tuple[Labels, ...], output: Labels, n_split: int,
               path: tuple[tuple[int, ...], ...] | None, limit: Any, *blocks: Any) -> np.ndarray:
    arrays = [_unwrap(b) for b in blocks]
    run = _block_program(inputs, output, tuple(a.shape for a in arrays), path, limit)
    result = np.asarray(run(*arrays))
    # Split contracted labels stay in the blockwise output as length-1 axes, summed later.
    return result.reshape(result.shape + (1,) * n_split) if n_split else result


# ---------------------------------------------------------------------------- the graph
@dataclass(frozen=True)
class _Graph:
    result: Any            # the lazy dask result
    blocks: Any            # the blockwise array (before the tree reduction)
    unified: tuple[Any, ...]   # the operands after lifting and chunk unification
    chunks: dict[int, tuple[int, ...]]   # unified chunks per label
    split: Labels          # contracted labels split over several chunks


def _as_dask(op: Any, k: int) -> Any:
    if isinstance(op, da.Array):
        if not isinstance(op._meta, np.ndarray):
            raise TypeError(
                f"operand {k} is a dask array of {type(op._meta).__module__}."
                f"{type(op._meta).__qualname__} blocks; the dask backend runs numpy blocks only: "
                "convert its blocks with map_blocks(numpy.asarray) first")
        return op
    # One block: unify_chunks splits it to match any chunked operand sharing its axes.
    return da.from_array(np.asarray(op), chunks=-1)


def _common_diagonal_chunks(array: Any, labels: Labels) -> Any:
    """Give the axes of a repeated label one common chunking within this operand."""
    positions: dict[int, list[int]] = {}
    for axis, label in enumerate(labels):
        positions.setdefault(label, []).append(axis)
    new = list(array.chunks)
    for axes in positions.values():
        if len(axes) > 1:
            common = common_blockdim([array.chunks[a] for a in axes])
            for a in axes:
                new[a] = common
    return array if tuple(new) == array.chunks else array.rechunk(tuple(new))


def _build(plan: Any, schedule: Schedule, options: Any, operands: Sequence[Any]) -> _Graph:
    exp = plan.expansion
    inputs, output = exp.inputs, exp.output
    arrays = [_as_dask(op, k) for k, op in enumerate(operands)]
    if options.preferred_element_type is not None:
        target = np.dtype(options.preferred_element_type)
        arrays = [a if a.dtype == target else a.astype(target) for a in arrays]
    arrays = [_common_diagonal_chunks(a, labels) for a, labels in zip(arrays, inputs)]
    args: list[Any] = []
    for a, labels in zip(arrays, inputs):
        args += [a, labels]
    chunks, unified = unify_chunks(*args)
    dtype = np.result_type(*(a.dtype for a in unified))
    contracted = sorted({lab for labels in inputs for lab in labels} - set(output))
    split = tuple(lab for lab in contracted if len(chunks[lab]) > 1)
    path = None if schedule.strategy == "direct" else tuple(schedule.path)
    # A block is a numpy call: numpy's default memory limit for its shapes, or the caller's.
    limit = "default" if schedule.memory_limit is None else schedule.memory_limit
    out_ind = tuple(output) + split
    pairs: list[Any] = []
    for a, labels in zip(unified, inputs):
        pairs += [a, labels]
    blocks = blockwise(
        functools.partial(_run_block, inputs, output, len(split), path, limit), out_ind, *pairs,
        adjust_chunks=dict.fromkeys(split, 1), dtype=dtype,
        meta=np.empty((0,) * len(out_ind), dtype=dtype), align_arrays=False, token="contract")
    if split:
        n = len(output)
        # dtype=: integer sums stay integer, as in einsum (numpy's sum would widen small ints).
        result = blocks.sum(axis=tuple(range(n, n + len(split))), dtype=dtype)
    else:
        result = blocks
    return _Graph(result=result, blocks=blocks, unified=tuple(unified), chunks=dict(chunks),
                  split=split)


# ------------------------------------------------------------------------ backend interface
def compile(plan: Any, schedule: Schedule, options: Any) -> Callable[..., Any]:
    """The callable building the lazy dask graph (numpy operands lifted to dask)."""

    def run(*operands: Any) -> Any:
        return _build(plan, schedule, options, operands).result

    return run


def describe(plan: Any, schedule: Schedule, options: Any) -> list[str]:
    """What runs, for ``explain`` (block and task counts need the operands' chunks:
    `describe_operands`)."""
    name = plan.expansion.readable_symbol
    per_block = ("one einsum per block" if schedule.strategy == "direct"
                 else f"the pairwise path {[tuple(p) for p in schedule.path]} per block")
    lines = [
        "lazy: one dask blockwise layer over the operands' chunks (unified as dask.array.core."
        "unify_chunks does); nothing is computed until .compute()",
        f"each block runs the numpy schedule for its block shapes ({per_block}); for these "
        "whole-array shapes it is:",
    ]
    lines += ["  " + line for line in describe_schedule(schedule, name)]
    lines.append("kept axes keep their chunks; contracted axes split over several chunks are summed "
                 "by dask's tree reduction")
    return lines


@dataclass(frozen=True)
class GraphSummary:
    """The size of the graph one call adds: ``blocks`` numpy-schedule tasks (one per block),
    ``reduction`` tree-reduction tasks, ``preparation`` rechunk/lift tasks; ``grid`` the number
    of blocks along each label (the expansion's symbols), ``split`` the contracted symbols
    split over several chunks."""

    blocks: int
    reduction: int
    preparation: int
    grid: dict[str, int]
    split: tuple[str, ...]

    @property
    def tasks(self) -> int:
        return self.blocks + self.reduction + self.preparation


def _keys(array: Any) -> set[Any]:
    return set(array.__dask_graph__().keys())


def summarise(plan: Any, schedule: Schedule, options: Any, operands: Sequence[Any]) -> GraphSummary:
    """Count the tasks a call on ``operands`` adds to the graph (builds it; computes nothing)."""
    graph = _build(plan, schedule, options, operands)
    before: set[Any] = set()
    for op in operands:
        if isinstance(op, da.Array):
            before |= _keys(op)
    prepared: set[Any] = set().union(*(_keys(a) for a in graph.unified)) if graph.unified else set()
    blocks = _keys(graph.blocks)
    symbol = plan.expansion.readable_symbol
    return GraphSummary(
        blocks=len(blocks - prepared), reduction=len(_keys(graph.result) - blocks),
        preparation=len(prepared - before),
        grid={symbol(lab): len(c) for lab, c in sorted(graph.chunks.items())},
        split=tuple(symbol(lab) for lab in graph.split))


def describe_operands(plan: Any, schedule: Schedule, options: Any,
                      operands: Sequence[Any]) -> list[str]:
    """`describe` plus the block and task counts of a call on these operands."""
    s = summarise(plan, schedule, options, operands)
    grid = " x ".join(f"{sym}:{n}" for sym, n in s.grid.items()) or "one block"
    split = ("contracted axes split over several chunks: " + "".join(s.split)) if s.split else \
        "no contracted axis is split: no reduction"
    lines = describe(plan, schedule, options)
    lines += [
        f"blocks: {s.blocks} (block grid {grid}); {split}",
        f"tasks this call adds: {s.tasks} = {s.blocks} block + {s.reduction} tree-reduction + "
        f"{s.preparation} rechunk/lift",
    ]
    return lines

