"""Typed results: a downstream file type-checked with mypy sees the operands' array type come back.

`contract` and `ContractExpression.__call__` are overloaded: numpy operands give ``NDArray[Any]``
(annotated ``np.ndarray`` or ``NDArray[np.float64]``, or inferred), `explain` an ``ExplanationText`` (a ``str``),
operands of one other library (JAX, torch, dask) their own array type, a mix an array protocol,
lists and Python scalars ``Any``. The test writes a small downstream module,
runs mypy on it in a subprocess (as a user's CI would) and compares every ``reveal_type``.
mypy finds the package the way a user's mypy does: through the installed distribution when this
checkout is what is installed (``pip install -e .`` leaves a plain path in a ``.pth`` file, see
pyproject.toml), else through ``MYPYPATH``. Skipped where mypy is not installed; .ci/run installs
it into the README's test venv and runs this file there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

NUMPY_ARRAY = "numpy.ndarray[tuple[Any, ...], numpy.dtype[Any]]"
# The three ways numerical code holds numpy operands: annotated with the bare class (its shape
# and dtype Any), annotated NDArray[np.float64], and inferred from np.ones (shape-typed).
NUMPY_OPERANDS = {
    "annotated np.ndarray": ["x: np.ndarray = np.ones((2, 3))", "y: np.ndarray = np.ones((3, 4))"],
    "annotated NDArray[np.float64]": ["x: NDArray[np.float64] = np.ones((2, 3))",
                                      "y: NDArray[np.float64] = np.ones((3, 4))"],
    "inferred": ["x = np.ones((2, 3))", "y = np.ones((3, 4))"],
}
# (library, import lines, [(expression, revealed type)]); `p`, `q` are (2, 3) and (3, 4) arrays.
CASES = [
    *[(f"numpy, {how}", ["import numpy as np", "from numpy.typing import NDArray", *setup], [
        ("contract('Wa,ab->Wb', x, y)", NUMPY_ARRAY),
        ("contract('Wa,ab->Wb', x, y, optimize='greedy', memory_limit='1MB', len_W=1)", NUMPY_ARRAY),
        ("contract_expression('Wa,ab->Wb', (2, 3), (3, 4))(x, y)", NUMPY_ARRAY),
        ("contract_expression('Wa,ab->Wb', x.shape, y.shape)(x, y, out=np.empty((2, 4)))", NUMPY_ARRAY),
        ("explain('Wa,ab->Wb', x, y)", "contractions.plotting.ExplanationText"),
        ("explain('Wa,ab->Wb', x.shape, y.shape, optimize='greedy')", "contractions.plotting.ExplanationText"),
    ]) for how, setup in NUMPY_OPERANDS.items()],
    ("numpy", ["import numpy as np", "p = np.ones((2, 3))", "q = np.ones((3, 4))"], [
        ("contract('i,i->', [1.0, 2.0], [3.0, 4.0])", "Any"),   # lists: no array type to return
        ("contract(',->', np.float64(2.0), np.float32(3.0))", NUMPY_ARRAY),  # a 0-d array at run time
    ]),
    ("jax", ["import jax", "import jax.numpy as jnp", "import numpy as np", "p = jnp.ones((2, 3))", "q = jnp.ones((3, 4))"], [
        ("contract('Wa,ab->Wb', p, q)", "jax._src.basearray.Array"),
        ("contract_expression('Wa,ab->Wb', (2, 3), (3, 4))(p, q)", "jax._src.basearray.Array"),
        ("jax.jit(lambda u, v: contract('Wa,ab->Wb', u, v))(p, q)", None),  # jit's own typing
        # numpy mixed with another library runs on that one: an array with shape and dtype
        ("contract('Wa,ab->Wb', np.ones((2, 3)), q)", "contractions.api._Array"),
    ]),
    ("torch", ["import torch", "p = torch.ones((2, 3))", "q = torch.ones((3, 4))"], [
        ("contract('Wa,ab->Wb', p, q)", "torch._tensor.Tensor"),
        ("contract_expression('Wa,ab->Wb', (2, 3), (3, 4))(p, q)", "torch._tensor.Tensor"),
    ]),
    # dask's creation functions are untyped (they return Any), so the operands are annotated.
    ("dask", ["import dask.array as da", "p: da.Array = da.ones((2, 3))", "q: da.Array = da.ones((3, 4))"], [
        ("contract('Wa,ab->Wb', p, q)", "dask.array.core.Array"),
        ("contract_expression('Wa,ab->Wb', (2, 3), (3, 4))(p, q)", "dask.array.core.Array"),
    ]),
]


def _installed_from_this_checkout() -> bool:
    from importlib import metadata

    try:
        direct_url = metadata.distribution("grouped-einsum").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return False
    url = json.loads(direct_url or "{}").get("url", "")
    return url.startswith("file://") and Path(url[len("file://"):]).resolve() == ROOT


def _downstream() -> tuple[str, dict[int, str | None], list[str]]:
    """The module's source, {line: expected revealed type}, and the libraries left out."""
    lines = ["from contractions import contract, contract_expression, explain", ""]
    expected: dict[int, str | None] = {}
    absent = []
    for k, (case, setup, reveals) in enumerate(CASES):
        library = case.split(",")[0]
        if importlib.util.find_spec(library) is None:
            absent.append(library)
            continue
        lines.append(f"def check_{k}_{library}() -> None:  # {case}")
        lines.extend(f"    {line}" for line in setup)
        for expression, revealed in reveals:
            lines.append(f"    reveal_type({expression})")
            expected[len(lines)] = revealed
        lines.append("")
    return "\n".join(lines) + "\n", expected, absent


@pytest.mark.slow  # mypy reads numpy's, JAX's and torch's annotations: about a minute on 2 cores
def test_downstream_code_sees_the_operands_array_type(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (.ci/run installs it and runs this test)")
    source, expected, absent = _downstream()
    (tmp_path / "downstream.py").write_text(source, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    through = "the installed distribution"
    if not _installed_from_this_checkout():
        env["MYPYPATH"] = str(ROOT)
        through = "MYPYPATH"
    # --follow-imports=silent: contractions' own imports of untyped libraries (opt_einsum) are
    # its business, as they are when mypy reads it from site-packages.
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "cache"), "downstream.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    revealed = {int(m[1]): m[2] for m in re.finditer(
        r'^downstream\.py:(\d+): note: Revealed type is "(.*)"$', output, re.MULTILINE)}
    errors = [line for line in output.splitlines() if ": error:" in line]
    assert not errors, f"mypy (finding contractions through {through}) reported:\n{output}"
    assert set(revealed) == set(expected), output
    for line, want in expected.items():
        if want is not None:
            assert revealed[line] == want, f"downstream.py:{line}: {revealed[line]} != {want}\n{source}"
    if absent:
        checked = sorted({c[0].split(",")[0] for c in CASES} - set(absent))
        pytest.skip(f"checked {checked}; not installed: {absent}")


def test_editable_install_is_a_plain_path_that_static_tools_follow(tmp_path: Path) -> None:
    """`pip install -e .` must leave a .pth line naming this directory, not an import hook."""
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(f"setuptools {setuptools.__version__} here; the build backend needs >= 77")
    code = "import sys; from setuptools import build_meta; print(build_meta.build_editable(sys.argv[1]))"
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    wheel = tmp_path / result.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        pth = [n for n in archive.namelist() if n.endswith(".pth")]
        assert len(pth) == 1, archive.namelist()
        lines = archive.read(pth[0]).decode().split()
        assert not [n for n in archive.namelist() if n.endswith("_finder.py")], archive.namelist()
    assert [Path(line).resolve() for line in lines] == [ROOT]
    assert (ROOT / "contractions" / "py.typed").is_file()
