"""Stage 1: the parser accepts exactly the dialect and points at what is wrong."""

import ast
import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import ContractionError, SubscriptsSyntaxError, parse
from contractions.errors import CARET_WINDOW, caret_line


def test_terms_groups_and_whitespace():
    p = parse(" WCa , Caib,WCi -> W C b ")
    assert p.inputs == ("WCa", "Caib", "WCi")
    assert p.output == "WCb"
    assert p.groups == ("W", "C")
    assert p.lowercase_count(1) == 3


def test_groups_in_first_appearance_order_including_output_only_order():
    assert parse("Vo,VWo->WVo").groups == ("V", "W")


def test_empty_output_and_diagonal_are_valid():
    p = parse("Wii->")
    assert p.output == "" and p.inputs == ("Wii",)
    assert p.lowercase_count(0) == 2


def test_parse_is_cached_and_frozen():
    assert parse("Wa->W") is parse("Wa->W")
    with pytest.raises(AttributeError):
        parse("Wa->W").output = "a"  # type: ignore[misc]


def echo_and_carets(message: str) -> tuple[str, str]:
    """The echoed subscripts line and the caret line under it (lines 2 and 3)."""
    lines = message.splitlines()
    return lines[1], lines[2]


def caret_columns(message: str) -> list[int]:
    """Columns (0-based, into the subscripts) of the carets under the echoed string, for
    strings echoed whole and without escapes."""
    echo, carets = echo_and_carets(message)
    assert echo.startswith("    '")
    return [i - 5 for i, ch in enumerate(carets) if ch == "^"]


def text_above_carets(message: str) -> str:
    """What the echo line shows above the carets, by terminal column (a wide East Asian
    character takes two columns)."""
    echo, carets = echo_and_carets(message)
    owner: list[int] = []  # terminal column -> index into echo
    for i, ch in enumerate(echo):
        owner.extend([i] * (2 if unicodedata.east_asian_width(ch) in "WF" else 1))
    marked = sorted({owner[c] for c, mark in enumerate(carets) if mark == "^"})
    return "".join(echo[i] for i in marked)


@pytest.mark.parametrize(
    "subscripts, columns, words",
    [
        ("Wa....->W", [2, 3, 4, 5], "a run of 4 dots is not an ellipsis"),
        ("W...a...->W", [1, 2, 3, 5, 6, 7], "'...' appears twice in input term 0"),
        ("Wa->Wa->a", [6, 7], "more than one '->'"),
        ("W...a->W......", [8, 9, 10, 11, 12, 13], "a run of 6 dots"),
        ("...a->......", [6, 7, 8, 9, 10, 11], "a run of 6 dots"),
        ("...a->...a...", [6, 7, 8, 10, 11, 12], "'...' appears twice in the output"),
        ("WaW->W", [0, 2], "group 'W' appears twice"),
        ("Wa->aa", [4, 5], "'a' appears twice in the output"),
        ("Wa->b", [4], "does not appear in any input"),
        ("Wa-b", [2], "'-' must be followed by '>'"),
        ("Wa>W", [2], "'>' must follow '-'"),
        ("W1->W", [1], "character '1' is not allowed"),
        ("Wa->W,a", [5], "',' in the output term"),
        ("W€->W", [1], "not allowed"),
        ("W.a->W", [1], "'.' is not an ellipsis"),
    ],
)
def test_syntax_errors_quote_the_string_and_put_a_caret_under_the_culprit(subscripts, columns, words):
    with pytest.raises(SubscriptsSyntaxError) as info:
        parse(subscripts)
    message = str(info.value)
    assert repr(subscripts) in message
    assert words.lower() in message.lower()
    assert caret_columns(message) == columns


def test_syntax_error_is_a_value_error():
    with pytest.raises(ValueError):
        parse("W..->W")


def test_non_string_subscripts_is_a_type_error():
    with pytest.raises(TypeError, match="must be a str"):
        parse(["Wa->W"])  # type: ignore[arg-type]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("WCKabij,->. 1_é")), max_size=14) | st.text(max_size=10))
def test_random_text_raises_nothing_but_contraction_error(text):
    try:
        p = parse(text)
    except ContractionError:
        return
    # Whatever parses is well formed.
    assert "->" in text or p.implicit
    assert len(set(p.output)) == len(p.output)
    assert all(term.count(".") <= 1 for term in p.terms)


# ---- carets under escaped characters ------------------------------------------------------
@pytest.mark.parametrize(
    "subscripts, shown",
    [
        ("W\ta1->W", "1"),            # a tab is whitespace (allowed) but repr spells it '\t'
        ("W\n\ra\t\t1->W", "1"),
        ("Wa\n->W\t1", "1"),
        ("W\x00a->W", "\\x00"),       # the culprit itself is escaped: four carets
        ("W€\t->W", "€"),              # printable non-ASCII: shown as itself
        ("W\u00a0a?->W", "?"),          # a no-break space is whitespace, spelt '\xa0'
        ("W'a->W", "'"),               # repr switches to double quotes
        ("W'\"a->W", "\\'"),           # both quotes: repr escapes the single one
        ("Wa\\->W", "\\\\"),           # a backslash is spelt as two
        ("W\u3002a->W", "\u3002"),     # a wide character: two columns, two carets
        ("We\u0301->W", "\\u0301"),    # a combining accent is spelt as its escape
    ],
)
def test_the_caret_stays_under_the_culprit_when_characters_are_escaped(subscripts, shown):
    with pytest.raises(SubscriptsSyntaxError) as info:
        parse(subscripts)
    assert text_above_carets(str(info.value)) == shown


@pytest.mark.parametrize("subscripts", ["W\ta1->W", "W'a->W", "W'\"a->W", "Wa\\->W", "W\x00a->W"])
def test_a_short_string_is_echoed_exactly_as_repr_writes_it(subscripts):
    with pytest.raises(SubscriptsSyntaxError) as info:
        parse(subscripts)
    message = str(info.value)
    assert message.startswith(f"invalid subscripts {subscripts!r}: ")
    assert echo_and_carets(message)[0] == "    " + repr(subscripts)


def test_a_string_without_an_arrow_takes_numpys_implicit_output():
    p = parse("W\ta,\tb")
    assert p.implicit and p.output == "Wab"


# ---- long strings -------------------------------------------------------------------------
LONG = 100_000


@pytest.mark.parametrize(
    "subscripts, shown",
    [
        ("->" * (LONG // 2), "->"),                               # the second arrow
        ("Wa," * (LONG // 3) + "W1->W", "1"),                      # near the end
        ("Wa," * (LONG // 3) + "W....b->W", "...."),               # four dots
        ("a" * (LONG // 2) + "->" + "a" * (LONG // 2), "a"),       # a repeated output letter
        ("W" + "\t" * LONG + "W->W", "W"),                        # a group twice, far apart
        ("." * LONG + "->", "." * CARET_WINDOW),                   # carets only where shown
    ],
)
def test_a_long_string_is_quoted_by_a_window_around_the_culprit(subscripts, shown):
    with pytest.raises(SubscriptsSyntaxError) as info:
        parse(subscripts)
    message = str(info.value)
    assert len(message) < 1000, len(message)
    assert f"({len(subscripts)} characters)" in message.splitlines()[0]
    echo, _ = echo_and_carets(message)
    cut = re.fullmatch(r"    (\.\.\.)?('.*')(\.\.\.)?", echo)
    assert cut is not None and (cut.group(1) or cut.group(3)), echo
    excerpt = ast.literal_eval(cut.group(2))            # repr's spelling, read back
    assert 0 < len(excerpt) <= CARET_WINDOW and excerpt in subscripts
    assert text_above_carets(message).startswith(shown)


def test_caret_line_marks_only_what_it_shows():
    text = "x" * 1000
    line = caret_line(text, range(10, 5000))    # past the end means the end
    echo, carets = line.splitlines()
    assert echo == "    '" + "x" * CARET_WINDOW + "'..."
    assert carets == " " * (5 + 10) + "^" * (CARET_WINDOW - 10)   # from 10 to the window's end


def test_a_hundred_thousand_characters_parse_in_one_pass():
    """The sizes the linear parser is built for (bench/solver_speed.py times them)."""
    many = parse("Wa," * 33_000 + "Wa->Wa")
    assert len(many.inputs) == 33_001 and many.groups == ("W",) and many.output == "Wa"
    spaced = parse("W a , " * 16_000 + "K->WK")
    assert spaced.inputs[-1] == "K" and spaced.groups == ("W", "K")
