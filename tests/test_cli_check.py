"""`contractions check` / `contractions scan` (contractions/lint.py): the call-site linter, the
scan listing, their exit statuses, and what the engine may import to run them."""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import contractions
from contractions.cli import main
from contractions.lint import run_check, run_scan

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "contractions"

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
    return ct.contract("W....a->Wa", x)
"""


def write(root: Path, name: str, source: str | bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(source, bytes):
        path.write_bytes(source)
    else:
        path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


def check(*paths: Path, exclude: tuple[str, ...] = ()) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_check([str(p) for p in paths], exclude=exclude, out=out, err=err)
    return code, out.getvalue().splitlines(), err.getvalue()


def cli(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse: --help and usage errors
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- the findings ------------------------------------------------------------------------------


def test_clean_tree_passes_with_exit_0(tmp_path: Path) -> None:
    write(tmp_path, "clean.py", CLEAN)
    code, lines, tally = check(tmp_path)
    assert (code, lines) == (0, [])
    assert "0 finding(s) in 1 file(s), 2 literal call site(s) (1 dynamic" in tally


def test_findings_are_reported_at_path_and_line_with_exit_1(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.py", BROKEN)
    code, lines, _ = check(tmp_path)
    assert code == 1
    assert len(lines) == 3, lines
    missing, typo, malformed = lines
    assert missing.startswith(f"{path}:4:12: CT107 'WCo,WCa->Cao' needs a supplement")
    assert "pass one of len_W, len_C" in missing   # the solver's own describe() wording
    assert typo.startswith(f"{path}:7:12: CT104 len_w is passed but 'Wa,ab->Wb' has no such group")
    assert malformed.startswith(f"{path}:10:12: CT101 malformed subscripts 'W....a->Wa'")


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
        contract("Wa->Wa", x, precision="highest", preferred_element_type=t)
        """,
    )
    code, lines, _ = check(path)
    assert code == 1
    assert lines == [
        f"{path}:2:1: CT102 'Wa,ab->Wb' has 2 input term(s) but the call passes 1 operand(s)",
        f"{path}:3:1: CT106 len_W=-1 is negative; a group has 0 or more axes",
        f"{path}:4:1: CT103 unknown keyword 'lenW' for contract('Wa->Wa'): did you mean len_W=? "
        "(a group length is written len_<G>=n, G its uppercase group letter)",
    ]  # line 5 splats **opts (cannot be judged); line 6 passes a valid alternative supplement;
    # line 7 passes contract's own keywords


@pytest.mark.parametrize(
    ("written", "kind"), [("1.0", "float"), ("True", "bool"), ("'1'", "str"), ("None", "NoneType")]
)
def test_a_non_int_len_value_is_a_finding(tmp_path: Path, written: str, kind: str) -> None:
    path = write(
        tmp_path, "m.py", f"from contractions import contract\ncontract('WCo,WCa->Cao', a, b, len_W={written})\n"
    )
    code, lines, _ = check(path)
    assert code == 1
    assert lines == [
        f"{path}:2:1: CT105 len_W={written} is a {kind}, not an int; a group length is a whole number "
        "of axes, e.g. len_W=1"
    ]  # and no second finding claiming the supplement is missing


def test_star_import_and_concatenated_literal_are_judged(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.py",
        """
        from contractions import *
        y = contract('WCo,'
                     + 'WCa->Cao', a, b)
        z = contract('Wa,' + 'ab->Wb', x, m)
        """,
    )
    code, lines, _ = check(path)
    assert code == 1
    # One finding for the whole string; 'WCa->Cao' alone (a fragment) would need nothing.
    assert len(lines) == 1 and lines[0].startswith(
        f"{path}:2:5: CT107 'WCo,WCa->Cao' needs a supplement the call does not pass"
    )


# --- reading files: findings, skips, exclusions, exit statuses ---------------------------------


def test_an_unparsable_or_undecodable_file_is_a_finding_and_the_run_goes_on(tmp_path: Path) -> None:
    broken = write(tmp_path, "a_broken.py", BROKEN)
    syntax = write(tmp_path, "b_syntax.py", "x = 1\ndef f(:\n")
    latin = write(tmp_path, "c_latin.py", b"x = 1\ny = '\xe9'\n")  # not UTF-8, no coding line
    code, lines, tally = check(tmp_path)
    assert code == 1
    assert lines[:2] == [
        f"{broken}:4:12: CT107 'WCo,WCa->Cao' needs a supplement the call does not pass: the "
        "string cannot decide the lengths of W, C; pass one of len_W, len_C",
        f"{broken}:7:12: CT104 len_w is passed but 'Wa,ab->Wb' has no such group (its groups: W); "
        "did you mean len_W=? (a group length is written len_<G>=n, G its uppercase group letter)",
    ]
    assert lines[2].startswith(f"{broken}:10:12: CT101 malformed subscripts 'W....a->Wa': ")
    assert lines[3] == f"{syntax}:2:7: CT905 not valid Python: invalid syntax"
    assert lines[4].startswith(f"{latin}:2:1: CT902 cannot decode as utf-8: invalid continuation byte")
    assert len(lines) == 5
    assert "5 finding(s) in 3 file(s), 2 unreadable" in tally


def test_files_are_decoded_as_python_decodes_them(tmp_path: Path) -> None:
    # A UTF-8 byte-order mark, and a PEP 263 coding line: both are valid Python.
    write(tmp_path, "bom.py", "\ufefffrom contractions import contract\ncontract('WCo,WCa->Cao', a, b)\n".encode())
    write(
        tmp_path,
        "latin.py",
        b"# -*- coding: latin-1 -*-\nfrom contractions import contract\n"
        b"contract('WCo,WCa->Cao', a, b)  # caf\xe9\n",
    )
    write(tmp_path, "wrong.py", b"# coding: no-such-codec\nx = 1\n")
    code, lines, _ = check(tmp_path)
    assert code == 1
    assert [line.split(": ", 1)[0] for line in lines] == [
        f"{tmp_path / 'bom.py'}:2:1", f"{tmp_path / 'latin.py'}:3:1", f"{tmp_path / 'wrong.py'}:1:1"
    ]
    assert "needs a supplement" in lines[0] and "needs a supplement" in lines[1]
    assert "cannot decode: unknown encoding" in lines[2]


def test_special_files_and_deep_nesting_are_skipped_with_a_message(tmp_path: Path) -> None:
    write(tmp_path, "ok.py", BROKEN)
    os.mkfifo(tmp_path / "pipe.py")  # reading it would block forever
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    (tmp_path / "null.py").symlink_to(os.devnull)
    write(tmp_path, "deep.py", "x = 1" + " + 1" * 100_000 + "\n")
    code, lines, err = check(tmp_path)
    assert code == 1 and len(lines) == 3  # ok.py's three findings; the run was not stopped
    assert f"{tmp_path / 'pipe.py'}: skipped (a FIFO, not a regular file)" in err
    assert f"{tmp_path / 'loop.py'}: skipped (symlink loop)" in err
    assert f"{tmp_path / 'null.py'}: skipped (a device file, not a regular file)" in err
    deep = f"{tmp_path / 'deep.py'}: skipped (expressions nested too deeply to parse)"
    if sys.version_info >= (3, 11):   # 3.10's parser reads the 100,000-term sum without recursing
        assert deep in err


def test_skipped_directories_are_named(tmp_path: Path) -> None:
    write(tmp_path, "src/ok.py", CLEAN)
    for name in (".git/hooks.py", "env/lib.py", "src/__pycache__/ok.py", "build/lib.py"):
        write(tmp_path, name, BROKEN)  # would be findings if scanned
    write(tmp_path, "env/pyvenv.cfg", "home = /usr/bin\n")  # a virtual environment named env
    code, lines, err = check(tmp_path)
    assert (code, lines) == (0, [])
    assert (
        "skipped directories: hidden: .git; build output: build; virtual environment: env; "
        "bytecode cache: __pycache__"
    ) in err


def test_exclude_patterns_are_globs_and_repeatable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "src/ok.py", CLEAN)
    write(tmp_path, "src/gen/a_pb2.py", BROKEN)
    write(tmp_path, "tests/test_x.py", BROKEN)
    write(tmp_path, "tests/deep/test_y.py", BROKEN)
    code, out, err = cli("check", str(tmp_path), "--exclude", "*_pb2.py", "--exclude", "tests",
                         capsys=capsys)
    assert (code, out) == (0, ""), out
    assert f"{tmp_path / 'src/gen/a_pb2.py'}: skipped (--exclude '*_pb2.py')" in err
    assert "--exclude 'tests': tests" in err
    code, out, _ = cli("check", str(tmp_path), "--exclude", "tests/deep/*", "--exclude", "*_pb2.py",
                       capsys=capsys)
    assert code == 1 and {line.split(":")[0] for line in out.splitlines()} == {
        str(tmp_path / "tests/test_x.py")
    }


def test_exit_status_2_for_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli("check", str(tmp_path / "missing_dir"), capsys=capsys)
    assert (code, out) == (2, "")
    assert f"contractions check: error: no such file or directory to scan: '{tmp_path / 'missing_dir'}'" in err
    code, _, err = cli("scan", str(tmp_path / "missing.py"), capsys=capsys)
    assert code == 2 and "contractions scan: error: no such file" in err
    code, _, err = cli("check", str(tmp_path), "--no-such-option", capsys=capsys)
    assert code == 2 and "unrecognized arguments: --no-such-option" in err
    code, _, err = cli("check", capsys=capsys)
    assert code == 2 and "the following arguments are required: PATH" in err


@pytest.mark.parametrize("command", ["check", "scan"])
def test_help_documents_exit_statuses_exclusion_and_skipped_folders(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(command, "--help", capsys=capsys)
    assert code == 0
    text = " ".join(out.split())
    for needed in ("0 no findings", "1 findings", "2 usage error", "--exclude GLOB", "(repeatable)",
                   "hidden ones (.git, .venv, ...)", "pyvenv.cfg", "__pycache__, build, dist",
                   "FIFOs, device files, symlink loops"):
        assert needed in text, needed


# --- scan ----------------------------------------------------------------------------------------


def test_scan_json_lists_vocabulary_call_sites_and_unreadable_files(tmp_path: Path) -> None:
    write(tmp_path, "clean.py", CLEAN)
    bad = write(tmp_path, "zz_bad.py", "def f(:\n")
    out = io.StringIO()
    assert run_scan([str(tmp_path)], as_json=True, out=out, err=io.StringIO()) == 1
    payload = json.loads(out.getvalue())
    assert [v["subscripts"] for v in payload["vocabulary"]] == ["WCa,Caib,WCi->WCb", "WCo,WCa->Cao"]
    assert [(c["line"], c["subscripts"], c["len_keywords"]) for c in payload["call_sites"]] == [
        (4, "WCa,Caib,WCi->WCb", {}),
        (7, "WCo,WCa->Cao", {"len_W": None}),
        (10, "dynamic", {}),
    ]
    assert payload["unreadable"] == [
        {"path": str(bad), "line": 1, "col": 7, "code": "CT905",
         "message": "not valid Python: invalid syntax"}
    ]


def test_scan_table_for_people(tmp_path: Path) -> None:
    write(tmp_path, "clean.py", CLEAN)
    write(tmp_path, "odd.py", "from contractions import contract\ncontract('Wa->Wa', x, len_W=1.0)\n")
    out = io.StringIO()
    assert run_scan([str(tmp_path)], out=out, err=io.StringIO()) == 0
    text = out.getvalue()
    assert "vocabulary: 3 grouped string(s), 3 occurrence(s)" in text
    assert "call sites: 4" in text
    assert "contract('WCo,WCa->Cao', len_W=?)" in text  # not a literal
    assert "contract('Wa->Wa', len_W=1.0)" in text  # a literal, as written
    assert "contract(dynamic)" in text


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
    assert proc.stdout.splitlines()[0].startswith(f"{path}:4:12: CT107 'WCo,WCa->Cao' needs a supplement")
    write(tmp_path, "broken.py", CLEAN)
    proc = check_cli()
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr


# --- what the engine and the harness may import ------------------------------------------------


def _imports(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(absolute module, imported names) for every import statement in `path`."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            module = ".".join(base[: len(base) - node.level + 1] if node.level else [])
            module = ".".join(filter(None, [module, node.module or ""]))
            found.append((module, tuple(alias.name for alias in node.names)))
    return found


def test_the_engine_imports_only_the_harness_scanner() -> None:
    engine = [p for p in PACKAGE.rglob("*.py") if "testing" not in p.relative_to(PACKAGE).parts]
    assert PACKAGE / "lint.py" in engine
    reached = {
        (str(p.relative_to(REPO)), module, names)
        for p in engine
        for module, names in _imports(p)
        if module.startswith("contractions.testing")
        or (module == "contractions" and any(n == "testing" for n in names))
    }
    assert {(where, module) for where, module, _ in reached} <= {
        ("contractions/lint.py", "contractions.testing.scan")
    }, reached


def test_the_harness_uses_only_the_public_api() -> None:
    public = set(contractions.__all__)
    for path in (PACKAGE / "testing").glob("*.py"):
        for module, names in _imports(path):
            where = f"{path.relative_to(REPO)} imports {module} {names}"
            if module.startswith("contractions.testing") or not module.startswith("contractions"):
                continue
            assert module == "contractions" and names, where  # no engine module, no bare import
            assert set(names) <= public, where


def test_check_loads_neither_the_rest_of_the_harness_nor_pytest_nor_jax(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.py", BROKEN)
    script = (
        "import sys\nfrom contractions.cli import main\n"
        f"code = main(['check', {str(path)!r}])\n"
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pytest', '_pytest', 'jax', 'torch') or m.startswith('contractions.testing')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "1 ['contractions.testing', 'contractions.testing.scan']"


def test_advice_for_several_free_groups_names_sets_as_the_solver_does(tmp_path):
    from contractions import identifiability
    from contractions.lint import run_check

    source = tmp_path / "free.py"
    source.write_text("from contractions import contract\n"
                      "def f(x):\n"
                      "    return contract('WKCDa->WKa', x)\n", encoding="utf-8")
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert run_check([str(source)]) == 1
    advice = identifiability("WKCDa->WKa").describe().replace("needs", "pass", 1)
    assert "2 supplements: {len_W, len_K} or {len_C, len_D}" in advice
    assert advice in buffer.getvalue()
