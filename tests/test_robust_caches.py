"""Caches are bounded by bytes as well as entries: large distinct strings do not pile up."""

from __future__ import annotations

import gc
import threading
import tracemalloc

import numpy as np
import pytest

from contractions import ContractionError, contract, identifiability, parse
from contractions import parser as _parser
from contractions import solver as _solver
from contractions.caching import ENTRY_FRACTION, byte_bounded_cache, weight
from contractions.calls import runners

MB = 2**20


def _feed(count: int, size: int, start: int = 0) -> None:
    x = np.ones((2, 3))
    for k in range(start, start + count):
        s = f"Wa,{' ' * (size + k)}Wa->W"  # distinct and valid: whitespace is insignificant
        parse(s)
        identifiability(s)
        with pytest.raises(ContractionError):
            contract(s, x)  # parsed, then refused (two terms, one operand): nothing to keep


@pytest.mark.parametrize("count, size", [(300, MB)])
def test_large_distinct_strings_keep_memory_flat(count, size):
    gc.collect()
    tracemalloc.start()
    try:
        _feed(20, size)
        settled = tracemalloc.get_traced_memory()[0]
        _feed(count, size, start=20)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - settled
    finally:
        tracemalloc.stop()
    # unbounded by bytes, 300 strings of 1 MB (each kept with its parse) hold over 300 MB
    budget = _parser.PARSE_CACHE_BYTES + 2 * _solver.SOLVE_CACHE_BYTES
    print(f"held {held / MB:.0f} MB after {count} strings of {size / MB:.0f} MB")
    assert held < budget, f"{held / MB:.0f} MB still held"
    info = _parser._parse.cache_info()
    assert info.currbytes <= info.maxbytes == _parser.PARSE_CACHE_BYTES


@pytest.mark.slow
def test_three_thousand_megabyte_strings_keep_memory_flat():
    test_large_distinct_strings_keep_memory_flat(3000, MB)


def test_byte_bounded_cache_evicts_by_bytes_and_entries_and_skips_heavy_entries():
    calls = []

    @byte_bounded_cache(maxsize=3, maxbytes=80_000)
    def upper(text):
        calls.append(text)
        return text.upper()

    small = [c * 1000 for c in "abcd"]
    for s in small:
        upper(s)
    info = upper.cache_info()
    assert info.currsize == 3 and info.misses == 4               # the entry bound
    assert upper(small[3]) == small[3].upper() and upper.cache_info().hits == 1
    for s in (c * 9000 for c in "efg"):                           # ~18 KB per entry
        upper(s)
    info = upper.cache_info()
    assert info.currbytes <= 80_000 and info.currsize <= 3       # the byte bound
    heavy = "h" * (80_000 // ENTRY_FRACTION)
    upper(heavy)
    upper(heavy)
    assert calls.count(heavy) == 2                               # never stored
    upper.cache_clear()
    assert upper.cache_info()[:4] == (0, 0, 3, 0)


def test_byte_bounded_cache_does_not_cache_exceptions_and_refuses_unhashable_keys():
    calls = []

    @byte_bounded_cache(maxsize=8, maxbytes=10**6)
    def fail(x):
        calls.append(x)
        raise ValueError(x)

    for _ in range(2):
        with pytest.raises(ValueError):
            fail(1)
    assert calls == [1, 1]
    with pytest.raises(TypeError, match="unhashable"):
        fail([1])


def test_byte_bounded_cache_is_safe_under_threads():
    @byte_bounded_cache(maxsize=50, maxbytes=10**5)
    def square(n):
        return n * n

    errors = []

    def work(offset):
        try:
            for n in range(2000):
                assert square((n + offset) % 120) == ((n + offset) % 120) ** 2
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    info = square.cache_info()
    assert not errors and info.currsize <= 50 and info.hits + info.misses == 8000


def test_weight_counts_nested_strings():
    assert weight(("x" * 5000, ("y" * 5000,))) > 10_000
    assert weight(parse("Wab, Wbc -> Wac")) > weight("Wab, Wbc -> Wac")


def test_successful_calls_with_long_distinct_strings_keep_memory_flat(monkeypatch):
    """Calls that succeed are cached at every stage (parse, solve, plan, expansion, schedule,
    compiled program, the hot dict): each stage's byte bound, not its entry count, decides how
    many long strings stay alive.  The bounds are lowered to 4 MB here so the test is quick."""
    from contractions import expand as _expand
    from contractions import plan as _plan

    caches = [runners._SCHEDULES, runners._COMPILED, _plan.make_plan, _expand.expand, _parser._parse,
              *(getattr(_solver, name) for name in dir(_solver)
                if isinstance(getattr(_solver, name), type(_parser._parse)))]
    for cache in caches:
        cache.cache_clear()
        monkeypatch.setattr(cache, "maxbytes", 4 * MB)
    x = np.ones((2, 3))
    size = 100_000

    def feed(start: int, count: int) -> None:
        for k in range(start, start + count):
            s = f"Wa,{' ' * (size + k)}Wa->W"
            assert contract(s, x, x).shape == (2,)

    gc.collect()
    tracemalloc.start()
    try:
        feed(0, 10)
        settled = tracemalloc.get_traced_memory()[0]
        feed(10, 300)  # 30 MB of distinct keys, all kept by caches bounded by count alone
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - settled
    finally:
        tracemalloc.stop()
    assert held < 15 * MB, f"{held / MB:.0f} MB still held"
    assert all(len(key[0]) <= runners.HOT_KEY_MAX_CHARS for key in runners.HOT)
    for cache in caches:
        info = cache.cache_info()
        assert info.currbytes <= info.maxbytes
