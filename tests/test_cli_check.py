"""`contractions check` / `contractions scan`: the call-site linter and the scan listing."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contractions.testing.cli_commands import run_check, run_scan

REPO = Path(__file__).resolve().parents[1]

CLEAN = """
from contractions import contract

def apply(x, cores, z):
    return contract("WCa,Caib,WCi->WCb", x, cores, z)

def lift(zo, za, n):
    return contract("WCo,WCa->Cao", zo, za, len_W=n)   # supplied (value not literal: fine)

def other(spec, *ops):
    return contract(spec, *ops)                        # dynamic: not judged
"""

BROKEN = """
import contractions as ct

def lift(zo, za):
    return ct.contract("WCo,WCa->Cao", zo, za)

def typo(x, m):
    return ct.contract("Wa,ab->Wb", x, m, len_w=1)

def bad(x):
    return ct.contract("W...a->Wa", x)
"""


def write(root: Path, name: str, source: str) -> Path:
    path = root / name
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


def check(*paths: Path) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_check([str(p) for p in paths], out=out, err=err)
    return code, out.getvalue().splitlines(), err.getvalue()


def test_clean_tree_passes_with_exit_0(tmp_path: Path) -> None:
    write(tmp_path, "clean.py", CLEAN)
    code, lines, tally = check(tmp_path)
    assert (code, lines) == (0, [])
    assert "0 problem(s) in 2 literal call site(s) (1 dynamic" in tally


def test_problems_are_reported_at_path_and_line_with_exit_1(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.py", BROKEN)
    code, lines, _ = check(tmp_path)
    assert code == 1
    assert len(lines) == 3, lines
    missing, typo, malformed = lines
    assert missing.startswith(f"{path}:4: 'WCo,WCa->Cao' needs a supplement")
    assert "len_W=" in missing and "len_C=" in missing
    assert typo.startswith(f"{path}:7: len_w is passed but 'Wa,ab->Wb' has no such group")
    assert malformed.startswith(f"{path}:10: malformed subscripts 'W...a->Wa'")


def test_other_call_site_mistakes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "more.py",
        """
        from contractions import contract
        contract("Wa,ab->Wb", x)
        contract("Wa->Wa", x, len_W=-1)
        contract("Wa->Wa", x, lenW=1)
        contract("WCa,KCaib->WKCib", a, b, **opts)
        contract("WCo,WCa->Cao", a, b, len_C=1)
        """,
    )
    code, lines, _ = check(path)
    assert code == 1
    assert lines == [
        f"{path}:2: 'Wa,ab->Wb' has 2 input term(s) but the call passes 1 operand(s)",
        f"{path}:3: len_W=-1 is negative; a group has 0 or more axes",
        f"{path}:4: unknown keyword 'lenW' for 'Wa->Wa' (a group length is written len_<G>=n)",
    ]  # line 5 splats **opts (cannot be judged); line 6 passes a valid alternative supplement


def test_unreadable_input_is_an_error(tmp_path: Path) -> None:
    code, lines, _ = check(tmp_path / "missing_dir")
    assert code == 1 and lines[0].startswith("error: no such file")


def test_scan_json_lists_vocabulary_and_call_sites(tmp_path: Path) -> None:
    write(tmp_path, "clean.py", CLEAN)
    out = io.StringIO()
    assert run_scan([str(tmp_path)], as_json=True, out=out) == 0
    payload = json.loads(out.getvalue())
    assert [v["subscripts"] for v in payload["vocabulary"]] == ["WCa,Caib,WCi->WCb", "WCo,WCa->Cao"]
    assert [(c["line"], c["subscripts"], c["len_keywords"]) for c in payload["call_sites"]] == [
        (4, "WCa,Caib,WCi->WCb", {}),
        (7, "WCo,WCa->Cao", {"len_W": None}),
        (10, "dynamic", {}),
    ]


def test_scan_table_for_people(tmp_path: Path) -> None:
    write(tmp_path, "clean.py", CLEAN)
    out = io.StringIO()
    assert run_scan([str(tmp_path)], as_json=False, out=out) == 0
    text = out.getvalue()
    assert "vocabulary: 2 grouped string(s), 2 occurrence(s)" in text
    assert "call sites: 3" in text
    assert "contract('WCo,WCa->Cao', len_W=?)" in text
    assert "contract(dynamic)" in text


@pytest.mark.skipif(not (REPO / "contractions" / "cli.py").exists(), reason="no cli module")
def test_python_dash_m_contractions_check_end_to_end(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.py", BROKEN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))

    def check_cli() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "contractions", "check", str(path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )

    proc = check_cli()
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[0].startswith(f"{path}:4: 'WCo,WCa->Cao' needs a supplement")
    write(tmp_path, "broken.py", CLEAN)
    proc = check_cli()
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr
