"""The linter never aborts: every file-level failure is a finding and the run goes on."""

from __future__ import annotations

import ast
import io
import json
import os
import re
from pathlib import Path

import pytest

from contractions import lint
from contractions.testing import scan

REPO = Path(__file__).resolve().parents[1]
MISSING = "from contractions import contract\ny = contract('WCo,WCa->Cao', a, b)\n"


def check(*paths, **kwargs):
    out, err = io.StringIO(), io.StringIO()
    code = lint.run_check([str(p) for p in paths], out=out, err=err, **kwargs)
    return code, out.getvalue().splitlines(), err.getvalue()


@pytest.mark.parametrize("codec", ["rot13", "base64", "hex", "zlib", "bz2", "uu", "quopri",
                                   "undefined", "punycode"])
def test_a_coding_cookie_that_cannot_decode_source_is_a_finding(tmp_path, codec):
    bad = tmp_path / "a_bad.py"
    bad.write_bytes(f"# -*- coding: {codec} -*-\nx = 1\n".encode())
    (tmp_path / "b_ok.py").write_text(MISSING)
    code, lines, _ = check(tmp_path)
    assert code == 1
    assert lines[0].startswith(f"{bad}:1:1: CT902 cannot decode")
    assert lines[1].startswith(f"{tmp_path / 'b_ok.py'}:2:5: CT107 ")   # the run went on
    assert len(lines) == 2


def _refuse_to_open(monkeypatch, secret: Path) -> None:
    """The scanner's ``open`` raises PermissionError for ``secret`` (root reads mode-000 files,
    so a chmod would not do)."""
    real_open = open

    def guarded(path, *args, **kwargs):
        if Path(path) == secret:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(scan, "open", guarded, raising=False)


def test_an_unreadable_file_under_a_directory_is_a_finding(tmp_path, monkeypatch):
    secret = tmp_path / "a_secret.py"
    secret.write_text("x = 1\n")
    (tmp_path / "b_ok.py").write_text(MISSING)
    _refuse_to_open(monkeypatch, secret)
    code, lines, _ = check(tmp_path)
    assert code == 1
    assert lines == [f"{secret}:1:1: CT901 cannot read: Permission denied",
                     lines[1]] and "CT107" in lines[1]


def test_an_unreadable_root_is_a_usage_error(tmp_path, monkeypatch):
    root = tmp_path / "src"
    root.mkdir()
    (root / "m.py").write_text(MISSING)
    real_scandir = os.scandir

    def guarded(path="."):
        if Path(path) == root:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", guarded)
    code, lines, err = check(root)
    assert (code, lines) == (2, [])
    assert f"cannot read '{root}' to scan it: Permission denied" in err


def test_an_unreadable_root_file_is_a_usage_error(tmp_path, monkeypatch):
    secret = tmp_path / "m.py"
    secret.write_text(MISSING)
    _refuse_to_open(monkeypatch, secret)
    code, _, err = check(secret)
    assert code == 2 and "Permission denied" in err


def test_an_unreadable_subdirectory_is_a_finding_and_the_venv_check_survives(tmp_path, monkeypatch):
    locked = tmp_path / "a_locked"
    locked.mkdir()
    (locked / "m.py").write_text(MISSING)
    (tmp_path / "b_ok.py").write_text(MISSING)
    real_scandir, real_stat = os.scandir, os.stat

    def deny(path):
        return Path(path) == locked or locked in Path(path).parents

    def scandir(path="."):
        if deny(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    def stat(path, *args, **kwargs):
        if locked in Path(path).parents:
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "stat", stat)
    code, lines, _ = check(tmp_path)
    assert code == 1
    assert lines[0] == f"{locked}:1:1: CT906 cannot list directory: Permission denied"
    assert "CT107" in lines[1] and len(lines) == 2


def test_a_file_over_the_size_cap_is_refused_unread(tmp_path, monkeypatch):
    big = tmp_path / "a_big.py"
    big.write_bytes(b"x = 1\n" * (10_000_000 // 6))          # 10 MB
    (tmp_path / "b_ok.py").write_text(MISSING)
    parsed = []
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda source, *a, **k: parsed.append(1) or real_parse(source, *a, **k))
    code, lines, _ = check(tmp_path)
    assert code == 1
    assert lines[0] == (f"{big}:1:1: CT903 too large: 9,999,996 bytes, over the "
                        f"{scan.MAX_FILE_BYTES:,}-byte limit per file (--max-file-bytes)")
    assert len(parsed) == 1                                   # only b_ok.py was parsed
    code, lines, _ = check(tmp_path / "b_ok.py", max_file_bytes=10)
    assert code == 1 and f"CT903 too large: {len(MISSING)} bytes, over the 10-byte limit" in lines[0]


def test_memory_exhaustion_is_reported_as_memory(tmp_path, monkeypatch):
    (tmp_path / "a_huge.py").write_text("x = 1\n")
    (tmp_path / "b_ok.py").write_text(MISSING)
    real_parse = ast.parse

    def parse(source, filename="<unknown>", *args, **kwargs):
        if filename.endswith("a_huge.py"):
            raise MemoryError
        return real_parse(source, filename, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", parse)
    code, lines, err = check(tmp_path)
    assert code == 1
    assert lines[0] == f"{tmp_path / 'a_huge.py'}:1:1: CT904 out of memory while parsing it"
    assert "nested too deeply" not in err


def test_the_other_verbs_call_sites_are_checked(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "import contractions as ct\n"
        "from contractions import contract_expression, explain, contract_path\n"
        "e = contract_expression('WCo,WCa->Cao', (3, 2, 5), (3, 2, 4))\n"
        "print(explain('W....a->Wa', (2, 3)))\n"
        "print(explain('WCo,WCa->Cao'))\n"                  # the string alone: reports the need
        "p = contract_path('Wa,Wb->W', x)\n"
        "q = ct.explain('WCo,WCa->Cao', (3, 2, 5), (3, 2, 4), len_W=1, bogus=2)\n"
    )
    code, lines, _ = check(path)
    assert code == 1
    assert [re.match(r".*?:(\d+):(\d+): (CT\d+)", line).groups() for line in lines] == [
        ("3", "5", "CT107"), ("4", "7", "CT101"), ("6", "5", "CT102"), ("7", "5", "CT103")]
    assert "unknown keyword 'bogus' for explain('WCo,WCa->Cao')" in lines[3]


def test_check_json(tmp_path):
    (tmp_path / "m.py").write_text(MISSING)
    (tmp_path / "z.py").write_bytes(b"# coding: rot13\nx = 1\n")
    out, err = io.StringIO(), io.StringIO()
    code = lint.run_check([str(tmp_path)], as_json=True, out=out, err=err)
    payload = json.loads(out.getvalue())
    assert code == 1
    assert [(f["line"], f["col"], f["code"]) for f in payload["findings"]] == [(2, 5, "CT107"), (1, 1, "CT902")]
    assert payload["files"] == 2 and payload["unreadable"] == 1 and payload["literal_call_sites"] == 1


def test_cli_check_json_and_max_file_bytes(tmp_path, capsys):
    from contractions.cli import main

    (tmp_path / "m.py").write_text(MISSING)
    assert main(["check", str(tmp_path), "--json", "--max-file-bytes", "20"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in payload["findings"]] == ["CT903"]


def test_every_rule_code_is_documented():
    text = (REPO / "docs" / "harness.md").read_text()
    for code in [*lint.CHECK_CODES.values(), *scan.FILE_CODES.values()]:
        assert re.search(rf"`{code}`", text), code
    assert f"{scan.MAX_FILE_BYTES:,}" in text


def test_pre_commit_hook_runs_contractions_check():
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert re.search(r"^- id: contractions-check$", text, re.M)
    assert re.search(r"^  entry: contractions check$", text, re.M)
    assert re.search(r"^  language: python$", text, re.M)
    assert re.search(r"^  types: \[python\]$", text, re.M)
