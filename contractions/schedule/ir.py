"""The schedule's data: the frozen types a `Schedule` is made of, and the layout flags.

Nothing here computes; every other module of the package builds or reads these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..model.layout import MatmulLayout

Labels = tuple[int, ...]


Shape = tuple[int, ...]


_T = TypeVar("_T")


def evolve(obj: _T, **changes: Any) -> _T:
    """``dataclasses.replace`` for the frozen types here, without running ``__init__`` again:
    none of them validates or derives a field there, so copying the fields is the same
    object, about 6x faster (the reuse tier and the block search remake schedules and steps
    by the hundred: 4.8 us against 0.8 us a copy).

    >>> evolve(Finish(None, (2, 3), False, False), shape=(3, 2)).shape
    (3, 2)
    """
    fields = obj.__dataclass_fields__  # type: ignore[attr-defined]
    if not changes.keys() <= fields.keys():
        raise TypeError(f"{type(obj).__name__} has no field {sorted(changes.keys() - fields.keys())}")
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    new.__dict__.update(changes)
    return new


#: The letters one einsum call may use (numpy's and torch's einsum know exactly these 52).
EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


# ------------------------------------------------------------------------------ the data
@dataclass(frozen=True)
class View:
    """Present an array with another axis order and shape (a view unless ``gather``).

    Applied in this order: ``contiguous_first`` (make the input C-contiguous, a no-op for
    C arrays: BLAS needs unit inner strides), ``permutation`` (None: keep the order),
    ``gather`` (copy into C order), reshape to ``shape``, ``swap_last`` (swap the two last
    axes: a column-major matrix handed to BLAS with its transpose flag, no copy).
    """

    permutation: tuple[int, ...] | None
    shape: Shape
    gather: bool = False
    contiguous_first: bool = False
    swap_last: bool = False


@dataclass(frozen=True)
class Preparation:
    """How one operand reaches unique, non-trivial labels before any pairing.

    ``transpose`` (first) permutes the axes: a Fortran-ordered operand is read as its
    reversed-axes transpose, which is C-ordered (a view).  ``squeeze`` reshapes away size-1
    axes (a view); each of ``diagonals`` takes the diagonal of two axes (appended last, as
    ``numpy.diagonal`` does); ``sum_axes`` are summed (labels no other operand and not the
    output needs).  ``labels`` are the operand's labels after.
    """

    squeeze: Shape | None
    diagonals: tuple[tuple[int, int], ...]
    sum_axes: tuple[int, ...]
    labels: Labels
    transpose: tuple[int, ...] | None = None

    @property
    def is_identity(self) -> bool:
        return (self.squeeze is None and not self.diagonals and not self.sum_axes
                and self.transpose is None)


@dataclass(frozen=True)
class Step:
    """One pairwise contraction.

    ``operands`` are positions in the working list (both removed, the result appended last:
    opt_einsum's convention).  Each operand first sums ``sum_x``/``sum_y`` (axes nobody needs
    later), then the ``kernel`` runs:

    * ``'matmul'``: ``matmul(x_view(x), y_view(y))`` (operands swapped when ``swap``), then a
      reshape to ``result_shape``; ``layout`` is the priced layout it came from;
    * ``'multiply'``: ``multiply(x_view(x), y_view(y))``, both broadcast to ``result`` order;
    * ``'einsum'``: one einsum call on the local letter string ``einsum`` (on ``x_view(x)`` and
      ``y_view(y)`` when they are set: an outer product made contiguous first).

    ``reduce``: contracted labels the ``'matmul'`` runs as batch labels instead (so that no
    operand is gathered) and sums after: the product, reshaped to ``wide_shape``, is summed
    over its axes ``reduce_axes`` into ``result``.  Empty for every other step.

    ``workers``: a ``'matmul'`` whose stack's leading axis is cut into this many parts run at
    once on the cores BLAS may use (its products each too small for BLAS to thread; a library
    that threads its own products runs it whole).

    ``cost_ns`` is the modelled time, ``flops`` opt_einsum's count for the step.
    """

    operands: tuple[int, int]
    x_labels: Labels
    y_labels: Labels
    sum_x: tuple[int, ...]
    sum_y: tuple[int, ...]
    batch: Labels
    contract: Labels
    result: Labels
    result_shape: Shape
    kernel: str
    einsum: str | None
    x_view: View | None
    y_view: View | None
    swap: bool
    layout: MatmulLayout | None
    cost_ns: float
    flops: int
    reduce: Labels = ()
    reduce_axes: tuple[int, ...] = ()
    wide_shape: Shape = ()
    workers: int = 1

    @property
    def result_size(self) -> int:
        return math.prod(self.result_shape)


@dataclass(frozen=True)
class Finish:
    """The last touches: permute to output order, reshape (size-1 axes come back), and copy
    when nothing allocated a fresh array (the result must never alias an input)."""

    permutation: tuple[int, ...] | None
    shape: Shape
    reshape: bool
    copy: bool


@dataclass(frozen=True)
class Blocking:
    """The steps whose buffers would break the memory limit, run block by block.

    Each label in ``labels`` is cut into chunks of ``chunks`` (``counts`` of them, the last
    possibly shorter).  ``sliced[k]`` says whether operand ``k`` carries a cut label (a
    broadcast size-1 axis does not count); the others are prepared once.  The steps numbered
    in ``hoisted`` (positions in ``Schedule.steps``) depend on no sliced operand: they run
    once, before the loop, on the whole operands, and their results are shared by every
    block (a hoisted prologue).  Every other step is inside the loop: a block slices the
    sliced operands along ``operand_axes[k]`` (per cut label, the axes of operand ``k``
    carrying it), runs those steps of the schedule in ``inner`` for its chunk sizes, and
    writes its result into the result buffer at ``storage_axes`` (or, for a label summed
    over, adds it: ``accumulate``).  The buffer holds the output's labels (those of extent
    above 1) in ``storage`` order, the order the last step produces them, so a block is
    written without a transpose and the call returns the buffer permuted to output order (a
    view: the schedule's ``finish``); each schedule in ``inner`` finishes its block in
    ``storage`` order.  ``purpose`` says why: ``'memory'`` (the limit) or ``'cache'`` (a
    bandwidth-bound chain, its intermediates kept cache-sized).  ``in_place``: every block's
    last product writes straight into its slice of the buffer (`strides.writes_in_place`;
    a backend without ``ArrayOps.matmul_into`` copies it there).  ``base`` is the unblocked
    schedule these blocks cut, whose decisions a later shape of the same structure follows
    (`calls.tiers`, the reuse tier); not part of the schedule's identity.
    """

    labels: Labels
    chunks: tuple[int, ...]
    counts: tuple[int, ...]
    accumulate: bool
    operand_axes: tuple[tuple[tuple[int, ...], ...], ...]
    storage: Labels
    storage_axes: tuple[tuple[int, ...], ...]
    inner: tuple[tuple[tuple[int, ...], Schedule], ...]
    hoisted: tuple[int, ...] = ()
    sliced: tuple[bool, ...] = ()
    purpose: str = "memory"
    in_place: bool = False
    base: Schedule | None = field(default=None, compare=False, repr=False)

    @property
    def n_blocks(self) -> int:
        return math.prod(self.counts)


@dataclass(frozen=True)
class Schedule:
    """A complete, backend-neutral execution recipe for one shape signature.

    ``inputs``/``output`` are integer labels, ``extents`` maps every label to its extent.
    ``flops`` counts the scheduled work (steps and preparation sums), ``naive_flops`` that of
    one einsum loop, ``peak_extra`` the most elements alive at once beyond the operands and the
    result, and ``cost_ns`` the modelled time.  ``optimizer`` names what chose ``path``.
    ``blocking`` is set when the call runs in blocks to stay within ``memory_limit`` (elements;
    None: unbounded).  ``layouts[k]`` describes operand ``k`` as the peak counts it (``None``:
    every operand C-contiguous and of the computation's dtype; else bit `STRIDED`: neither C-
    nor Fortran-contiguous, so a BLAS step copies it; bit `FORTRAN`: Fortran-ordered, read as
    its transpose; bit `CONVERTED`: converted to the computation's dtype, a copy).
    ``priced_by`` names the prices' source (the cost model's ``priced_by``: a profile file or the
    built-in defaults; '' when the model does not say), which ``explain`` prints.
    ``along_path`` (a direct schedule): its einsum runs pair by pair along ``path``, one einsum
    call per pair and nothing else planned (a structure's first call, `calls.tiers`); a
    direct schedule without it is one einsum call of the whole string (numpy's C loop; torch
    follows ``path`` inside its one call either way).
    """

    inputs: tuple[Labels, ...]
    output: Labels
    shapes: tuple[Shape, ...]
    output_shape: Shape
    extents: dict[int, int] = field(compare=False, repr=False)
    strategy: str = "pairwise"
    einsum: str | None = None
    preparations: tuple[Preparation, ...] = ()
    steps: tuple[Step, ...] = ()
    path: tuple[tuple[int, ...], ...] = ()
    finish: Finish | None = None
    optimizer: str = "auto"
    flops: int = 0
    naive_flops: int = 0
    peak_extra: int = 0
    cost_ns: float = 0.0
    memory_limit: int | None = None
    blocking: Blocking | None = None
    layouts: tuple[int, ...] | None = None
    priced_by: str = field(default="", compare=False)
    along_path: bool = False


#: Bits of `Schedule.layouts`: the operand is not C-contiguous (nor Fortran-ordered: a BLAS
#: step that needs its matrix contiguous copies it); the operand is converted to the
#: computation's dtype (a copy).
STRIDED = 1


CONVERTED = 2


#: Bit of `Schedule.layouts`: the operand is Fortran-ordered (read as its transpose, a C array).
FORTRAN = 4
