"""`explain`'s report as something to look at: `ExplanationText`, the report's text (a ``str``)
with ``plot()``, a matplotlib figure of the contraction tree, and a table for notebooks.

The picture and the table read only the report's data (`Explanation`): nothing is planned
again, and matplotlib is imported inside ``plot()`` alone (``pip install grouped-einsum[plot]``).

>>> from contractions.schedule import Explanation
>>> text = ExplanationText(Explanation('Wa->W', 'determined', (), (), 'Aa->A'))
>>> text == str(text.explanation) and text.startswith("subscripts      'Wa->W'")
True
>>> '-&gt;' in text._repr_html_() and '->' not in text._repr_html_()
True
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .schedule.describe import ExplainedStep, Explanation
from .schedule.memory import _step_tokens

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["ExplanationText"]

#: What runs the whole call when a backend hands it one einsum (named in the picture).
_ONE_CALL = {"numpy": "np.einsum", "jax": "jnp.einsum", "torch": "torch.einsum",
             "cupy": "cupy.einsum", "dask": "dask blockwise einsum", "array_api": "einsum"}

#: A label as `Expansion.readable` writes it: a letter, or ``[label]`` past the 52 letters.
_SYMBOL = re.compile(r"\[\d+\]|[^,]")

_INSTALL = "pip install 'grouped-einsum[plot]'"


class ExplanationText(str):
    """What `explain` returns: the report's text, unchanged (``==``, ``print``, ``in`` and
    ``splitlines()`` see the plain string), with the report as data in ``explanation``, the
    planner that served the call in ``tier``, ``plot()`` (a matplotlib ``Figure`` of the
    contraction tree) and, in a notebook, a table of the steps (``_repr_html_``).

    >>> from contractions import explain
    >>> text = explain('Wij,Wjk->Wik', (8, 20, 30), (8, 30, 40), optimize='greedy')
    >>> isinstance(text, str) and text.splitlines()[0] == "subscripts      'Wij,Wjk->Wik'"
    True
    >>> text.tier, [step.kernel for step in text.explanation.steps]
    ('full', ['matmul'])
    """

    explanation: Explanation

    def __new__(cls, explanation: Explanation) -> ExplanationText:
        text = super().__new__(cls, str(explanation))
        text.explanation = explanation
        return text

    def __reduce__(self) -> tuple[Any, ...]:
        return ExplanationText, (self.explanation,)

    @property
    def tier(self) -> str | None:
        """The planner that served the call: the tier of its first call (`FirstCall.tier`:
        ``'first'``, ``'quick'``, ``'reuse'``, ``'full'``, ...; ``'full'`` too for an explicit
        ``optimize=`` and for one einsum call), ``'framework'`` (JAX's own path), or None (bare
        ndims: nothing planned; a backend that does not report its steps)."""
        e = self.explanation
        if e.output_shape is None:
            return None
        if e.optimizer is None:
            return "framework"
        if e.first_call is not None:
            return e.first_call.tier
        if e.strategy is None and e.optimizer == "auto":
            return None
        return "full"   # an explicit optimize=, and one einsum call, always plan in full

    def plot(self) -> Figure:
        """A matplotlib ``Figure`` of the contraction tree: the operands at the bottom, each
        step a node above them in the order it runs (its operands' labels -> its result's, its
        kernel, result shape, FLOPs, modelled time, and the elements held after it beyond
        operands and result), the blocked loop as a box around the steps each block runs, and
        the planner (`tier`) in the title.  Below, per step, the modelled time and the memory
        held.  A backend that runs one einsum call shows its path's pairs inside that call (or
        one node).  Needs matplotlib; save with ``.savefig(file)``.

        >>> from contractions import explain
        >>> fig = explain('Wij,Wjk->Wik', (8, 20, 30), (8, 30, 40), optimize='greedy').plot()
        >>> [text.get_text().splitlines()[0] for text in fig.axes[0].texts][-1]
        'step 1: matmul'
        """
        try:
            from matplotlib.figure import Figure
        except ImportError as exc:
            raise ImportError(f"ExplanationText.plot() draws with matplotlib, which is not "
                              f"installed: {_INSTALL}", name="matplotlib") from exc
        e = self.explanation
        if e.output_shape is None:
            raise ValueError(f"explain({e.subscripts!r}, ...) was given ndims, not shapes: nothing "
                             "is planned to plot; pass one shape (or array) per operand")
        tree = _tree(e)
        return _draw(Figure, e, tree, self._title())

    def _title(self) -> str:
        e, tier = self.explanation, self.tier
        if tier == "framework":
            planner = f"planner: {e.backend}'s own path (opt_einsum 'auto')"
        elif tier is None:
            planner = f"planner: not reported by the {e.backend} backend"
        elif tier == "full" and e.strategy == "direct" and not e.path_taken:
            planner = "planner: full search (one einsum call: nothing to search)"
        elif tier == "full":
            planner = "planner: full search"
        else:
            planner = f"planner: {tier} tier (a first call; shown: the full search's schedule)"
        totals = [f"modelled {_us(e.cost_ns)}" if e.cost_ns is not None else "",
                  f"{e.flops:,} FLOPs" if e.flops is not None else "",
                  f"peak extra {e.peak_extra:,} elements" if e.peak_extra is not None else ""]
        sums = ", ".join(t for t in totals if t)
        return f"{e.subscripts!r} on {e.backend}: {e.expanded}\n{planner}" + (f"\n{sums}" if sums else "")

    def _repr_html_(self) -> str:
        """The report as an HTML table (a notebook shows it in place of the text): one row per
        step with its kernel, operands, result shape, FLOPs and modelled time; every piece of
        user text escaped."""
        e = self.explanation
        esc = html.escape
        full = f"<details><summary>full report</summary><pre>{esc(str(self))}</pre></details>"
        if e.output_shape is None:
            return f"<div class=\"contractions-explain\"><pre>{esc(str(self))}</pre></div>"
        head = (f"<p><b>explain</b> <code>{esc(repr(e.subscripts))}</code> &rarr; "
                f"<code>{esc(e.expanded)}</code> on {esc(str(e.backend))}; "
                f"{esc(self._title().splitlines()[1])}</p>")
        columns = ("step", "kernel", "operands", "result", "result shape", "FLOPs", "modelled time",
                   "held after (elements)")
        rows = [_row(cells) for cells in _table_rows(e)]
        totals = [f"FLOPs {e.flops:,}" if e.flops is not None else "",
                  f"peak extra {e.peak_extra:,} elements" if e.peak_extra is not None else
                  "peak extra planned by the framework",
                  f"modelled time {_us(e.cost_ns)}" if e.cost_ns is not None else ""]
        table = ("<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr></thead>"
                 "<tbody>" + "".join(rows) + "</tbody></table>")
        foot = "<p>" + esc("; ".join(t for t in totals if t)) + "</p>"
        return f"<div class=\"contractions-explain\">{head}{table}{foot}{full}</div>"


# ------------------------------------------------------------------------ the tree, as data
@dataclass(frozen=True)
class _Node:
    """One box of the picture: an operand (``kind`` 'operand'), a step ('step'), a pair of a
    path one einsum call follows ('pair') or that one call ('einsum')."""

    kind: str
    gid: str
    text: str
    children: tuple[int, ...]
    level: int
    kernel: str = ""
    in_loop: bool = False
    hoisted: bool = False
    #: its row of the notebook table (a 'pair' or 'einsum' node; steps have their own)
    cells: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Tree:
    nodes: tuple[_Node, ...]
    #: per step in the order it runs: (its number, modelled ns, elements held after it)
    bars: tuple[tuple[int, float, int], ...]
    loop_label: str | None


def _terms(expanded: str) -> tuple[list[list[str]], list[str]]:
    inputs, _, output = expanded.partition("->")
    return ([_SYMBOL.findall(term) for term in inputs.split(",")], _SYMBOL.findall(output))


def _us(ns: float) -> str:
    return f"{ns / 1e3:.3g} us"   # as explain's text writes it


def _count(n: int) -> str:
    for unit, size in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def _held_after(e: Explanation) -> tuple[list[int], list[int]]:
    """The steps in the order they run (hoisted ones first) and, per step in that order, the
    elements held after it beyond operands and result: the results of earlier steps a later
    one still needs (a hoisted result is needed by every block, so held through the loop)."""
    steps = e.steps
    tokens = _step_tokens(len(steps) + 1, tuple(s.operands for s in steps))
    consumer = {t[1]: k for k, pair in enumerate(tokens) for t in pair if t[0] == "s"}
    order = [k for k, s in enumerate(steps) if s.hoisted] + [k for k, s in enumerate(steps) if not s.hoisted]
    when = {k: at for at, k in enumerate(order)}
    sizes = [_size(s.result_shape) for s in steps]
    held = []
    for at in range(len(order)):
        total = 0
        for j in order[:at + 1]:
            if j not in consumer:
                continue   # the call's result (or a block's, written into it)
            c = consumer[j]
            if when[c] > at or (steps[j].hoisted and not steps[c].hoisted and e.blocking is not None):
                total += sizes[j]
        held.append(total)
    return order, held


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _tree(e: Explanation) -> _Tree:
    inputs, output = _terms(e.expanded)
    nodes = [_Node("operand", f"operand-{k}", f"operand {k}\n{''.join(t) or '-'}", (), 0)
             for k, t in enumerate(inputs)]
    if e.steps:
        order, held = _held_after(e)
        level = {k: at + 1 for at, k in enumerate(order)}
        tokens = _step_tokens(len(e.steps) + 1, tuple(s.operands for s in e.steps))
        blocked = e.blocking is not None
        for k, (step, pair) in enumerate(zip(e.steps, tokens)):
            kids = tuple(t[1] if t[0] == "o" else len(inputs) + t[1] for t in pair)
            nodes.append(_Node("step", f"step-{step.number}", _step_text(step, held[order.index(k)], blocked),
                               kids, level[k], kernel=step.kernel, in_loop=blocked and not step.hoisted,
                               hoisted=step.hoisted))
        bars = tuple((e.steps[k].number, e.steps[k].cost_ns, h) for k, h in zip(order, held))
        return _Tree(tuple(nodes), bars, _loop_label(e) if e.blocking is not None else None)
    call = _ONE_CALL.get(str(e.backend), f"{e.backend} einsum")
    pairs = [p for p in e.path if len(p) > 1]
    if e.path_taken and pairs and len(inputs) > 1:
        # the framework follows the path inside its one call: its pairs, labels only
        work = [(k, list(t)) for k, t in enumerate(inputs)]
        for n, positions in enumerate(e.path, 1):
            taken = [work[i] for i in positions]
            for i in sorted(positions, reverse=True):
                work.pop(i)
            rest = {s for _, t in work for s in t} | set(output)
            seen: list[str] = []
            for _, t in taken:
                seen += [s for s in t if s not in seen]
            result = [s for s in seen if s in rest] if work else output
            terms, made = ",".join("".join(t) or "-" for _, t in taken), "".join(result) or "-"
            text = f"pair {n}: {tuple(positions)}\n{terms} -> {made}\ninside one {call}"
            nodes.append(_Node("pair", f"pair-{n}", text, tuple(k for k, _ in taken), n,
                               cells=(f"pair {n}", f"inside one {call}", f"{tuple(positions)} {terms}", made,
                                      "", "", "", "")))
            work.append((len(nodes) - 1, result))
        return _Tree(tuple(nodes), (), None)
    what = "its own buffers" if e.peak_extra is None else f"peak extra {e.peak_extra:,}"
    text = f"one {call}\n{e.expanded}\n{what}"
    nodes.append(_Node("einsum", "einsum", text, tuple(range(len(inputs))), 1,
                       cells=("1", f"one {call}", e.expanded.partition("->")[0],
                              e.expanded.partition("->")[2] or "-", str(e.output_shape),
                              f"{e.flops:,}" if e.flops is not None else "", "", "")))
    return _Tree(tuple(nodes), (), None)


def _step_text(step: ExplainedStep, held: int, blocked: bool) -> str:
    where = "\nonce, before the blocks" if step.hoisted else ("\nper block" if blocked else "")
    return (f"step {step.number}: {step.kernel}\n{step.x_labels},{step.y_labels} -> {step.result}\n"
            f"result {step.result_shape}\n{_count(step.flops)} FLOPs, model {_us(step.cost_ns)}\n"
            f"held after: {held:,}{where}")


def _loop_label(e: Explanation) -> str:
    blocking = e.blocking
    assert blocking is not None
    # the cut labels' symbols: the first block's steps carry them, in the report's spelling
    name: dict[int, str] = {}
    if blocking.inner:
        for step, shown in zip(blocking.inner[0][1].steps, e.steps):
            for ints, text in ((step.x_labels, shown.x_labels), (step.y_labels, shown.y_labels),
                               (step.result, shown.result)):
                symbols = _SYMBOL.findall(text) if text != "-" else []
                if len(symbols) == len(ints):
                    name.update(zip(ints, symbols))
    cuts = ", ".join(f"{name.get(lab, str(lab))} in {n} chunks of {c}"
                     for lab, c, n in zip(blocking.labels, blocking.chunks, blocking.counts))
    why = ", cache-sized" if blocking.purpose == "cache" else ""
    return f"blocked loop: {blocking.n_blocks} blocks ({cuts}{why}), each running the steps inside"


def _table_rows(e: Explanation) -> list[tuple[str, ...]]:
    if e.steps:
        order, held = _held_after(e)
        rows: list[tuple[str, ...]] = []
        loop_started = False
        for k, h in zip(order, held):
            step = e.steps[k]
            if e.blocking is not None and not step.hoisted and not loop_started:
                rows.append((_loop_label(e),))
                loop_started = True
            number = f"{step.number}" + (" (once, before the blocks)" if step.hoisted else "")
            rows.append((number, step.kernel, f"{step.operands} {step.x_labels},{step.y_labels}",
                         step.result, str(step.result_shape), f"{step.flops:,}", _us(step.cost_ns),
                         f"{h:,}"))
        return rows
    return [node.cells for node in _tree(e).nodes if node.cells]


def _row(cells: tuple[str, ...]) -> str:
    if len(cells) == 1:
        return f"<tr><td colspan=\"8\"><i>{html.escape(cells[0])}</i></td></tr>"
    return "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"


# ------------------------------------------------------------------------ the picture
_COLOURS = {"operand": "#eeeeee", "matmul": "#cfe2f3", "multiply": "#d9ead3", "einsum": "#fce5cd",
            "pair": "#fff2cc"}


def _positions(tree: _Tree) -> list[tuple[float, float]]:
    """x: operands left to right in the order the tree reaches them, a node above the middle of
    its children; y: the level (operands 0, then each step in the order it runs)."""
    nodes = tree.nodes
    parent = {c for node in nodes for c in node.children}
    roots = [k for k in range(len(nodes)) if k not in parent]
    xs: dict[int, float] = {}
    nxt = [0.0]

    def place(k: int) -> float:
        if not nodes[k].children:
            xs[k] = nxt[0]
            nxt[0] += 1.0
        else:
            xs[k] = sum(place(c) for c in nodes[k].children) / len(nodes[k].children)
        return xs[k]

    for root in roots:
        place(root)
    return [(xs[k], float(node.level)) for k, node in enumerate(nodes)]


def _draw(figure_type: Any, e: Explanation, tree: _Tree, title: str) -> Figure:
    from matplotlib.patches import FancyBboxPatch

    xy = _positions(tree)
    n_leaves = sum(1 for node in tree.nodes if node.kind == "operand")
    levels = max(node.level for node in tree.nodes)
    width = max(7.0, 2.6 * n_leaves)
    tree_height = 1.3 * (levels + 1) + (0.6 if tree.loop_label is not None else 0.2)
    height = tree_height + (2.4 if tree.bars else 0.0) + 0.9
    fig = figure_type(figsize=(width, height))
    if tree.bars:
        grid = fig.add_gridspec(2, 2, height_ratios=[tree_height, 2.4], hspace=0.2, wspace=0.3,
                                top=1 - 0.9 / height, bottom=0.45 / height, left=0.08, right=0.97)
        ax = fig.add_subplot(grid[0, :])
        time_ax, memory_ax = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])
    else:
        ax = fig.add_subplot(1, 1, 1)
        fig.subplots_adjust(top=1 - 0.9 / height, bottom=0.05, left=0.03, right=0.97)
    ax.set_axis_off()
    ax.set_gid("tree")
    for k, node in enumerate(tree.nodes):
        for c in node.children:
            ax.plot([xy[c][0], xy[k][0]], [xy[c][1], xy[k][1]], color="#777777", linewidth=1, zorder=1)
    for k, node in enumerate(tree.nodes):
        colour = _COLOURS.get(node.kernel or node.kind, "#fce5cd")
        ax.text(xy[k][0], xy[k][1], node.text, ha="center", va="center", fontsize=7.5, zorder=3,
                family="monospace", gid=node.gid,
                bbox={"boxstyle": "round,pad=0.4", "facecolor": colour,
                      "edgecolor": "#555555", "linestyle": "--" if node.hoisted else "-"})
    if tree.loop_label is not None:
        inside = [xy[k] for k, node in enumerate(tree.nodes) if node.in_loop]
        x0, x1 = min(x for x, _ in inside) - 0.48, max(x for x, _ in inside) + 0.48
        y0, y1 = min(y for _, y in inside) - 0.45, max(y for _, y in inside) + 0.45
        ax.add_patch(FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0.02",
                                    facecolor="#f4f4ff", edgecolor="#3355aa", linewidth=1.5,
                                    zorder=0, gid="blocks"))
        ax.text(x0 + 0.03, y1 + 0.05, tree.loop_label.replace(" (", "\n(", 1), ha="left", va="bottom",
                fontsize=8, color="#3355aa", zorder=4, gid="blocks-label")
    xs = [x for x, _ in xy]
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ax.set_ylim(-0.35, levels + (1.1 if tree.loop_label is not None else 0.6))
    fig.suptitle(title, fontsize=10, gid="title")
    if tree.bars:
        names = [f"step {n}" for n, _, _ in tree.bars]
        time_ax.bar(names, [ns / 1e3 for _, ns, _ in tree.bars], color="#6fa8dc")
        time_ax.set_ylabel("modelled time (us)")
        per = " (in the loop: per block)" if e.blocking is not None else ""
        time_ax.set_title(f"modelled time per step{per}", fontsize=9)
        memory_ax.bar(names, [h for _, _, h in tree.bars], color="#93c47d")
        memory_ax.set_ylabel("elements")
        memory_ax.set_title("held after each step, beyond operands and result", fontsize=9)
        if e.peak_extra is not None:
            memory_ax.axhline(e.peak_extra, color="#cc4125", linestyle="--", linewidth=1,
                              label=f"peak extra {e.peak_extra:,} (during steps)")
        if e.memory_limit is not None and e.memory_limit <= 4 * max(e.peak_extra or 0, 1):
            memory_ax.axhline(e.memory_limit, color="#444444", linestyle=":", linewidth=1,
                              label=f"limit {e.memory_limit:,}")
        if e.peak_extra is not None:
            memory_ax.legend(fontsize=7, loc="upper left")
        for axis in (time_ax, memory_ax):
            axis.tick_params(labelsize=7)
    return fig  # type: ignore[no-any-return]
