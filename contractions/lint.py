"""`contractions check` (the call-site linter) and `contractions scan`, without running the code.

    contractions check PATH... [--json] [--exclude GLOB]...  # `path:line:col: CODE finding` (alias: lint)
    contractions scan PATH... [--json] [--exclude GLOB]...   # the vocabulary and call sites

The source is read, never imported, by the harness's AST scanner (`contractions.testing.scan`,
standard library only), and each literal call site is judged with the library's public
`parse` and `identifiability`, from the string alone, exactly as the call would: calls of
`contract`, `contract_expression`, `contract_path` and `explain`. Each finding carries a rule
code (`CHECK_CODES`, and `FILE_CODES` for files that cannot be read). Exit status: 0 no
findings, 1 findings, 2 usage error (docs/harness.md).

>>> import pathlib, tempfile
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "m.py").write_text("from contractions import contract\\n"
...                                "y = contract('WCo,WCa->Cao', a, b)\\n")
>>> findings = check_call_sites(scan_tree([root]).call_sites)
>>> [(f.line, f.col, f.code, f.message.split(':')[0]) for f in findings]
[(2, 5, 'CT107', "'WCo,WCa->Cao' needs a supplement the call does not pass")]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

import contractions
from contractions import ContractionError, contract, identifiability, parse
from contractions.arguments import keyword_hint, keywords_of
from contractions.compat import subscripts_first
from contractions.errors import quoted, uppercase_hint
from contractions.testing.scan import (
    FILE_CODES,
    MAX_FILE_BYTES,
    SKIPPED_DIRECTORIES,
    CallSite,
    Finding,
    ScanError,
    ScanReport,
    distinct_subscripts,
    scan_tree,
)

__all__ = [
    "CHECK_CODES",
    "EXIT_CLEAN",
    "EXIT_FINDINGS",
    "EXIT_USAGE",
    "add_commands",
    "check_call_sites",
    "run_check",
    "run_command",
    "run_scan",
]

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

#: The rule code of each call-site finding (docs/harness.md lists every code).
CHECK_CODES: dict[str, str] = {
    "malformed subscripts": "CT101",
    "operand count": "CT102",
    "unknown keyword": "CT103",
    "no such group": "CT104",
    "non-int length": "CT105",
    "negative length": "CT106",
    "missing supplement": "CT107",
    "unusable supplement": "CT108",
}


# The keywords each checked function takes besides len_<G>, read off its signature (a function
# this version does not have is judged with contract's), as the runtime check reads them.
_KNOWN_KEYWORDS = {
    name: keywords_of(getattr(contractions, name, contract))
    for name in ("contract", "contract_expression", "contract_path", "explain")
}
_LEN_KEYWORD = re.compile(r"len_([A-Z])")

_EPILOG = f"""\
exit status:
  0  no findings
  1  findings, printed to stdout as path:line:col: CODE message (for check: a call-site
     problem, CT1xx; for both: a file that cannot be read, decoded or parsed as Python, is
     over --max-file-bytes ({MAX_FILE_BYTES:,} by default), or a directory that cannot be
     listed, CT9xx; the run goes on)
  2  usage error: a bad option, or a PATH that does not exist or cannot be read

codes:
{chr(10).join(f"  {code}  {what}" for what, code in [*CHECK_CODES.items(), *FILE_CODES.items()])}

Files given as PATH are read whatever their suffix; under a directory, *.py files are.
Directories never entered (each one met is named on stderr):
  hidden ones (.git, .venv, ...), any holding a pyvenv.cfg, symlinked ones, *.egg-info,
  {", ".join(sorted(SKIPPED_DIRECTORIES))},
  and whatever --exclude matches.
FIFOs, device files, symlink loops and files nested too deeply to parse are skipped with a
message on stderr. Sources are decoded as Python decodes them (BOM, coding declaration).
A line carrying the comment '# contractions: ignore' is not scanned.
"""


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _check_dynamic_site(site: CallSite) -> list[tuple[str, str]]:
    """A call whose first argument is not a literal but a later one is a string literal: the
    subscripts are not first (the runtime error's advice)."""
    if site.misplaced_subscripts is None:
        return []
    return [(CHECK_CODES["malformed subscripts"],
             f"the first argument of {site.function}() is not a string literal but a later one "
             f"is: {subscripts_first(site.misplaced_subscripts, site.function)}")]


def _check_site(site: CallSite) -> list[tuple[str, str]]:
    """The findings of one literal call site as ``(code, message)`` (empty when consistent)."""
    s = site.subscripts
    assert s is not None
    q = quoted(s)
    try:
        parsed = parse(s)
    except ContractionError as exc:
        return [(CHECK_CODES["malformed subscripts"], f"malformed subscripts {q}: {_first_line(exc)}")]

    # explain() with the string alone reports what it needs: no count, no missing supplement.
    string_only = site.function == "explain" and site.n_operands == 0
    messages: list[tuple[str, str]] = []
    what = "shape" if site.function == "contract_expression" else "operand"
    if site.n_operands is not None and not string_only and site.n_operands != len(parsed.inputs):
        packed = [k for k in site.packed_operands if site.n_operands < len(parsed.inputs)]
        # (the runtime error's advice, where the call passes the operands as one list)
        unpack = (f"; operand {packed[0]} is a list: operands go as separate arguments: "
                  f"{site.function}({q}, *ops), not {site.function}({q}, ops)" if packed else "")
        messages.append((CHECK_CODES["operand count"],
                         f"{q} has {len(parsed.inputs)} input term(s) but the call passes "
                         f"{site.n_operands} {what}(s){unpack}"))
    known = _KNOWN_KEYWORDS.get(site.function, _KNOWN_KEYWORDS["contract"])
    for name in site.other_keywords:
        if name not in known:
            messages.append((CHECK_CODES["unknown keyword"],
                             f"unknown keyword {name!r} for {site.function}({q}): "
                             f"{keyword_hint(name, known)}"))
    literals = site.literals
    supplied: list[str] = []
    for name, value in site.len_keywords:
        match = _LEN_KEYWORD.fullmatch(name)
        if match is None or match.group(1) not in parsed.groups:
            groups = ", ".join(parsed.groups) or "none"
            # a malformed len_ name (len_w, len_WC) is the runtime's keyword error: its advice
            fix = "remove it or fix the string" if match is not None else keyword_hint(name, known)
            messages.append((CHECK_CODES["no such group"],
                             f"{name} is passed but {q} has no such group (its groups: {groups}); {fix}"))
            continue
        if name in literals and value is None:
            written = literals[name]
            messages.append((CHECK_CODES["non-int length"],
                             f"{name}={written!r:.60} is a {type(written).__name__}, not an int; a "
                             f"group length is a whole number of axes, e.g. {name}=1"))
        elif value is not None and value < 0:
            messages.append((CHECK_CODES["negative length"],
                             f"{name}={value} is negative; a group has 0 or more axes"))
        supplied.append(match.group(1))
    if site.splats_kwargs or string_only:
        return messages  # its supplements are not visible (or not needed), so "missing" cannot be judged
    try:
        info = identifiability(s, supplied=supplied)
    except ContractionError as exc:
        return [*messages, (CHECK_CODES["unusable supplement"], _first_line(exc))]
    if info.needs_supplement:
        # The solver's own wording: one of several single pins, or the smallest sets.
        fix = info.describe().replace("needs", "pass", 1)
        undetermined = ", ".join(info.undetermined)
        # (as the runtime error says it, without the operands' ndims to tell whether they fit)
        numpy_like = uppercase_hint(s)
        messages.append((CHECK_CODES["missing supplement"],
                         f"{q} needs a supplement the call does not pass: "
                         f"{numpy_like + '; as groups, the' if numpy_like else 'the'} string cannot "
                         f"decide the lengths of {undetermined}; {fix}"))
    return messages


def check_call_sites(sites: Iterable[CallSite]) -> list[Finding]:
    """Lint literal call sites: a missing supplement, an unknown or non-int `len_*`, an
    operand count that differs from the term count, a malformed string. Dynamic sites (the
    string is not a literal) are judged only for a string literal after the first argument
    (the subscripts not first)."""
    findings: list[Finding] = []
    for site in sites:
        judged = _check_dynamic_site(site) if site.is_dynamic else _check_site(site)
        findings.extend(Finding(site.path, site.line, message, site.col, code)
                        for code, message in judged)
    return findings


def _names(names: Iterable[str]) -> str:
    counts = Counter(names)
    return ", ".join(name if n == 1 else f"{name} (x{n})" for name, n in counts.items())


def _report_skipped(report: ScanReport, err: TextIO) -> None:
    """Say on `err` which directories and files were not looked at, and why."""
    by_reason: dict[str, list[str]] = {}
    for skipped in report.skipped:
        if skipped.is_dir:
            by_reason.setdefault(skipped.reason, []).append(Path(skipped.path).name)
    if by_reason:
        print(
            "skipped directories: "
            + "; ".join(f"{reason}: {_names(names)}" for reason, names in by_reason.items()),
            file=err,
        )
    for skipped in report.skipped:
        if not skipped.is_dir:
            print(skipped, file=err)


def _scan_or_usage_error(
    command: str, paths: Sequence[str], exclude: Sequence[str], err: TextIO,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> ScanReport | None:
    try:
        return scan_tree(paths, exclude=exclude, max_file_bytes=max_file_bytes)
    except ScanError as exc:
        print(f"contractions {command}: error: {exc}", file=err)
        return None


def run_check(
    paths: Sequence[str],
    *,
    as_json: bool = False,
    exclude: Sequence[str] = (),
    max_file_bytes: int = MAX_FILE_BYTES,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """`contractions check PATH... [--json]`: print each finding as `path:line:col: CODE message`.

    Returns 1 when anything was found (an unreadable file included), 0 on a clean tree, 2 when
    a path does not exist or cannot be read. Skipped paths and a one-line tally go to `err`;
    with `as_json`, one JSON object (findings, tally, skipped paths) goes to `out`.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    report = _scan_or_usage_error("check", paths, exclude, err, max_file_bytes)
    if report is None:
        return EXIT_USAGE
    sites = report.call_sites + report.other_call_sites
    findings = sorted(
        [*report.unreadable, *check_call_sites(sites)],
        key=lambda f: (f.path, f.line, f.col),
    )
    literal = sum(1 for s in sites if not s.is_dynamic)
    status = EXIT_FINDINGS if findings else EXIT_CLEAN
    if as_json:
        payload = {
            "findings": [f.as_dict() for f in findings],
            "files": len(report.files),
            "unreadable": len(report.unreadable),
            "literal_call_sites": literal,
            "dynamic_call_sites": len(sites) - literal,
            "skipped": [
                {"path": s.path, "reason": s.reason, "is_dir": s.is_dir} for s in report.skipped
            ],
        }
        print(json.dumps(payload, indent=2), file=out)
        return status
    for finding in findings:
        print(finding, file=out)
    _report_skipped(report, err)
    unreadable = f", {len(report.unreadable)} unreadable" if report.unreadable else ""
    print(
        f"contractions check: {len(findings)} finding(s) in {len(report.files)} file(s)"
        f"{unreadable}, {literal} literal call site(s) ({len(sites) - literal} dynamic, "
        "their strings not checked)",
        file=err,
    )
    return status


def _describe_site(site: CallSite) -> str:
    subscripts = "dynamic" if site.subscripts is None else quoted(site.subscripts)
    keywords = [f"{name}={site.keyword_source(name)}" for name, _ in site.len_keywords]
    if site.splats_kwargs:
        keywords.append("**kwargs")
    return f"{site.location}  {site.callee}({', '.join([subscripts, *keywords])})"


def run_scan(
    paths: Sequence[str],
    *,
    as_json: bool = False,
    exclude: Sequence[str] = (),
    max_file_bytes: int = MAX_FILE_BYTES,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """`contractions scan PATH... [--json]`: list the vocabulary and the call sites.

    Unreadable files are listed too (exit 1); skipped paths go to `err`; 2 when a path does
    not exist.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    report = _scan_or_usage_error("scan", paths, exclude, err, max_file_bytes)
    if report is None:
        return EXIT_USAGE
    status = EXIT_FINDINGS if report.unreadable else EXIT_CLEAN
    if as_json:
        payload = {
            "vocabulary": [
                {"subscripts": v.subscripts, "path": v.path, "line": v.line}
                for v in report.vocabulary
            ],
            "call_sites": [site.as_dict() for site in report.call_sites],
            "other_call_sites": [site.as_dict() for site in report.other_call_sites],
            "unreadable": [f.as_dict() for f in report.unreadable],
            "skipped": [
                {"path": s.path, "reason": s.reason, "is_dir": s.is_dir} for s in report.skipped
            ],
        }
        print(json.dumps(payload, indent=2), file=out)
        return status

    vocabulary = report.vocabulary
    grouped = distinct_subscripts(vocabulary)
    print(f"vocabulary: {len(grouped)} grouped string(s), {len(vocabulary)} occurrence(s)", file=out)
    width = max((len(key) for key in grouped), default=0)
    for key, entries in grouped.items():
        first = entries[0]
        more = f" (+{len(entries) - 1} more)" if len(entries) > 1 else ""
        print(f"  {key:<{width}}  {first.path}:{first.line}{more}", file=out)
    print(f"call sites: {len(report.call_sites)}", file=out)
    for site in report.call_sites:
        print(f"  {_describe_site(site)}", file=out)
    print(f"other call sites (contract_expression, contract_path, explain): "
          f"{len(report.other_call_sites)}", file=out)
    for site in report.other_call_sites:
        print(f"  {_describe_site(site)}", file=out)
    if report.unreadable:
        print(f"unreadable files: {len(report.unreadable)}", file=out)
        for finding in report.unreadable:
            print(f"  {finding}", file=out)
    _report_skipped(report, err)
    return status


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `check` (alias `lint`) and `scan` on the `contractions` command's subparsers."""
    check = subparsers.add_parser(
        "check",
        aliases=["lint"],
        help="lint contract() call sites under PATHs (exit 0 clean, 1 findings, 2 usage error)",
        description="Lint every literal call site of contract(), contract_expression(), "
        "contract_path() and explain() under PATHs, from the source alone: a missing or "
        "unknown len_*, a non-int len_* value, an operand count that differs from the term "
        "count, a malformed string.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    scan = subparsers.add_parser(
        "scan",
        help="list the grouped vocabulary and contract() call sites under PATHs",
        description="List the grouped subscripts strings and the contract() call sites "
        "under PATHs.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for parser in (check, scan):
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument(
            "--exclude", action="append", default=[], metavar="GLOB",
            help="skip files and directories whose name, path relative to PATH, or path as "
            "given matches GLOB (repeatable), e.g. --exclude 'tests/*' --exclude '*_pb2.py'",
        )
        parser.add_argument(
            "--max-file-bytes", type=_positive_int, default=MAX_FILE_BYTES, metavar="N",
            help=f"a file larger than N bytes is a finding (CT903), not read (default {MAX_FILE_BYTES:,})",
        )
        parser.add_argument("--json", action="store_true", help="machine-readable output")


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number of bytes")
    return int(text)


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed `check` (or its alias `lint`) or `scan` command."""
    if args.command in ("check", "lint"):
        return run_check(args.paths, as_json=args.json, exclude=args.exclude,
                         max_file_bytes=args.max_file_bytes)
    return run_scan(args.paths, as_json=args.json, exclude=args.exclude,
                    max_file_bytes=args.max_file_bytes)
