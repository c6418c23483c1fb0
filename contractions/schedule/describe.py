"""Describing a schedule for people: the lines ``explain`` prints."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .ir import Schedule


def describe_schedule(schedule: Schedule, name: Callable[[int], str] = str) -> list[str]:
    """Lines describing a schedule: the strategy, preparation, each step, the finish.

    ``name`` spells a label (``explain`` passes the expansion's symbols).  These are the lines
    ``explain`` prints; tests compare them with the steps that actually run.
    """
    def labels(ls: Sequence[int]) -> str:
        return "".join(name(lab) for lab in ls) or "-"

    if schedule.strategy == "direct":
        return [f"one einsum {schedule.einsum!r} (small problem: one C loop beats pairwise steps)"]
    lines = []
    blocking = schedule.blocking
    hoisted = set(blocking.hoisted) if blocking is not None else set()
    loop_header = None
    if blocking is not None:
        cuts = ", ".join(f"{labels([lab])} in {n} chunks of {c}"
                         for lab, c, n in zip(blocking.labels, blocking.chunks, blocking.counts))
        how = "adding block results" if blocking.accumulate else "each written into its slice"
        loop_header = f"blocks: {blocking.n_blocks} ({cuts}; {how}); each block runs:"
    prep_lines = []
    for k, prep in enumerate(schedule.preparations):
        if prep.is_identity:
            continue
        parts = []
        if prep.transpose is not None:
            parts.append("read as its transpose (Fortran order)")
        if prep.squeeze is not None:
            parts.append(f"drop size-1 axes -> {prep.squeeze}")
        parts += [f"diagonal of axes {a},{b}" for a, b in prep.diagonals]
        if prep.sum_axes:
            parts.append(f"sum axes {list(prep.sum_axes)}")
        prep_lines.append(f"prepare operand {k}: " + "; ".join(parts) + f" -> {labels(prep.labels)}")
    step_lines = []
    for n, step in enumerate(schedule.steps, 1):
        what = {"matmul": "matmul", "multiply": "multiply", "einsum": "einsum"}[step.kernel]
        detail = f" {step.einsum!r}" if step.kernel == "einsum" else ""
        if step.kernel == "matmul" and step.layout is not None:
            lay = step.layout

            def form(f: Any) -> str:
                return "copy" if f.copy else ("T-view" if f.transposed else "view")

            detail = f" [{form(lay.left)} @ {form(lay.right)}]"
        step_lines.append((n - 1 in hoisted,
            f"step {n}: {step.operands} {what}{detail} {labels(step.x_labels)},{labels(step.y_labels)}"
            f"->{labels(step.result)} batch {labels(step.batch)} contract {labels(step.contract)}; "
            f"result {step.result_shape}; {step.flops:,} FLOPs; model {step.cost_ns / 1e3:.3g} us"))
    if hoisted:
        lines.append("once, before the blocks (these steps carry no cut label):")
        lines += ["  " + text for once, text in step_lines if once]
    if loop_header is not None:
        lines.append(loop_header)
    lines += prep_lines
    lines += [text for once, text in step_lines if not once]
    fin = schedule.finish
    if fin is not None and fin.permutation is not None:
        lines.append(f"finish: transpose {fin.permutation} to output order")
    return lines
