"""Fuzzing the public verbs: whatever the arguments, only documented exceptions, promptly.

Documented: the `ContractionError` hierarchy and `TypeError` (keyword and type misuse).
Strings are drawn from the dialect's alphabet plus hostile characters (dots, digits, unicode,
whitespace, stray arrows); arguments from well-formed and malformed values of every keyword.
A small budget runs in the quick suite, a large one under ``-m slow``.  The inputs that once
escaped with raw errors are kept in ``tests/_hostile.py`` and replayed here too.
"""

from __future__ import annotations

import signal
import time
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contractions import (
    ContractionError,
    contract,
    contract_expression,
    expand_subscripts,
    explain,
    identifiability,
    solve_lengths,
)

from ._hostile import CORPUS

#: A call taking longer than this is a hang, not a slow call (the fuzzed inputs are tiny).
HANG_SECONDS = 20.0

QUICK = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
LARGE = settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))

_DIALECT = "WCKXabcij,-> "
_HOSTILE = _DIALECT + ".\t\n0é…ẞ_'\"\\"

# A string either built from terms (mostly valid) or drawn character by character (mostly not).
_term = st.text(alphabet="WCKXabcij", min_size=0, max_size=5)
_built = st.builds(lambda ins, out, sep: sep.join(ins) + "->" + out,
                   st.lists(_term, min_size=1, max_size=4), _term, st.sampled_from([",", " , ", ",,"]))
subscripts = st.one_of(_built, st.text(alphabet=_HOSTILE, max_size=24), st.sampled_from(
    ["", "->", "W->W", "...->", "Wa->", "a" * 60 + "->a", "WW->W", "W->WW", "Wa,Wa->W"]))

_extent = st.integers(0, 3)
shapes = st.lists(_extent, min_size=0, max_size=4).map(tuple)
operands = st.one_of(
    shapes.map(lambda s: np.ones(s)),
    shapes.map(lambda s: np.ones(s, dtype=np.int8)),
    st.sampled_from([None, "ab", 3, 2.5, [[1, 2], [3]], [[1.0, 2.0]], np.zeros(2, "M8[s]"),
                     np.array(["x"]), (1, 2), {"a": 1}]),
)
_values = st.one_of(st.integers(-2, 4), st.sampled_from([2.7, "2", None, True, np.int64(1), 10**30]))
lengths = st.dictionaries(st.sampled_from(["len_W", "len_C", "len_K", "len_Q", "len_w", "lenW", "x"]),
                          _values, max_size=3)
optimize = st.sampled_from(["auto", "greedy", "optimal", False, True, "nope", 3, None, [(0, 1)],
                            [(0.5, 1)], [(5,)], [(0,)], [(1, 0), (0, 1)], ["einsum_path", (0, 1)],
                            [("a", 1)], [()]])
memory_limit = st.sampled_from([None, "default", "max_input", "1MB", "64 kib", 0, -1, 1, 10**6,
                                float("inf"), float("nan"), "1e400GB", "x", 2.5, 1e6, True, [1]])
backend = st.sampled_from([None, "numpy", "nope", 3])
ndims = st.lists(st.one_of(st.integers(-1, 6), st.sampled_from(["3", 2.0, True, None])), max_size=4)


class _Hang(BaseException):
    """Raised by the alarm inside a call that overran; a BaseException so no handler eats it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Hang


def _only_documented(call, *args: Any, **kwargs: Any) -> None:
    # A real hang never returns, so timing the call afterwards would never report it: an
    # interval timer interrupts the call and the failure names the inputs.
    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(*args, **kwargs)
    except (ContractionError, TypeError):
        pass
    except _Hang:
        pytest.fail(f"{call.__name__}(*{args!r}, **{kwargs!r}) still running after {HANG_SECONDS:.0f} s")
    except Exception as exc:  # anything else escaped the boundary checks
        pytest.fail(f"{call.__name__}(*{args!r}, **{kwargs!r}) raised {type(exc).__name__}: {exc}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    elapsed = time.perf_counter() - start
    assert elapsed < HANG_SECONDS, f"{call.__name__}(*{args!r}, **{kwargs!r}) took {elapsed:.1f} s"


def _contract(s, ops, lens, opt, limit, extra):
    _only_documented(contract, s, *ops, optimize=opt, memory_limit=limit, **extra, **lens)


def _explain(s, items, lens, opt, limit, name):
    _only_documented(explain, s, *items, optimize=opt, memory_limit=limit, backend=name, **lens)


def _expression(s, items, lens, opt, limit):
    _only_documented(contract_expression, s, *items, optimize=opt, memory_limit=limit, **lens)


def _strings(s, supplied, nds, lens):
    _only_documented(identifiability, s, supplied)
    _only_documented(solve_lengths, s, nds, **lens)
    _only_documented(expand_subscripts, s, *nds, **lens)


extras = st.dictionaries(st.sampled_from(["dtype", "preferred_element_type", "out", "precision", "order"]),
                         st.sampled_from([None, "float32", "nope", np.int8, 3, np.ones(1), np.ones(()),
                                          "highest", [1]]), max_size=2)
_CONTRACT = st.tuples(subscripts, st.lists(operands, max_size=3), lengths, optimize, memory_limit,
                      extras)
_EXPLAIN = st.tuples(subscripts, st.one_of(st.lists(shapes, max_size=3), ndims), lengths, optimize,
            memory_limit, backend)
_EXPRESSION = st.tuples(subscripts, st.lists(shapes, max_size=3), lengths, optimize, memory_limit)
_STRINGS = st.tuples(subscripts, st.one_of(st.lists(st.sampled_from(["W", "len_C", "Q", "", 5]), max_size=3),
                                  st.sampled_from([None, "len_W", 5, ("W",)])), ndims, lengths)


@QUICK
@given(_CONTRACT)
def test_contract_raises_only_documented_errors(args):
    _contract(*args)


@QUICK
@given(_EXPLAIN)
def test_explain_raises_only_documented_errors(args):
    _explain(*args)


@QUICK
@given(_EXPRESSION)
def test_contract_expression_raises_only_documented_errors(args):
    _expression(*args)


@QUICK
@given(_STRINGS)
def test_string_level_verbs_raise_only_documented_errors(args):
    _strings(*args)


@pytest.mark.slow
@LARGE
@given(_CONTRACT)
def test_contract_fuzzed_at_length(args):
    _contract(*args)


@pytest.mark.slow
@LARGE
@given(_EXPLAIN)
def test_explain_fuzzed_at_length(args):
    _explain(*args)


@pytest.mark.slow
@LARGE
@given(_EXPRESSION)
def test_contract_expression_fuzzed_at_length(args):
    _expression(*args)


@pytest.mark.slow
@LARGE
@given(_STRINGS)
def test_string_level_verbs_fuzzed_at_length(args):
    _strings(*args)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_the_hostile_corpus_raises_only_documented_errors(name):
    call, _, _ = CORPUS[name]
    _only_documented(call)
