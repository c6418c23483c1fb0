"""Hostile arguments fail with documented errors that name the argument and the fix."""

import subprocess
import sys

import numpy as np
import pytest

from contractions import ContractionError, OptionError, contract, explain

from ._hostile import CORPUS


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_hostile_argument_raises_its_documented_error(name):
    call, kind, pattern = CORPUS[name]
    with pytest.raises(kind, match=pattern) as info:
        call()
    assert isinstance(info.value, (ContractionError, TypeError))


def test_option_error_is_a_contraction_error_and_a_value_error():
    assert issubclass(OptionError, ContractionError) and issubclass(OptionError, ValueError)


def test_a_warm_call_with_a_string_array_of_a_cached_shape_still_names_the_dtype():
    contract("Wa->W", np.ones((2, 5)))                  # caches the callable for this shape
    with pytest.raises(TypeError, match=r"operand 0 has dtype <U1 \(str\)"):
        contract("Wa->W", np.full((2, 5), "a"))


def test_whole_floats_are_still_a_memory_limit():
    x = np.ones((3, 4))
    assert np.allclose(contract("Wa->W", x, memory_limit=1e6), x.sum(1))


def test_explain_refuses_unknown_dask_chunks_like_contract():
    da = pytest.importorskip("dask.array")
    x = da.ones((4, 3), chunks=2)
    x = x[x.sum(axis=1) > 0]                           # chunk sizes now unknown (nan)
    with pytest.raises(ContractionError, match=r"unknown shape.*compute_chunk_sizes") as explained:
        explain("Wa->W", x)
    with pytest.raises(ContractionError, match=r"unknown shape.*compute_chunk_sizes"):
        contract("Wa->W", x)
    assert "operand 0" in str(explained.value)


def test_cli_explain_of_an_ndim_past_the_nameable_axes_is_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "contractions", "explain", "W->W", "#1200000"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "1,200,000 distinct axes" in done.stderr
