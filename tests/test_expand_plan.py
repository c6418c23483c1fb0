"""Stages 3 and 4: expansion symbols and the validated plan."""

import re

import numpy as np
import pytest

from contractions import (
    ContractionError,
    SizeMismatchError,
    expand_subscripts,
    expansion,
    explain,
    make_plan,
)


def test_fresh_symbols_uppercase_first_letters_kept():
    e = expansion("WCa,Caib,WCi->WCb", {"W": 2, "C": 1})
    assert e.einsum == "ABCa,Caib,ABCi->ABCb"
    assert e.group_labels == (("W", (0, 1)), ("C", (2,)))
    assert dict(e.letter_labels) == {"a": 3, "i": 4, "b": 5}
    assert e.owner(1) == ("W", 1) and e.owner(4) == ("i", 0)


def test_empty_group_vanishes_and_output_order_follows_the_string():
    assert expansion("Vo,VWo->WVo", {"V": 0, "W": 2}).einsum == "o,ABo->ABo"
    assert expansion("Vo,VWo->WVo", {"V": 1, "W": 2}).einsum == "Ao,ABCo->BCAo"


def test_past_26_group_axes_use_unused_lowercase_then_unicode():
    e = expansion("Wa,Xa->WX", {"W": 30, "X": 30})
    assert e.n_axes == 61
    syms = e.symbols
    assert syms[:26] == tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    assert syms.count("a") == 1 and syms[30] == "a"  # the string's own letter, never reused
    assert all(len(s) == 1 for s in syms) and len(set(syms)) == 61
    assert any(ord(s) > 127 for s in syms)


def test_readable_rendering_names_axes_past_the_letters_by_label():
    e = expansion("Wa,Xa->WX", {"W": 30, "X": 30})   # 61 axes: 9 past the 52 letters
    assert any(not s.isascii() for s in e.symbols)     # the einsum needs non-letter symbols
    text = e.readable
    assert text.isascii() and text.isprintable()
    # Read it back independently: a letter, or [label].
    def tokens(term):
        return [int(t[1:-1]) if t.startswith("[") else t for t in re.findall(r"\[\d+\]|[A-Za-z]", term)]

    inputs, output = text.split("->")
    letters = list("ABCDEFGHIJKLMNOPQRSTUVWXYZ") + list("bcdefghijklmnopqrstuvwxyz")  # 'a' is the string's
    w_axes, x_axes = letters[:30], letters[30:] + [52 + k for k in range(9)]
    assert [tokens(t) for t in inputs.split(",")] == [w_axes + ["a"], x_axes + ["a"]]
    assert tokens(output) == w_axes + x_axes
    assert e.readable_symbol(52) == "[52]" and e.readable_symbol(0) == "A"


def test_readable_is_the_einsum_while_letters_suffice():
    for lengths in ({"W": 2, "C": 1}, {"W": 20, "C": 20}):
        e = expansion("WCa,Caib,WCi->WCb", lengths)
        assert e.readable == e.einsum


def test_fresh_symbols_never_fall_in_the_surrogate_range():
    # opt_einsum.get_symbol(k) is chr(k + 140) up to k = 55295, which hits U+D800-U+D88B for
    # k = 55156...55295; such a lone surrogate cannot even be encoded as UTF-8.
    e = expansion("Wa->W", {"W": 55400})
    assert not any(0xD800 <= ord(s) <= 0xDFFF for s in e.symbols)
    assert len(set(e.symbols)) == e.n_axes == 55401
    e.einsum.encode("utf-8")                      # raises on a lone surrogate
    assert e.readable.isascii()


def test_equal_calls_give_identical_cached_expansions():
    assert expansion("Wa->W", {"W": 3}) is expansion("Wa->W", {"W": 3})


def test_plan_extents_broadcast_and_group_shapes():
    p = make_plan("Wa,Wa->Wa", ((4, 1, 3), (1, 5, 3)), ())
    assert p.output_shape == (4, 5, 3)
    assert p.group_shapes == {"W": (4, 5)}


def test_plan_diagonal_extents_must_agree_within_an_operand():
    with pytest.raises(SizeMismatchError, match="letter 'i' is repeated in operand 0"):
        make_plan("Wii->W", ((2, 3, 4),), ())


def test_plan_zero_extent_does_not_broadcast_against_nonzero():
    with pytest.raises(SizeMismatchError, match="extent 3"):
        make_plan("Wa,Wa->W", ((3, 2), (0, 2)), ())
    assert make_plan("Wa,Wa->W", ((1, 2), (0, 2)), ()).output_shape == (0,)


# ---- explain / expand_subscripts: strict shape and ndim arguments --------------------------


@pytest.mark.parametrize("verb", [explain, expand_subscripts])
@pytest.mark.parametrize("args,error,message", [
    (((4, -2, 3), (2, 3, 5, 6), (4, 2, 5)), ContractionError, "negative extent"),
    (((4, 2.0, 3), (2, 3, 5, 6), (4, 2, 5)), TypeError, "non-integer extent"),
    (((4, 2, 3), 4, (4, 2, 5)), TypeError, "not a mix"),
    ((3, -1, 3), ContractionError, "ndims must be >= 0"),
    ((True, 4, 3), TypeError, "not bool"),
    (("4x2x3", (2, 3, 5, 6), (4, 2, 5)), TypeError, "must be a tuple of ints"),
])
def test_bad_shapes_and_ndims_are_refused(verb, args, error, message):
    with pytest.raises(error, match=message):
        verb("WCa,Caib,WCi->WCb", *args)


@pytest.mark.parametrize("verb", [explain, expand_subscripts])
def test_numpy_integers_are_ndims_like_python_ints(verb):
    as_python = verb("WCa,Caib,WCi->WCb", 4, 5, 4)
    assert verb("WCa,Caib,WCi->WCb", np.int64(4), np.int32(5), np.uint8(4)) == as_python
    shapes = (np.int64(4), np.int64(2), 3)
    assert verb("WCa,Caib,WCi->WCb", shapes, (2, 3, 5, 6), (4, 2, 5)) == \
        verb("WCa,Caib,WCi->WCb", (4, 2, 3), (2, 3, 5, 6), (4, 2, 5))
