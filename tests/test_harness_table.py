"""The identifiability table file format (the repo's own table included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contractions.testing.table import TableError, load_table, parse_table

TABLE = Path(__file__).with_name("identifiability_table.txt")


def test_entries_comments_and_lookup() -> None:
    table = parse_table(
        """
        # header comment
        WCa,Caib,WCi->WCb   -        # determined
        WCo,WCa->Cao        len_W
        WKa,KLb,LWc->abc    len_W, len_K   # rank deficit 2

        """,
        source="t.txt",
    )
    assert len(table) == 3
    assert table.supplement("WCa,Caib,WCi->WCb") == ()
    assert table.supplement(" WCo , WCa -> Cao ") == ("W",)  # whitespace is insignificant
    assert table.supplement("WKa,KLb,LWc->abc") == ("W", "K")
    assert table.supplement("Wa->Wa") is None
    entry = table.entry("WCo,WCa->Cao")
    assert entry is not None and (entry.line, entry.keywords) == (4, ("len_W",))
    assert entry.describe() == "len_W" and table.entry("WCa,Caib,WCi->WCb").describe() == "-"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("WCo,WCa->Cao\n", r"t\.txt:1: 'WCo,WCa->Cao' has no supplement column"),
        ("WCo,WCa->Cao  W\n", r"expected '-' or len_<G> keywords, got \['W'\]"),
        ("WCo,WCa->Cao  len_K\n", r"has no group\(s\) \['K'\]"),
        ("WCo,WCa->Cao  len_W len_W\n", "lists a supplement twice"),
        ("Wa->Wa -\n# c\nWa->Wa -\n", r"t\.txt:3: duplicate entry for 'Wa->Wa' \(first at line 1\)"),
        ("ij,jk->ik  -\n", "is not a grouped subscripts string"),
        ("WCo, WCa->Cao  len_W\n", "is not a grouped subscripts string"),  # spaces split the key
    ],
)
def test_malformed_tables_name_file_and_line(text: str, message: str) -> None:
    with pytest.raises(TableError, match=message):
        parse_table(text, source="t.txt")


def test_missing_table_file_says_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(TableError, match="decide each entry by hand"):
        load_table(tmp_path / "absent.txt")


def test_the_repo_table_parses() -> None:
    table = load_table(TABLE)
    assert table.supplement("WCo,WCa->Cao") == ("W",)
    assert table.supplement("WKCi,Cio->WKCo") == ()
