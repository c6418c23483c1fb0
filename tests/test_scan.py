"""The AST scanners: vocabulary literals and contract(...) call sites, found without importing."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from contractions.testing.scan import (
    ScanError,
    Skipped,
    is_grouped_subscripts,
    iter_python_files,
    normalize_subscripts,
    scan_call_sites,
    scan_tree,
    scan_vocabulary,
)


def write(root: Path, name: str, source: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


# --- vocabulary ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["WCa,Caib,WCi->WCb", "WCo,WCa->Cao", " W a , a b -> W b ", "Wii->W", "P,PQ,Q->", "WC,WC->W"],
)
def test_grouped_strings_are_recognised(text: str) -> None:
    assert is_grouped_subscripts(text)


@pytest.mark.parametrize(
    "text",
    [
        "ij,jk->ik",  # no uppercase group: plain einsum
        "WCa,Caib",  # no arrow
        "...a,ab->...b",  # '.' is not in the dialect
        "W1a->W",  # digits are not in the dialect
        "see W->C above.",  # prose
        "->C",  # a fragment appended to a dynamically built string: no input term
        "",
    ],
)
def test_other_strings_are_not(text: str) -> None:
    assert not is_grouped_subscripts(text)


def test_normalize_removes_all_whitespace() -> None:
    assert normalize_subscripts(" WCa ,\tCaib ->\nWCb ") == "WCa,Caib->WCb"


def test_vocabulary_lists_literals_with_file_and_line(tmp_path: Path) -> None:
    write(
        tmp_path,
        "pkg/ops.py",
        '''
        """Module docstring mentioning 'WCa,Caib->WCb' in prose is not vocabulary."""
        LIFT = "WCo,WCa->Cao"

        def f(x, name):
            plain = "ij,jk->ik"
            built = f"{name}Wa->Wa"          # f-string fragments are skipped
            odd = "Wa->Wa"  # contractions: ignore
            return "KCa, Cab -> KCb"
        ''',
    )
    found = scan_vocabulary([tmp_path])
    assert [(e.subscripts, Path(e.path).name, e.line) for e in found] == [
        ("WCo,WCa->Cao", "ops.py", 2),
        ("KCa, Cab -> KCb", "ops.py", 8),
    ]
    assert found[1].key == "KCa,Cab->KCb"


def test_scanning_never_imports_the_code(tmp_path: Path) -> None:
    write(tmp_path, "boom.py", 'raise SystemExit("imported!")\nS = "Wa,ab->Wb"\n')
    assert [e.subscripts for e in scan_vocabulary([tmp_path])] == ["Wa,ab->Wb"]


def test_concatenated_literals_are_one_string_never_fragments(tmp_path: Path) -> None:
    write(
        tmp_path,
        "m.py",
        """
        WHOLE = ('WCo,'
                 + 'WCa->Cao')                 # a + of literals: one string, at its first line
        BUILT = prefix + ',WCa->Cao'           # a piece of a dynamic string: not vocabulary
        ALSO = 'Wa,' + suffix + '->Wb'         # likewise
        IMPLICIT = 'KCa,' 'Cab->KCb'           # implicit concatenation is one literal anyway
        """,
    )
    assert [(e.subscripts, e.line) for e in scan_vocabulary([tmp_path])] == [
        ("WCo,WCa->Cao", 1),
        ("KCa,Cab->KCb", 5),
    ]


def test_hidden_cache_build_and_virtualenv_directories_are_skipped_and_reported(
    tmp_path: Path,
) -> None:
    write(tmp_path, "a.py", 'S = "Wa->Wa"\n')
    write(tmp_path, ".venv/b.py", 'S = "Wb->Wb"\n')
    write(tmp_path, "__pycache__/c.py", 'S = "Wc->Wc"\n')
    write(tmp_path, "myenv/pyvenv.cfg", "home = /usr/bin\n")
    write(tmp_path, "myenv/d.py", 'S = "Wd->Wd"\n')
    write(tmp_path, "pkg.egg-info/e.py", 'S = "We->We"\n')
    (tmp_path / "linked").symlink_to(tmp_path, target_is_directory=True)  # a loop if followed
    assert [p.name for p in iter_python_files([tmp_path])] == ["a.py"]
    report = scan_tree([tmp_path])
    assert [e.subscripts for e in report.vocabulary] == ["Wa->Wa"]
    assert sorted((Path(s.path).name, s.reason) for s in report.skipped) == [
        (".venv", "hidden"),
        ("__pycache__", "bytecode cache"),
        ("linked", "symlink, not followed"),
        ("myenv", "virtual environment"),
        ("pkg.egg-info", "build output"),
    ]
    assert all(s.is_dir for s in report.skipped)
    assert str(report.skipped[0]).endswith("/: skipped (hidden)")


def test_exclude_matches_names_relative_paths_and_globs(tmp_path: Path) -> None:
    for name in ("src/a.py", "src/gen/b_pb2.py", "src/gen/c.py", "tests/d.py"):
        write(tmp_path, name, 'S = "Wa->Wa"\n')
    report = scan_tree([tmp_path], exclude=["*_pb2.py", "src/gen/c.py", "tests/"])
    assert [Path(f).relative_to(tmp_path).as_posix() for f in report.files] == ["src/a.py"]
    assert sorted((Path(s.path).relative_to(tmp_path).as_posix(), s.reason) for s in report.skipped) == [
        ("src/gen/b_pb2.py", "--exclude '*_pb2.py'"),
        ("src/gen/c.py", "--exclude 'src/gen/c.py'"),
        ("tests", "--exclude 'tests/'"),
    ]


def test_unreadable_files_are_findings_and_special_files_skips(tmp_path: Path) -> None:
    write(tmp_path, "a_bad.py", "def f(:\n")
    write(tmp_path, "b_ok.py", "from contractions import contract\ncontract('Wa->Wa', x)\n")
    os.mkfifo(tmp_path / "c_fifo.py")
    (tmp_path / "d_loop.py").symlink_to(tmp_path / "d_loop.py")
    report = scan_tree([tmp_path])
    assert [str(f) for f in report.unreadable] == [f"{tmp_path / 'a_bad.py'}:1:7: CT905 not valid Python: invalid syntax"]
    assert [s.subscripts for s in report.call_sites] == ["Wa->Wa"]  # the scan went on
    assert report.skipped == (
        Skipped(str(tmp_path / "c_fifo.py"), "a FIFO, not a regular file"),
        Skipped(str(tmp_path / "d_loop.py"), "symlink loop"),
    )
    # Given directly too: a device file is skipped, not read (it never ends).
    assert scan_tree([os.devnull]).skipped == (Skipped(os.devnull, "a device file, not a regular file"),)


def test_missing_path_and_syntax_errors_are_reported(tmp_path: Path) -> None:
    with pytest.raises(ScanError, match="no such file"):
        scan_vocabulary([tmp_path / "nope"])
    with pytest.raises(ScanError, match="no such file"):
        scan_tree([tmp_path / "nope"])
    bad = write(tmp_path, "bad.py", "def f(:\n")
    with pytest.raises(ScanError, match=r"bad\.py:1:7: CT905 not valid Python"):
        scan_call_sites([bad])


# --- call sites ------------------------------------------------------------------------------


def test_call_sites_through_every_import_form(tmp_path: Path) -> None:
    write(
        tmp_path,
        "forms.py",
        """
        import contractions
        import contractions as ct
        from contractions import contract
        from contractions import contract as c
        from contractions.api import contract as api_contract

        contract("Wa,ab->Wb", x, m)
        c("WCo,WCa->Cao", a, b, len_W=2)
        ct.contract("Wa->Wa", x)
        contractions.contract("Wa->Wa", x)
        api_contract("Wa->Wa", x)
        contractions.api.contract("Wa->Wa", x)
        """,
    )
    sites = scan_call_sites([tmp_path])
    assert [(s.line, s.callee) for s in sites] == [
        (7, "contract"),
        (8, "c"),
        (9, "ct.contract"),
        (10, "contractions.contract"),
        (11, "api_contract"),
        (12, "contractions.api.contract"),
    ]
    assert sites[1].subscripts == "WCo,WCa->Cao"
    assert sites[1].len_keywords == (("len_W", 2),)
    assert sites[1].n_operands == 2


def test_unrelated_contract_functions_are_not_call_sites(tmp_path: Path) -> None:
    write(
        tmp_path,
        "other.py",
        """
        from mylib import contract
        import numpy as contractions_like

        def local():
            def contract(*a): ...
            return contract("Wa->Wa", 1)

        contract("Wa,ab->Wb", x, m)
        contractions_like.contract("Wa->Wa", x)
        """,
    )
    assert scan_call_sites([tmp_path]) == ()


def test_dynamic_strings_keywords_and_splats(tmp_path: Path) -> None:
    write(
        tmp_path,
        "calls.py",
        """
        from contractions import contract as c

        c(spec, x)
        c("WCo,WCa->Cao", a, b, len_W=n, len_C=1)
        c("Wa->Wa", x, len_W=-1, precision="highest")
        c("Wa,ab->Wb", *ops, **supplements)
        c(subscripts="Wa->Wa")
        c("Wa->Wa",
          x)  # contractions: ignore
        """,
    )
    dynamic, keyed, negative, splat, by_keyword = scan_call_sites([tmp_path])
    assert dynamic.is_dynamic and dynamic.subscripts is None
    assert dynamic.as_dict()["subscripts"] == "dynamic"
    assert keyed.supplements == {"len_W": None, "len_C": 1}  # None: not an int literal
    assert not keyed.splats_kwargs
    assert negative.len_keywords == (("len_W", -1),)
    assert negative.other_keywords == ("precision",)
    assert splat.splats_kwargs and splat.n_operands is None
    assert by_keyword.subscripts == "Wa->Wa" and by_keyword.n_operands == 0


def test_star_imports_that_bind_contract(tmp_path: Path) -> None:
    write(tmp_path, "a.py", "from contractions import *\ncontract('Wa->Wa', x)\n")
    write(tmp_path, "b.py", "from contractions.api import *\ncontract('Wb->Wb', x)\n")
    write(tmp_path, "c.py", "from contractions.testing import *\ncontract('Wc->Wc', x)\n")
    assert [(Path(s.path).name, s.callee) for s in scan_call_sites([tmp_path])] == [
        ("a.py", "contract"),
        ("b.py", "contract"),
    ]


def test_keywords_written_as_literals_are_recorded_as_written(tmp_path: Path) -> None:
    write(
        tmp_path,
        "m.py",
        """
        from contractions import contract
        contract("Wa->Wa", x, len_W=1.0)
        contract("Wa->Wa", x, len_W=True, precision=("high", "high"))
        contract("Wa->Wa", x, len_W='1', preferred_element_type=dtype)
        contract("W" + "a->Wa", x, len_W=-2)
        """,
    )
    floats, bools, strings, folded = scan_call_sites([tmp_path])
    assert floats.len_keywords == (("len_W", None),) and floats.literals == {"len_W": 1.0}
    assert type(bools.literals["len_W"]) is bool and bools.len_keywords == (("len_W", None),)
    assert bools.literals["precision"] == ("high", "high")
    assert strings.literals == {"len_W": "1"}  # dtype is not a literal
    assert strings.keyword_source("preferred_element_type") == "?"
    assert folded.subscripts == "Wa->Wa" and folded.len_keywords == (("len_W", -2),)


def test_relative_imports_inside_a_contractions_package(tmp_path: Path) -> None:
    write(
        tmp_path,
        "contractions/demo.py",
        """
        from .api import contract
        from . import api

        contract("Wa->Wa", x)
        api.contract("Wb->Wb", y)
        """,
    )
    assert [s.subscripts for s in scan_call_sites([tmp_path])] == ["Wa->Wa", "Wb->Wb"]


def test_call_sites_are_frozen_records(tmp_path: Path) -> None:
    write(tmp_path, "m.py", "from contractions import contract\ncontract('Wa->Wa', x)\n")
    (site,) = scan_call_sites([tmp_path])
    with pytest.raises(AttributeError):
        site.line = 3  # type: ignore[misc]
    assert site.location.endswith("m.py:2")
