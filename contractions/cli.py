"""The ``contractions`` command line: ``explain``, ``check`` and ``scan``.

    contractions demo                  # a short guided tour, checked as it runs
    contractions explain 'WCa,Caib,WCi->WCb' 4x4x2x3 2x3x5x6 4x4x2x5
    contractions explain 'WCo,WCa->Cao' 3x2x5 3x2x4 --len W=1
    contractions check src/            # lint contract() call sites (exit 0 / 1 findings / 2 usage)
    contractions scan src/ --json      # vocabulary and call sites
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .errors import ContractionError


def _shape(text: str) -> tuple[int, ...] | int:
    """'4x2x3' -> (4, 2, 3); '()' or 'scalar' -> (); a bare 'n' with a leading '#' -> ndim n."""
    text = text.strip()
    if text in ("()", "scalar", "x"):
        return ()
    if text.startswith("#"):
        return int(text[1:])
    try:
        return tuple(int(part) for part in text.replace(",", "x").split("x") if part != "")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"bad shape {text!r}: write extents joined by 'x', e.g. 4x2x3 ('()' for a scalar, "
            "'#3' for an ndim without extents)") from None


def _supplement(text: str) -> tuple[str, int]:
    name, _, value = text.partition("=")
    name = name.strip()
    if name.startswith("len_"):
        name = name[4:]
    try:
        return name, int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad --len {text!r}: write e.g. --len W=2") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="contractions", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="a short guided tour: contract, solve, explain, an error")
    ex = sub.add_parser("explain", help="report how a grouped string is solved, expanded and planned")
    ex.add_argument("subscripts")
    ex.add_argument("shapes", nargs="*", type=_shape,
                    help="one shape per operand, e.g. 4x2x3 (or #3 for just an ndim)")
    ex.add_argument("--len", dest="supplements", action="append", type=_supplement, default=[],
                    metavar="G=n", help="a group-length supplement, e.g. --len W=2 (repeatable)")
    from .lint import add_commands

    add_commands(sub)  # check, scan
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(build_parser().parse_args(argv))
    except BrokenPipeError:
        # `contractions scan . | head`: the reader left; that is not an error of ours.
        # Point stdout at devnull so the interpreter's final flush does not complain again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from .demo import run_demo

        return run_demo()
    if args.command == "explain":
        from .api import explain

        try:
            print(explain(args.subscripts, *args.shapes,
                          **{f"len_{g}": n for g, n in args.supplements}))
        except (ContractionError, TypeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    from .lint import run_command

    return run_command(args)  # check, scan


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
