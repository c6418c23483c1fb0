"""Stage 1: the parser accepts exactly the dialect and points at what is wrong."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contractions import ContractionError, SubscriptsSyntaxError, parse


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


def caret_columns(message: str) -> list[int]:
    """Columns (0-based, into the subscripts) of the carets under the echoed string."""
    lines = message.splitlines()
    echo = next(i for i, line in enumerate(lines) if line.startswith("    '"))
    carets = lines[echo + 1]
    return [i - 5 for i, ch in enumerate(carets) if ch == "^"]


@pytest.mark.parametrize(
    "subscripts, columns, words",
    [
        ("Wa...->W", [2, 3, 4], "uppercase group replaces '...'"),
        ("WCa,Ca", [6], "write the output explicitly"),
        ("Wa->Wa->a", [6, 7], "more than one '->'"),
        ("Wa,,b->", [2, 3], "input term 1 is empty"),
        ("WaW->W", [0, 2], "group 'W' appears twice"),
        ("Wa->aa", [4, 5], "'a' appears twice in the output"),
        ("Wa->b", [4], "does not appear in any input"),
        ("Wa-b", [2], "'-' must be followed by '>'"),
        ("Wa>W", [2], "'>' must follow '-'"),
        ("W1->W", [1], "character '1' is not allowed"),
        ("Wa->W,a", [5], "',' in the output term"),
        ("Wé->W", [1], "not allowed"),
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
        parse("W...->W")


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
    assert "->" in text
    assert all(term for term in p.inputs)
    assert len(set(p.output)) == len(p.output)
