"""bench/torch_bench.py's report writer: the goals' verdicts follow the numbers, every string
gets a row, and the plot is written (no timing here: synthetic results)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def torch_bench():
    sys.path.insert(0, str(BENCH))
    try:
        import torch_bench
        yield torch_bench
    finally:
        sys.path.remove(str(BENCH))


def _row(s, ours, peer, compiled_ours, compiled_peer):
    return {"subscripts": s, "expanded": s.lower(), "shapes": [],
            "eager_us": {"contract": ours, "torch.einsum": peer, "opt_einsum": 2 * peer},
            "eager_ratio": peer / ours,
            "compiled_us": {"contract": compiled_ours, "torch.einsum": compiled_peer},
            "compiled_ratio": compiled_peer / compiled_ours,
            "compile_s": {"contract": 1.5, "torch.einsum": 1.25}, "graph_breaks": 0}


def test_report_rows_goals_and_plot(torch_bench, tmp_path):
    results = {"torch": "2.x", "threads": 2, "machine": "test",
               "rows": [_row("Wa,ab->Wb", 10.0, 20.0, 5.0, 5.0), _row("Wi,Wi->W", 10.0, 8.0, 6.0, 5.0)],
               "overhead": {"subscripts": "Wa,ab->Wb", "contract_us": 9.0, "bare_us": 6.0,
                            "overhead_us": 3.0}}
    md, png = tmp_path / "t.md", tmp_path / "t.png"
    torch_bench.write_report(results, md, png)
    text = md.read_text()
    assert "| `Wa,ab->Wb` | 10.0 | 20.0 | 40.0 | 2.00 | 5.0 | 5.0 | 1.00 | 1.5 / 1.2 | 0 |" in text
    assert "| `Wi,Wi->W` | 10.0 | 8.0 | 16.0 | 0.80 |" in text
    # geomean sqrt(2 * 0.8) = 1.26 >= 1.2 met; min 0.8 < 0.9 not met; slowdown 1.2 > 1.1 not met
    assert "| eager: geometric mean ratio | >= 1.2 | 1.26 | yes |" in text
    assert "| eager: smallest ratio | >= 0.9 | 0.8 | no |" in text
    assert "| compiled: largest slowdown vs compiled torch.einsum | <= 1.1 | 1.2 | no |" in text
    assert "| warm eager overhead, us | <= 5.0 | 3 | yes |" in text
    assert png.stat().st_size > 1000
