"""Hostile inputs that once crashed with a raw error, hung or were silently accepted: each with
the documented error it must raise and words its message must contain (tests/test_robust_*.py,
tests/test_fuzz.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from contractions import (
    ContractionError,
    OperandCountError,
    OptionError,
    SupplementError,
    contract,
    contract_expression,
    expand_subscripts,
    expansion,
    explain,
    identifiability,
    solve_lengths,
)

X = np.ones((2, 3))


def _contract(**kwargs: Any) -> Callable[[], Any]:
    return lambda: contract("Wa->W", X, **kwargs)


#: name -> (call, exception type, a regular expression its message must match)
CORPUS: dict[str, tuple[Callable[[], Any], type[BaseException], str]] = {
    "expand past the nameable axes": (lambda: expand_subscripts("W->W", 1200000), OptionError,
                                      r"'W->W' would expand to 1,200,000 distinct axes.*check the ndims"),
    "explain past the nameable axes": (lambda: explain("W->W", 1200000), OptionError,
                                       r"explain: 'W->W' .*1,200,000"),
    "infinite memory_limit": (_contract(memory_limit=float("inf")), OptionError,
                              r"memory_limit=inf is not a finite.*None for no limit"),
    "nan memory_limit": (_contract(memory_limit=float("nan")), OptionError, r"memory_limit=nan"),
    "fractional memory_limit": (_contract(memory_limit=2.5), OptionError,
                                r"memory_limit=2.5 is not a whole number"),
    "exponent size": (_contract(memory_limit="1e400GB"), OptionError,
                      r"memory_limit='1e400GB': write a number of elements"),
    "huge size": (_contract(memory_limit="9" * 400 + "GB"), OptionError, r"too large to be a size"),
    "unknown size unit": (_contract(memory_limit="12 parsecs"), OptionError, r"memory_limit='12 parsecs'"),
    "zero memory_limit": (_contract(memory_limit=0), OptionError, r"at least one element"),
    "list memory_limit": (_contract(memory_limit=[1]), TypeError, r"memory_limit must be a number"),
    "supplied an int": (lambda: identifiability("WCo,WCa->Cao", supplied=[5]), TypeError,
                        r"supplied= holds 5 \(int\)"),
    "supplied None": (lambda: identifiability("WCo,WCa->Cao", supplied=None), TypeError,
                      r"supplied= must be a collection of group names.*not NoneType"),
    "supplied a bare string": (lambda: identifiability("WCo,WCa->Cao", "len_W"), TypeError,
                               r"not str; write supplied=\['len_W'\]"),
    "ndim a string": (lambda: solve_lengths("Wa->a", ["3"]), TypeError, r"ndim 0 must be an int, got str"),
    "ndim a bool": (lambda: solve_lengths("Wa,Wb->a", [2, True]), TypeError, r"ndim 1 is a bool"),
    "ndim negative": (lambda: solve_lengths("Wa->a", [-1]), ContractionError, r"ndim 0 is -1"),
    "ndims not a sequence": (lambda: solve_lengths("Wa->a", 3), TypeError, r"ndims must be a sequence"),
    "subscripts a list": (lambda: expand_subscripts(["Wa->a"], (2, 3)), TypeError,
                          r"subscripts must be a str, got list"),
    "explain subscripts a list": (lambda: explain(["Wa->a"], (2, 3)), TypeError,
                                  r"subscripts must be a str, got list"),
    "datetime64 operand": (lambda: contract("Wa->W", np.zeros((2, 3), "M8[s]")), TypeError,
                           r"operand 0 has dtype datetime64\[s\] \(datetime64\)"),
    "timedelta64 operand": (lambda: contract("Wa,Wa->W", X, np.zeros((2, 3), "m8[s]"), optimize="greedy"),
                            TypeError, r"operand 1 has dtype timedelta64\[s\]"),
    "structured operand": (lambda: contract("Wa->W", np.zeros((2, 3), "i4,f4")), TypeError,
                           r"operand 0 has dtype .*\(structured\)"),
    "string operand": (lambda: contract("Wa->W", np.array([["a", "b"]])), TypeError,
                       r"operand 0 has dtype <U1 \(str\)"),
    "string list operand": (lambda: contract("Wa->W", [["a", "b"]]), TypeError, r"\(str\)"),
    "negative expansion length": (lambda: expansion("Wa->Wa", {"W": -1}), SupplementError,
                                  r"group W has length -1"),
    "fractional expansion length": (lambda: expansion("Wa->Wa", {"W": 2.7}), TypeError,
                                    r"length of group W must be an int.*float \(2.7\)"),
    "string expansion length": (lambda: expansion("Wa->Wa", {"W": "2"}), TypeError,
                                r"length of group W must be an int.*str \('2'\)"),
    "missing expansion length": (lambda: expansion("WCa->Wa", {"W": 1}), SupplementError,
                                 r"no length given for group\(s\) C"),
    "fractional path position": (lambda: contract("Wa,Wa->W", X, X, optimize=[(0.5, 1)]), TypeError,
                                 r"optimize= path entries must be tuples of ints .*\(0.5, 1\) holds 0.5"),
    "path for one operand": (lambda: contract("Wa->W", X, optimize=[(5,)]), ContractionError,
                             r"optimize= path \[\(5,\)\] is invalid at entry 0"),
    "path for one operand, expression": (lambda: contract_expression("Wa->W", (2, 3), optimize=[(1,)]),
                                         ContractionError, r"invalid at entry 0"),
    "path with a miscount": (lambda: contract("Wa,Wa->W", X, optimize=[(0, 1)]), OperandCountError,
                             r"'Wa,Wa->W' has 2 input terms but 1 operand was given"),
    "unknown optimize name": (_contract(optimize="nope"), OptionError,
                              r"optimize='nope' names no path optimizer"),
    "unknown backend name": (lambda: explain("Wa->W", (2, 3), backend="nope"), OptionError,
                             r"backend='nope': no backend named 'nope'"),
    "long string miscounted": (lambda: contract("Wa," * 100000 + "Wa->W", X), OperandCountError,
                               r"^'Wa,Wa,.*'\.\.\. \(300005 characters\) has 100001 input terms"),
}
