"""`explain`'s text as a picture and a table: `ExplanationText` is the plain report (a str),
its ``plot()`` draws the schedule's contraction tree, ``_repr_html_`` a notebook table, and
``contractions explain ... --plot FILE`` writes the figure.

The figures are checked against schedules planned independently (`make_schedule` on an explicit
path, `contract_expression`'s schedule) and memory held after each step against counts done by
hand."""

from __future__ import annotations

import html
import pickle
import re
import sys
from html.parser import HTMLParser

import numpy as np
import pytest

from contractions import contract_expression, explain, explanation, make_plan, make_schedule
from contractions.cli import main
from contractions.plotting import ExplanationText
from contractions.schedule import Explanation

CHAIN = ("ab,bc,cd,de->ae", ((5, 6), (6, 7), (7, 8), (8, 9)))
CHAIN_PATH = [(0, 1), (0, 1), (0, 1)]      # (ab bc) first, then (cd de), then the two results
BLOCKED = ("ab,bc,Wc,Wd->Wad", ((60, 60), (60, 60), (1000, 60), (1000, 50)), 20000)
TT = ("WCa,Caib,WCi->WCb", ((40, 2, 30), (2, 30, 50, 60), (40, 2, 50)))


@pytest.fixture
def mpl():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    return matplotlib


def _texts(fig, prefix: str) -> dict[str, str]:
    from matplotlib.text import Text

    return {t.get_gid(): t.get_text() for t in fig.findobj(Text)
            if (t.get_gid() or "").startswith(prefix)}


def _title(fig) -> str:
    (title,) = _texts(fig, "title").values()
    return title


# ------------------------------------------------------------------ the text stays the text
def test_explain_returns_the_old_text_as_a_str_subclass(capsys):
    subscripts, shapes = TT
    text = explain(subscripts, *shapes, optimize="greedy")
    plain = str(explanation(subscripts, *shapes, optimize="greedy"))
    assert isinstance(text, ExplanationText) and isinstance(text, str)
    assert text == plain and plain == text and hash(text) == hash(plain)
    assert text.splitlines() == plain.splitlines() and "matmul" in text
    assert repr(text) == repr(plain) and f"{text}" == plain and text + "" == plain
    print(text)
    assert capsys.readouterr().out == plain + "\n"
    again = pickle.loads(pickle.dumps(text))
    assert again == plain and isinstance(again, ExplanationText)
    assert again.explanation.path == text.explanation.path == ((1, 2), (0, 1))
    bare = explain("Wab->Wa", 3)      # bare ndims: the report stops at the expansion
    assert bare == str(explanation("Wab->Wa", 3)) and bare.tier is None


def test_plot_without_shapes_says_what_to_pass(mpl):
    with pytest.raises(ValueError, match=r"explain\('Wab->Wa', \.\.\.\) was given ndims.*pass one shape"):
        explain("Wab->Wa", 3).plot()


def test_plot_without_matplotlib_names_the_extra(monkeypatch):
    text = explain(*TT[:1], *TT[1])
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=re.escape("pip install 'grouped-einsum[plot]'")):
        text.plot()


# ------------------------------------------------------------------ the figure
def test_one_node_per_step_with_its_time_labels_and_memory_held(mpl, tmp_path):
    subscripts, shapes = CHAIN
    schedule = make_schedule(make_plan(subscripts, shapes, ()), CHAIN_PATH)   # planned independently
    text = explain(subscripts, *shapes, optimize=CHAIN_PATH)
    fig = text.plot()
    fig.savefig(tmp_path / "chain.png")
    assert (tmp_path / "chain.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    steps = _texts(fig, "step-")
    assert len(steps) == len(schedule.steps) == 3
    assert len(_texts(fig, "operand-")) == 4
    for n, step in enumerate(schedule.steps, 1):
        label = steps[f"step-{n}"]
        assert f"step {n}: {step.kernel}" in label
        assert f"model {step.cost_ns / 1e3:.3g} us" in label
        assert f"result {step.result_shape}" in label
    # by hand: step 1 makes ac (5x7), step 2 makes ce (7x9) while ac waits, step 3 the output
    assert "ab,bc -> " in steps["step-1"] and "cd,de -> " in steps["step-2"]
    assert "held after: 35\n" in steps["step-1"] + "\n"
    assert "held after: 98" in steps["step-2"] and "held after: 0" in steps["step-3"]
    assert "planner: full search" in _title(fig)     # an explicit optimize= is planned in full


def test_blocked_call_shows_the_loop_and_its_block_count(mpl, tmp_path):
    subscripts, shapes, limit = BLOCKED
    schedule = contract_expression(subscripts, *shapes, memory_limit=limit).schedule
    blocking = schedule.blocking
    assert blocking is not None and blocking.n_blocks > 1 and blocking.hoisted
    fig = explain(subscripts, *shapes, memory_limit=limit).plot()
    fig.savefig(tmp_path / "blocked.png")
    (label,) = _texts(fig, "blocks-label").values()
    assert f"blocked loop: {blocking.n_blocks} blocks" in label
    assert f"in {blocking.counts[0]} chunks of {blocking.chunks[0]}" in label
    assert [p.get_gid() for p in fig.axes[0].patches] == ["blocks"]
    steps = _texts(fig, "step-")
    assert len(steps) == len(schedule.steps)
    for k in range(len(schedule.steps)):
        where = "once, before the blocks" if k in blocking.hoisted else "per block"
        assert steps[f"step-{k + 1}"].endswith(where)
    # the hoisted result (a 60x60 matrix) is held through the whole loop
    for k in range(len(schedule.steps)):
        held = int(re.search(r"held after: ([\d,]+)", steps[f"step-{k + 1}"]).group(1).replace(",", ""))
        assert held >= 3600


def test_the_title_names_the_tier_that_served_the_call(mpl):
    subscripts, shapes = TT
    text = explain(subscripts, *shapes)
    # the report's own line says which tier plans a first call
    line = next(line for line in text.splitlines() if line.startswith("first call"))
    tier = line.split()[2]    # 'first call      quick tier (...)', 'first call      full search (...)'
    assert text.tier == tier == text.explanation.first_call.tier
    title = _title(text.plot())
    assert (f"planner: {tier} tier" in title) if tier != "full" else ("planner: full search" in title)
    assert "'WCa,Caib,WCi->WCb' on numpy" in title


def test_one_einsum_call_is_one_node(mpl):
    text = explain("ij,jk->ik", (3, 4), (4, 5))
    assert text.explanation.strategy == "direct" and not text.explanation.steps
    fig = text.plot()
    assert list(_texts(fig, "einsum")) == ["einsum"] and not _texts(fig, "step-")
    assert "one np.einsum" in _texts(fig, "einsum")["einsum"]
    assert "one einsum call" in _title(fig)


# ------------------------------------------------------------------ the notebook table
class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.tags: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_html_table_has_a_row_per_step():
    subscripts, shapes = CHAIN
    schedule = make_schedule(make_plan(subscripts, shapes, ()), CHAIN_PATH)
    page = explain(subscripts, *shapes, optimize=CHAIN_PATH)._repr_html_()
    parsed = _Cells()
    parsed.feed(page)
    rows = [r for r in parsed.rows if r]
    assert len(rows) == len(schedule.steps)
    for row, step in zip(rows, schedule.steps):
        assert row[1] == step.kernel and row[4] == str(step.result_shape)
        assert row[5] == f"{step.flops:,}" and row[6] == f"{step.cost_ns / 1e3:.3g} us"
    assert "->" not in page and "&#x27;ab,bc,cd,de-&gt;ae&#x27;" in page


def test_html_escapes_user_text():
    hostile = "<script>alert('x')</script>&"
    bare = Explanation(subscripts=hostile, identifiability="determined", co_travelling=(),
                       groups=(), expanded="<b>a</b>->a")
    planned = Explanation(subscripts=hostile, identifiability="determined", co_travelling=(),
                          groups=(), expanded="<b>a</b>,<i>->a", output_shape=(2,), backend="<u>",
                          optimizer="auto", strategy="direct", path_taken=False, flops=2,
                          naive_flops=2, peak_extra=0)
    for made, tags in ((bare, {"div", "pre"}),
                       (planned, {"div", "p", "b", "code", "table", "thead", "tbody", "tr", "th", "td",
                                  "details", "summary", "pre"})):
        page = ExplanationText(made)._repr_html_()
        assert "<script" not in page and "<b>a" not in page and "<u>" not in page
        assert html.escape(repr(hostile)) in page
        parsed = _Cells()
        parsed.feed(page)
        assert set(parsed.tags) <= tags


def test_html_of_a_blocked_call_marks_the_loop():
    subscripts, shapes, limit = BLOCKED
    blocking = contract_expression(subscripts, *shapes, memory_limit=limit).schedule.blocking
    page = explain(subscripts, *shapes, memory_limit=limit)._repr_html_()
    assert f"blocked loop: {blocking.n_blocks} blocks" in page
    assert "(once, before the blocks)" in page


# ------------------------------------------------------------------ the command line
def test_cli_plot_writes_a_png(mpl, tmp_path, capsys):
    out = tmp_path / "plan.png"
    assert main(["explain", "ab,bc,Wc,Wd->Wad", "60x60", "60x60", "1000x60", "1000x50",
                 "--memory-limit", "20000", "--plot", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("subscripts      'ab,bc,Wc,Wd->Wad'") and f"wrote {out}" in printed
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_plot_needs_shapes_and_a_writable_file(mpl, tmp_path, capsys):
    assert main(["explain", "Wa,Wab->Wb", "--plot", str(tmp_path / "x.png")]) == 2
    assert "--plot draws the schedule, which needs one SHAPE per operand" in capsys.readouterr().err
    missing = tmp_path / "no" / "such" / "dir" / "x.png"
    assert main(["explain", "Wa,Wab->Wb", "2x3", "2x3x4", "--plot", str(missing)]) == 2
    assert f"error: --plot {missing}" in capsys.readouterr().err
    assert not missing.exists()


def test_cli_plot_without_matplotlib_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert main(["explain", "Wa,Wab->Wb", "2x3", "2x3x4", "--plot", str(tmp_path / "x.png")]) == 2
    assert "pip install 'grouped-einsum[plot]'" in capsys.readouterr().err


# ------------------------------------------------------------------ JAX and torch
def test_jax_plots_the_path_its_one_einsum_follows(mpl):
    jnp = pytest.importorskip("jax.numpy")
    subscripts, shapes = TT
    operands = [jnp.ones(s) for s in shapes]
    text = explain(subscripts, *operands)
    assert text.tier == "framework" and not text.explanation.steps
    fig = text.plot()
    pairs = _texts(fig, "pair-")
    assert len(pairs) == len(text.explanation.path) == 2
    assert all(label.endswith("inside one jnp.einsum") for label in pairs.values())
    # the last pair makes the output's labels
    assert pairs["pair-2"].splitlines()[1].endswith("-> " + text.explanation.expanded.split("->")[1])
    assert "planner: jax's own path" in _title(fig)
    assert "inside one jnp.einsum" in text._repr_html_()


def test_torch_plots_its_schedule(mpl, tmp_path):
    torch = pytest.importorskip("torch")
    subscripts, shapes = TT
    operands = [torch.from_numpy(np.ones(s)) for s in shapes]
    for optimize in ("auto", [(1, 2), (0, 1)]):
        text = explain(subscripts, *operands, optimize=optimize)
        fig = text.plot()
        fig.savefig(tmp_path / "torch.png")
        e = text.explanation
        if e.steps:        # torch runs the schedule's pairwise steps itself
            assert len(_texts(fig, "step-")) == len(e.steps)
        else:              # one torch.einsum along the schedule's path
            pairs = _texts(fig, "pair-")
            assert len(pairs) == len(e.path)
            assert all(label.endswith("inside one torch.einsum") for label in pairs.values())
        assert "on torch" in _title(fig) and text.tier is not None
