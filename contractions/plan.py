"""Stage 4 of the pipeline: a validated, shape-specific plan.

`make_plan` runs parse -> solve -> expand for concrete operand shapes and checks every
single axis's extent across operands (size 1 broadcasts, as in numpy's einsum).  The
result is a frozen `Plan`; backends turn it into arithmetic.  Every failure is raised
here, before any arithmetic runs.

>>> p = make_plan('WCa,Caib,WCi->WCb', ((4, 2, 3), (2, 3, 5, 6), (4, 2, 5)), ())
>>> p.expansion.einsum, p.output_shape
('ABa,Baib,ABi->ABb', (4, 2, 6))
"""

from __future__ import annotations

from dataclasses import dataclass

from .caching import byte_bounded_cache, shapes_key_weight
from .errors import SizeMismatchError, quoted
from .expand import Expansion, ellipsis_ranks, expand
from .parser import ELLIPSIS, ParsedSubscripts, is_group
from .solver import solve_call

__all__ = ["Plan", "make_plan", "PLAN_CACHE_SIZE"]

PLAN_CACHE_SIZE = 4096
PLAN_CACHE_BYTES = 64 * 2**20  # keys hold the caller's subscripts (contractions/caching.py)


@dataclass(frozen=True)
class Plan:
    """Everything shape-specific about one call, except the backend's own schedule.

    ``extents[label]`` is the broadcast extent of each single axis; ``output_shape`` the
    result's shape; ``supplements`` the call's ``len_`` items, as `make_plan` took them.
    """

    parsed: ParsedSubscripts
    lengths: tuple[int, ...]
    expansion: Expansion
    shapes: tuple[tuple[int, ...], ...]
    extents: tuple[int, ...]
    output_shape: tuple[int, ...]
    supplements: tuple[tuple[str, int], ...] = ()

    @property
    def group_shapes(self) -> dict[str, tuple[int, ...]]:
        """Each group's extents, e.g. ``{'W': (4,), 'C': (2, 3)}``."""
        return {g: tuple(self.extents[label] for label in labels)
                for g, labels in self.expansion.group_labels}


def _term(parsed: ParsedSubscripts, k: int) -> str:
    return parsed.inputs[k].replace(ELLIPSIS, "...")


def _describe_axis(exp: Expansion, label: int) -> str:
    name, sub = exp.owner(label)
    if name == "...":
        return f"'...' axis {sub} (of {len(exp.ellipsis_labels)}, right-aligned)"
    if is_group(name):
        n = len(dict(exp.group_labels)[name])
        return f"group {name!r} sub-axis {sub} (of {n})"
    return f"letter {name!r}"


def _extents(parsed: ParsedSubscripts, exp: Expansion,
             shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    s = parsed.subscripts
    extent: list[int] = [1] * exp.n_axes
    # Where each extent was first seen with a non-1 size, for the error message.
    source: list[tuple[int, int] | None] = [None] * exp.n_axes
    for k, (labels, shape) in enumerate(zip(exp.inputs, shapes)):
        within: dict[int, int] = {}
        for axis, (label, size) in enumerate(zip(labels, shape)):
            if label in within and shape[within[label]] != size:
                raise SizeMismatchError(
                    f"size mismatch in {quoted(s)}: {_describe_axis(exp, label)} is repeated in operand {k} "
                    f"(term {_term(parsed, k)!r}) with extents {shape[within[label]]} (axis "
                    f"{within[label]}) and {size} (axis {axis}); a diagonal needs equal extents."
                )
            within.setdefault(label, axis)
            if size == 1:
                continue
            if source[label] is None:
                extent[label], source[label] = size, (k, axis)
            elif extent[label] != size:
                k0, axis0 = source[label]  # type: ignore[misc]
                raise SizeMismatchError(
                    f"size mismatch in {quoted(s)}: {_describe_axis(exp, label)} has extent "
                    f"{extent[label]} in operand {k0} (term {_term(parsed, k0)!r}, axis {axis0}) but "
                    f"{size} in operand {k} (term {_term(parsed, k)!r}, axis {axis}). Extents must "
                    "agree (or be 1 to broadcast); if a group's axes are in a different order in "
                    "one operand (a transposed batch), move them to match first."
                )
    return tuple(extent)


@byte_bounded_cache(maxsize=PLAN_CACHE_SIZE, maxbytes=PLAN_CACHE_BYTES, weigh_results=False,
                    weigh_args=shapes_key_weight)
def make_plan(subscripts: str, shapes: tuple[tuple[int, ...], ...],
              supplements: tuple[tuple[str, int], ...]) -> Plan:
    """Parse, solve, expand and validate for these shapes (cached, thread-safe, bounded)."""
    parsed, lengths = solve_call(subscripts, tuple(len(sh) for sh in shapes), supplements)
    exp = expand(parsed, lengths, ellipsis_ranks(parsed, lengths, tuple(map(len, shapes))))
    extents = _extents(parsed, exp, shapes)
    return Plan(
        parsed=parsed,
        lengths=lengths,
        expansion=exp,
        shapes=shapes,
        extents=extents,
        output_shape=tuple(extents[label] for label in exp.output),
        supplements=supplements,
    )
