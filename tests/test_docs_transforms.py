"""docs/transforms.md: every transform the page promises has a runnable example, and each
framework's section runs on its own (tests/test_docs.py runs the whole page top to bottom)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_docs import CodeBlock, python_blocks, run_block

PAGE = Path(__file__).resolve().parents[1] / "docs" / "transforms.md"


def section_blocks(heading: str) -> list[CodeBlock]:
    """Runnable python blocks between '## <heading>' and the next '## ' heading."""
    text = PAGE.read_text(encoding="utf-8").splitlines()
    start = text.index(f"## {heading}") + 1
    end = next((i for i in range(start, len(text)) if text[i].startswith("## ")), len(text))
    return [b for b in python_blocks(PAGE) if b.runnable and start < b.first_line <= end]


# Each promised use must appear in code that runs, not just in prose.
JAX_USES = [r"jax\.jit\(", r"\.lower\(", r"jax\.vmap\(", r"in_axes=\(-1, None", r"out_axes=",
            r"jax\.lax\.map\(.*batch_size", r"jax\.grad\(", r"jax\.jvp\(", r"jax\.jacrev\(",
            r"jax\.jacfwd\(", r"jax\.hessian\(", r"precision=", r"preferred_element_type=",
            r"bfloat16", r"complex64", r"NamedSharding\(", r"make_jaxpr\(", r"len_A=30"]
TORCH_USES = [r"\.backward\(\)", r"fwAD\.make_dual\(", r"jacrev\(", r"jacfwd\(", r"grad\(",
              r"torch\.vmap\(", r"in_dims=\(-1, None\)", r"out_dims=", r"chunk_size=",
              r"torch\.vmap\(torch\.vmap\(", r"preferred_element_type=", r"len_A=30"]


@pytest.mark.parametrize("heading,uses", [("JAX", JAX_USES), ("PyTorch", TORCH_USES)])
def test_every_promised_use_has_a_runnable_example(heading, uses):
    code = "\n".join(b.code for b in section_blocks(heading))
    missing = [u for u in uses if not re.search(u, code, re.DOTALL)]
    assert not missing, f"docs/transforms.md section {heading!r} has no runnable example of {missing}"


def test_multi_gpu_and_multi_host_instructions_are_present():
    text = PAGE.read_text(encoding="utf-8")
    for phrase in ("--cpu-devices 4", "jax.distributed.initialize()",
                   "make_array_from_process_local_data", "GPUs or TPUs",
                   "examples/sharded_data_parallel.py"):
        assert phrase in text, phrase


def test_torch_section_runs_without_the_jax_section():
    """Readers without JAX can run the PyTorch half on its own."""
    pytest.importorskip("torch")
    namespace: dict = {"__name__": "docs_transforms_torch"}
    blocks = section_blocks("PyTorch")
    assert len(blocks) >= 5
    for block in blocks:
        assert not re.search(r"^\s*(import|from)\s+jax", block.code, re.MULTILINE), block.label()
        run_block(block, namespace)
