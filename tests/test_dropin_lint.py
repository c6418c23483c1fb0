"""The linter and the AST scanner read np.einsum's forms like any other call site."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

from contractions.lint import run_check
from contractions.testing.scan import scan_call_sites

ELLIPSIS_SITES = """
import numpy as np
from contractions import contract

def batched(x, w):
    return contract("...ij,jk->...ik", x, w)          # numpy's ellipsis: fine

def implicit(a, b):
    return contract("ij,jk", a, b)                     # implicit output: fine

def grouped(x, w):
    return contract("...Wa,Wab->...Wb", x, w)         # W fixed by the second term: fine

def open_group(x, y):
    return contract("...Wa,...Wa->...W", x, y)        # W beside '...' only: needs len_W

def two(x):
    return contract("...a...->a", x)                   # '...' twice in a term
"""


def _check(root: Path) -> tuple[int, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    code = run_check([str(root)], out=out, err=err)
    return code, out.getvalue().splitlines()


def test_ellipsis_call_sites_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "sites.py"
    path.write_text(textwrap.dedent(ELLIPSIS_SITES).lstrip("\n"))
    code, lines = _check(tmp_path)
    assert code == 1
    assert len(lines) == 2, lines
    open_group, two = lines
    assert open_group.startswith(f"{path}:14:12: CT107 '...Wa,...Wa->...W' needs a supplement")
    assert "len_W" in open_group
    assert two.startswith(f"{path}:17:12: CT101 malformed subscripts '...a...->a'")


def test_ellipsis_call_sites_are_scanned(tmp_path: Path) -> None:
    path = tmp_path / "sites.py"
    path.write_text(textwrap.dedent(ELLIPSIS_SITES).lstrip("\n"))
    found = {site.subscripts for site in scan_call_sites([path])}
    assert {"...ij,jk->...ik", "ij,jk", "...Wa,Wab->...Wb"} <= found
