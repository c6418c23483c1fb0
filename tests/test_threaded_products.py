"""The numpy model's threaded products: a product of at least 2 * `threaded_product_macs`
multiply-adds runs faster on more than one thread, and the model prices it that much faster
(OpenBLAS splits products from 2 * 2**18, but the split pays only from about 2**21).

Expected values are computed by hand from the model's constants, not read back from it.
"""

from __future__ import annotations

import pytest

from contractions.model.host import blas_threads
from contractions.model.numpy_prices import NumpyCostModel, thread_speedup
from contractions.model.profile import Profile

# the reference profile's prices, whatever the machine running the tests measured
REFERENCE = Profile()
NS_PER_MAC, NS_PER_MATMUL_CALL = REFERENCE.ns_per_mac, REFERENCE.ns_per_matmul_call
NS_PER_MATRIX_ELEMENT, THREADED_PRODUCT_MACS = REFERENCE.ns_per_matrix_element, REFERENCE.threaded_product_macs
MODEL = NumpyCostModel(REFERENCE)


def _single_threaded(m: int, k: int, n: int) -> float:
    return NS_PER_MATMUL_CALL + NS_PER_MAC * m * k * n + NS_PER_MATRIX_ELEMENT * (m * k + k * n + m * n)


@pytest.mark.parametrize("macs,threads,expected", [
    (THREADED_PRODUCT_MACS, 2, 1.0),            # one thread's worth: not split
    (2 * THREADED_PRODUCT_MACS - 1, 2, 1.0),    # OpenBLAS divides, rounding down
    (2 * THREADED_PRODUCT_MACS, 2, 1.5),
    (100 * THREADED_PRODUCT_MACS, 2, 1.5),      # capped at the thread count
    (100 * THREADED_PRODUCT_MACS, 1, 1.0),
    (3 * THREADED_PRODUCT_MACS, 8, 2.0),        # three threads: two past the first
])
def test_thread_speedup_follows_openblas_split(macs, threads, expected):
    assert thread_speedup(macs, threads) == expected


def test_a_small_product_is_priced_single_threaded():
    model = MODEL.with_prices(blas_threads=4)
    assert model.matmul_ns(3, 64, 64, 64) == pytest.approx(3 * _single_threaded(64, 64, 64))
    # OpenBLAS splits this one (2**20 multiply-adds), but the split does not pay (decision 57)
    assert model.matmul_ns(3, 128, 64, 128) == pytest.approx(3 * _single_threaded(128, 64, 128))


def test_a_large_product_is_priced_on_the_threads_it_gets():
    m, k, n = 128, 128, 128   # 2**21 multiply-adds: two threads' worth
    assert m * k * n == 2 * THREADED_PRODUCT_MACS
    two = MODEL.with_prices(blas_threads=2)
    one = MODEL.with_prices(blas_threads=1)
    assert one.matmul_ns(5, m, k, n) == pytest.approx(5 * _single_threaded(m, k, n))
    assert two.matmul_ns(5, m, k, n) == pytest.approx(5 * _single_threaded(m, k, n) / 1.5)
    assert two.with_prices(thread_gain=0.0).matmul_ns(5, m, k, n) == one.matmul_ns(5, m, k, n)


@pytest.mark.parametrize("env,expected", [
    ({"OPENBLAS_NUM_THREADS": "3"}, 3),
    ({"OMP_NUM_THREADS": "5,2"}, 5),                              # OpenMP's nested list: the first
    ({"OPENBLAS_NUM_THREADS": "x", "OMP_NUM_THREADS": "2"}, 2),   # unreadable: the next one
    ({"OPENBLAS_NUM_THREADS": "0", "GOTO_NUM_THREADS": "6"}, 6),
])
def test_blas_threads_reads_openblas_environment(monkeypatch, env, expected):
    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert blas_threads() == expected


def test_blas_threads_without_environment_is_the_usable_cpus(monkeypatch):
    import os

    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert blas_threads() == expected >= 1
