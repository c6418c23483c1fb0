"""`contractions check` (the call-site linter) and `contractions scan`, as plain functions.

    run_check(paths) -> int           # prints `path:line: problem`; 1 if any problem, else 0
    run_scan(paths, as_json) -> int   # vocabulary + call sites, as a table or JSON

`check` reads the source only (AST scan) and decides with the library's own public
`parse` and `identifiability`, i.e. from the string alone, exactly as a call would.

>>> import pathlib, tempfile
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "m.py").write_text("from contractions import contract\\n"
...                                "y = contract('WCo,WCa->Cao', a, b)\\n")
>>> problems = check_call_sites(scan_call_sites([root]))
>>> [(p.line, p.message.split(':')[0]) for p in problems]
[(2, "'WCo,WCa->Cao' needs a supplement the call does not pass")]
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

from .scan import (
    CallSite,
    ScanError,
    distinct_subscripts,
    scan_call_sites,
    scan_vocabulary,
)

__all__ = ["Problem", "check_call_sites", "run_check", "run_scan"]

# Keywords `contract` defines besides len_<G> (api.contract's signature).
_KNOWN_KEYWORDS = frozenset({"precision", "preferred_element_type"})
_LEN_KEYWORD = re.compile(r"len_([A-Z])")


@dataclass(frozen=True)
class Problem:
    """One finding of the linter, printed as `path:line: message`."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _check_site(site: CallSite) -> list[str]:
    """The problems of one literal call site (empty when it is consistent)."""
    from contractions import ContractionError, identifiability, parse

    s = site.subscripts
    assert s is not None
    try:
        parsed = parse(s)
    except ContractionError as exc:
        return [f"malformed subscripts {s!r}: {_first_line(exc)}"]

    messages: list[str] = []
    if site.n_operands is not None and site.n_operands != len(parsed.inputs):
        messages.append(
            f"{s!r} has {len(parsed.inputs)} input term(s) but the call passes "
            f"{site.n_operands} operand(s)"
        )
    for name in site.other_keywords:
        if name not in _KNOWN_KEYWORDS:
            messages.append(
                f"unknown keyword {name!r} for {s!r} (a group length is written len_<G>=n)"
            )
    supplied: list[str] = []
    for name, value in site.len_keywords:
        match = _LEN_KEYWORD.fullmatch(name)
        if match is None or match.group(1) not in parsed.groups:
            groups = ", ".join(parsed.groups) or "none"
            messages.append(
                f"{name} is passed but {s!r} has no such group (its groups: {groups}); "
                "remove it or fix the string"
            )
            continue
        if value is not None and value < 0:
            messages.append(f"{name}={value} is negative; a group has 0 or more axes")
        supplied.append(match.group(1))
    if site.splats_kwargs:
        return messages  # its supplements are not visible, so "missing" cannot be judged
    try:
        info = identifiability(s, supplied=supplied)
    except ContractionError as exc:
        return [*messages, _first_line(exc)]
    if info.needs_supplement:
        if info.candidates:
            fix = "pass one of " + ", ".join(f"len_{g}=" for g in info.candidates)
        else:
            fix = f"pass {info.rank_deficit} more, e.g. " + ", ".join(
                f"len_{g}=" for g in info.completion
            )
        undetermined = ", ".join(info.undetermined)
        messages.append(
            f"{s!r} needs a supplement the call does not pass: the string cannot decide the "
            f"lengths of {undetermined}; {fix}"
        )
    return messages


def check_call_sites(sites: Iterable[CallSite]) -> list[Problem]:
    """Lint literal call sites: missing supplement, unknown len_*, malformed string."""
    problems: list[Problem] = []
    for site in sites:
        if site.is_dynamic:
            continue
        problems.extend(Problem(site.path, site.line, m) for m in _check_site(site))
    return problems


def run_check(paths: Sequence[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`contractions check PATH...`: print each problem as `path:line: problem`.

    Returns 1 when any problem (or an unreadable file) is found, else 0. A one-line tally
    goes to stderr.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        sites = scan_call_sites(paths)
    except ScanError as exc:
        print(f"error: {exc}", file=out)
        return 1
    problems = check_call_sites(sites)
    for problem in problems:
        print(problem, file=out)
    literal = sum(1 for s in sites if not s.is_dynamic)
    print(
        f"contractions check: {len(problems)} problem(s) in {literal} literal call site(s) "
        f"({len(sites) - literal} dynamic, not checked)",
        file=err,
    )
    return 1 if problems else 0


def run_scan(paths: Sequence[str], as_json: bool = False, out: TextIO | None = None) -> int:
    """`contractions scan PATH... [--json]`: list the vocabulary and the call sites."""
    out = sys.stdout if out is None else out
    try:
        vocabulary = scan_vocabulary(paths)
        sites = scan_call_sites(paths)
    except ScanError as exc:
        print(f"error: {exc}", file=out)
        return 1
    if as_json:
        payload = {
            "vocabulary": [
                {"subscripts": v.subscripts, "path": v.path, "line": v.line} for v in vocabulary
            ],
            "call_sites": [site.as_dict() for site in sites],
        }
        print(json.dumps(payload, indent=2), file=out)
        return 0

    grouped = distinct_subscripts(vocabulary)
    print(f"vocabulary: {len(grouped)} grouped string(s), {len(vocabulary)} occurrence(s)", file=out)
    width = max((len(key) for key in grouped), default=0)
    for key, entries in grouped.items():
        first = entries[0]
        more = f" (+{len(entries) - 1} more)" if len(entries) > 1 else ""
        print(f"  {key:<{width}}  {first.path}:{first.line}{more}", file=out)
    print(f"call sites: {len(sites)}", file=out)
    for site in sites:
        subscripts = "dynamic" if site.subscripts is None else repr(site.subscripts)
        keywords = ", ".join(
            f"{name}={'?' if value is None else value}" for name, value in site.len_keywords
        )
        if site.splats_kwargs:
            keywords = ", ".join(filter(None, [keywords, "**kwargs"]))
        print(f"  {site.location}  {site.callee}({subscripts}{', ' + keywords if keywords else ''})", file=out)
    return 0
