"""The ``contractions`` command line: ``demo``, ``explain``, ``check``, ``scan``, ``calibrate``, ``plans``.

    contractions demo                  # a short guided tour, checked as it runs
    contractions explain 'WCa,Caib,WCi->WCb' 4x4x2x3 2x3x5x6 4x4x2x5
    contractions explain 'WCo,WCa->Cao' 3x2x5 3x2x4 --len W=1
    contractions explain 'Wa,Wab,Wb->W' 2x3 2x3x4 2x4 --optimize greedy --memory-limit 1MB
    contractions check src/            # lint contract() call sites (exit 0 / 1 findings / 2 usage; alias: lint)
    contractions scan src/ --json      # vocabulary and call sites
    contractions calibrate --quick     # measure this machine's prices (--show: the profile in use)
    contractions plans --show          # the stored plans (--clear, --export FILE, --import FILE)
    contractions                       # this help (exit status 0, as --help)
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__
from .backends import registered_backends
from .errors import ContractionError, UnderdeterminedError

_EXTENTS = re.compile(r"[0-9]+(?:x[0-9]+)*", re.ASCII)
_NDIM = re.compile(r"#([0-9]+)", re.ASCII)
_SUPPLEMENT = re.compile(r"(?:len_)?([A-Z])=([0-9]+)", re.ASCII)
SHOWN_FITS = 6  # fitting --len values listed by `explain` on an underdetermined call
_SHAPE_HELP = ("one shape per operand: extents joined by 'x' (4x2x3), '()' or 'scalar' for a "
               "0-d operand, '#3' for an ndim without extents")


def _shape(text: str) -> tuple[int, ...] | int:
    """'4x2x3' -> (4, 2, 3); '()' or 'scalar' -> (); '#3' -> the bare ndim 3.

    Anything else (an empty part as in '3xx4', a sign, a non-integer) is a usage error.
    """
    if text in ("()", "scalar"):
        return ()
    ndim = _NDIM.fullmatch(text)
    if ndim:
        return int(ndim[1])
    if _EXTENTS.fullmatch(text):
        return tuple(int(part) for part in text.split("x"))
    raise argparse.ArgumentTypeError(
        f"bad shape {text!r}: write non-negative integer extents joined by 'x', e.g. 4x2x3 "
        "('()' for a scalar, '#3' for an ndim without extents)")


class _Supplements(argparse.Action):
    """``--len G=n`` (repeatable) into one dict {G: n}; a group given twice is a usage error."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        match = _SUPPLEMENT.fullmatch(str(values))
        if match is None:
            parser.error(f"argument --len: bad value {values!r}: write G=n with G one uppercase "
                         "group letter and n a non-negative integer, e.g. --len W=2")
        group, n = match[1], int(match[2])
        given = dict(getattr(namespace, self.dest, None) or {})
        if group in given:
            parser.error(f"argument --len: group {group} given twice (--len {group}={given[group]} "
                         f"and --len {group}={n}); pass each group's length once")
        given[group] = n
        setattr(namespace, self.dest, given)


def _optimize(text: str) -> Any:
    """--optimize: a preset name ('greedy'), 'false' for one einsum call, or a path '[(0, 1)]'."""
    if text.lower() in ("false", "direct"):
        return False
    if text.lstrip().startswith(("[", "(")):
        import ast

        try:
            path = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise argparse.ArgumentTypeError(
                f"bad path {text!r}: write pairs of operand positions, e.g. '[(0, 1), (0, 1)]'"
            ) from None
        return [tuple(step) if isinstance(step, (list, tuple)) else step for step in path]
    return text


def _memory_limit(text: str) -> Any:
    """--memory-limit: elements (1000000), a size ('256MB'), 'max_input', 'default' or 'none'."""
    if text.lower() == "none":
        return None
    if text.isdigit():
        return int(text)
    return text


EXPLAIN_EPILOG = """\
examples:
  contractions explain 'WCa,Caib,WCi->WCb' 4x4x2x3 2x3x5x6 4x4x2x5
  contractions explain 'WCo,WCa->Cao' 3x2x5 3x2x4 --len W=1
  contractions explain 'WCo,WCa->Cao'          (the string alone: what it needs)
  contractions explain 'Wa,Wab,Wb->W' 2x3 2x3x4 2x4 --optimize '[(1, 2), (0, 1)]'
  contractions explain 'WCa,Caib,WCi->WCb' 4x4x2x3 2x3x5x6 4x4x2x5 --memory-limit 200 --backend torch
  contractions explain 'ab,bc,Wc,Wd->Wad' 60x60 60x60 1000x60 1000x50 --memory-limit 20000 --plot plan.png

exit status:
  0  the report was printed (with shapes: the call is solved, expanded and planned)
  1  the string cannot decide some group's length without a --len: the report says
     which --len to pass (and, with shapes, which values fit them)
  2  usage error, or the call is invalid (syntax, operand count, sizes), or --plot cannot
     draw or write its file: message on stderr
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contractions",
        description="grouped-einsum: an einsum whose UPPERCASE letters are groups of zero or "
                    "more axes. Explain a call, run the demo, lint and scan call sites, calibrate the "
                    "prices or manage the stored plans.",
        epilog="run 'contractions COMMAND --help' for a command's options; 'contractions' alone "
               "prints this help and exits with status 0, as --help does")
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {__version__} (distribution grouped-einsum)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("demo", help="a short guided tour: contract, solve, explain, an error",
                   description="A short guided tour of the library; every printed claim is "
                               "checked against np.einsum (exit status 1 if one fails).")
    ex = sub.add_parser("explain", help="report how a grouped string is solved, expanded and planned",
                        description="Report how a grouped subscripts string is solved, expanded and\n"
                                    "planned for the given operand shapes, without running it.",
                        epilog=EXPLAIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("subscripts", help="the grouped subscripts string, e.g. 'WCa,Caib,WCi->WCb'")
    ex.add_argument("shapes", nargs="*", type=_shape, metavar="SHAPE", help=_SHAPE_HELP)
    ex.add_argument("--len", dest="supplements", action=_Supplements, default={}, metavar="G=n",
                    help="a group-length supplement, e.g. --len W=2 (repeatable, once per group)")
    ex.add_argument("--optimize", type=_optimize, default="auto", metavar="OPT",
                    help="the pairwise order, as contract's optimize=: a preset (auto, greedy, "
                         "optimal, dp, ...), an explicit path such as '[(0, 1), (0, 1)]', or "
                         "false for one einsum call (default: auto)")
    ex.add_argument("--memory-limit", type=_memory_limit, default="default", metavar="LIMIT",
                    help="the bound on memory beyond operands and result, as contract's "
                         "memory_limit=: elements (1000000), a size (256MB, 1GiB; 8-byte "
                         "elements assumed), max_input, none or default (the default)")
    ex.add_argument("--backend", default=None, metavar="NAME",
                    choices=[b.name for b in registered_backends()],
                    help="whose schedule to report: "
                         + ", ".join(b.name for b in registered_backends())
                         + " (default: numpy; jax, torch and dask need that library installed)")
    ex.add_argument("--plot", default=None, metavar="FILE",
                    help="also draw the schedule's contraction tree into FILE (format from its "
                         "suffix: .png, .svg, .pdf); needs matplotlib: pip install "
                         "'grouped-einsum[plot]'")
    cal = sub.add_parser("calibrate", help="measure this machine's prices and write the profile the "
                                           "planner uses",
                         description="Measure this machine's prices (BLAS products, stacks cut over the "
                                     "cores, copies, reads from memory, einsum's loop, Python "
                                     "overheads; caches and threads from the OS) and "
                                     "write them as the profile the planner uses: the user cache "
                                     "directory by default, CONTRACTIONS_PROFILE=FILE selects another.")
    cal.add_argument("--quick", action="store_true", help="a smaller measurement, under a minute")
    cal.add_argument("--output", metavar="FILE", default=None,
                     help="write the profile here instead of the user cache directory")
    cal.add_argument("--show", action="store_true",
                     help="measure nothing: print the profile in use, where it came from and how "
                          "it differs from the built-in defaults")
    plans = sub.add_parser(
        "plans", help="show, clear, export or import the stored plans (the full searches kept "
                      "for later processes)",
        description="The plan store: what the full search decided for each structure, kept so "
                    "that a later process runs it at once. It lives beside the calibrated profile; "
                    "CONTRACTIONS_PLANS=DIR selects another directory, CONTRACTIONS_PLANS=off turns it "
                    "off. Export on one node and import on identical ones (same version and "
                    "profile) to share the plans.")
    what = plans.add_mutually_exclusive_group()
    what.add_argument("--show", action="store_true", help="where the store is and what it holds (the default)")
    what.add_argument("--clear", action="store_true", help="remove the store")
    what.add_argument("--export", metavar="FILE", help="write every stored plan to a JSON file")
    what.add_argument("--import", dest="import_from", metavar="FILE",
                      help="add the plans of an exported file (its version and profile must match)")
    from .lint import add_commands

    add_commands(sub)  # check, scan
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:  # bare `contractions`: the help, as --help gives it
            parser.print_help()
            return 0
        return _run(args)
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
        return _explain(args.subscripts, args.shapes, args.supplements, optimize=args.optimize,
                        memory_limit=args.memory_limit, backend=args.backend, plot=args.plot)
    if args.command == "calibrate":
        return _calibrate(args.quick, args.output, args.show)
    if args.command == "plans":
        return _plans(args.clear, args.export, args.import_from)
    from .lint import run_command

    return run_command(args)  # check, scan


def _plans(clear: bool, export: str | None, import_from: str | None) -> int:
    from .calls.store import ENVIRONMENT_VARIABLE, active_store

    store = active_store()
    if store is None:
        print(f"the plan store is off ({ENVIRONMENT_VARIABLE}=off)")
        return 0 if not (export or import_from) else 2
    try:
        if clear:
            store.clear()
            print(f"removed {store.path}")
        elif export is not None:
            print(f"wrote {store.export(export)} plans to {export}")
        elif import_from is not None:
            print(f"added {store.import_from(import_from)} plans to {store.path}")
        else:
            found = store.entries()
            print(f"plan store: {store.path}" + ("" if store.path.exists() else " (not written yet)"))
            print(f"header: version {store.header['version']}, profile {store.header['profile']}")
            print(f"{len(found)} plans, {store.size():,} bytes (bound {store.max_bytes:,})")
            if store.ignored:
                print("ignored by this process: written by another version or profile "
                      "(contractions plans --clear starts it afresh)")
    except (OSError, ValueError) as exc:
        print(f"contractions plans: {exc}", file=sys.stderr)
        return 2
    return 0


def _calibrate(quick: bool, output: str | None, show: bool) -> int:
    from .model.profile import ENVIRONMENT_VARIABLE, Profile, active_profile, save_profile, user_profile_path

    if show:
        profile = active_profile()
        print(f"profile in use: {profile.describe()}")
        if not profile.source:
            print(f"(no {ENVIRONMENT_VARIABLE}, and no calibrated profile at {user_profile_path()})")
        else:
            print(f"measured on: {profile.machine}")
        print(f"priced with {profile.blas_threads} BLAS threads; memory past "
              f"{profile.memory_threshold:,} elements, cache blocks of {profile.cache_elements:,}")
        changed = profile.differences_from(Profile())
        if changed:
            print("differs from the built-in defaults in:")
            for name, default, value in changed:
                print(f"  {name:40s} {value:<12g} (default {default:g})")
        else:
            print("identical to the built-in defaults")
        return 0
    from .calibrate import FULL, QUICK, Progress, calibrate

    target = output if output is not None else user_profile_path()
    try:
        # (a full run takes minutes: on a terminal, stderr shows how far each stage has come)
        profile = calibrate(QUICK if quick else FULL, log=lambda line: print(line, flush=True),
                            progress=Progress(sys.stderr))
        written = save_profile(profile, target)
    except OSError as exc:
        print(f"contractions calibrate: cannot write the profile {target}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {written}")
    if output is not None:
        print(f"plan with it: {ENVIRONMENT_VARIABLE}={written}")
    else:
        print("it prices every plan from the next import of contractions")
    return 0


def _explain(subscripts: str, shapes: list[tuple[int, ...] | int], given: dict[str, int],
             optimize: Any = "auto", memory_limit: Any = "default", backend: str | None = None,
             plot: str | None = None) -> int:
    """Print the report (and with ``plot``, draw it into that file); exit status 0 (printed),
    1 (needs a --len), 2 (invalid call, or the figure cannot be drawn or written)."""
    from .explaining import explain
    from .solver import identifiability

    kwargs: dict[str, Any] = {f"len_{g}": n for g, n in given.items()}
    scheduling = [flag for flag, value, default in (("--optimize", optimize, "auto"),
                                                    ("--memory-limit", memory_limit, "default"),
                                                    ("--backend", backend, None))
                  if value != default]
    try:
        info = identifiability(subscripts, sorted(given))
        if not shapes:
            if scheduling:
                verb = "shapes" if len(scheduling) == 1 else "shape"
                print(f"error: {' and '.join(scheduling)} {verb} the schedule, which needs one "
                      "SHAPE per operand (extents such as 4x2x3)", file=sys.stderr)
                return 2
            if plot is not None:
                print("error: --plot draws the schedule, which needs one SHAPE per operand "
                      "(extents such as 4x2x3)", file=sys.stderr)
                return 2
            print(_string_report(subscripts, info, given))
            return 1 if info.needs_supplement else 0
        text = explain(subscripts, *shapes, optimize=optimize, memory_limit=memory_limit,
                       backend=backend, **kwargs)
        print(text)
        if plot is not None:
            return _save_plot(text, plot)
        return 0
    except UnderdeterminedError:
        print(_string_report(subscripts, info, given, shapes))
        return 1
    except (ContractionError, TypeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:  # --backend jax/torch/dask without that library
        print(f"error: --backend {backend}: {exc}; install it (README.md, Install) or pick "
              "another backend", file=sys.stderr)
        return 2


def _save_plot(text: Any, file: str) -> int:
    """--plot: the report's figure written to ``file``; exit status 0, or 2 with the reason."""
    try:
        text.plot().savefig(file)
    except ImportError as exc:
        print(f"error: --plot: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:  # an unwritable path, an unknown format suffix
        print(f"error: --plot {file}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {file}")
    return 0


def _string_report(subscripts: str, info: Any, given: dict[str, int],
                   shapes: Sequence[tuple[int, ...] | int] = ()) -> str:
    """What the string decides by itself and, when it needs more, which --len to pass."""
    pinned = "".join(f" --len {g}={n}" for g, n in sorted(given.items()))
    lines = [f"subscripts      {subscripts!r}",
             f"identifiability {info.describe()}" + (f" (with{pinned})" if pinned else ""),
             "co-travelling   " + ("; ".join("".join(r) + " (only the total matters)"
                                             for r in info.runs if len(r) > 1) or "none")]
    if not info.needs_supplement:
        lines.append("pass one SHAPE per operand to see the expansion, the path and its cost")
        return "\n".join(lines)
    lines.append("the string alone cannot decide this, whatever the shapes: every call with it "
                 "needs the same supplement")
    # Either one of the candidates alone completes the solve, or a whole completing set is needed.
    options = [(g,) for g in info.candidates] or [tuple(info.completion)]
    lines.append("pass one of:" if len(options) > 1 else "pass:")
    for groups in options:
        flags = " ".join(f"--len {g}=<n>" for g in groups)
        fits = _fitting_values(subscripts, shapes, given, groups) if shapes else None
        if fits is None:
            lines.append(f"  {flags}")
        elif fits:
            shown = ", ".join(" ".join(f"--len {g}={n}" for g, n in zip(groups, values))
                              for values in fits[:SHOWN_FITS])
            more = f", ... ({len(fits)} in all)" if len(fits) > SHOWN_FITS else ""
            lines.append(f"  {flags}   these shapes allow: {shown}{more}")
        else:
            lines.append(f"  {flags}   (no value fits these shapes: check the operands' order "
                         "and ndims)")
    keywords = ", ".join(f"len_{g}=<n>" for g in options[0])
    lines.append(f"in Python the supplement is a keyword ({keywords}), with n computed from data "
                 "the caller has, never a guessed literal")
    return "\n".join(lines)


def _fitting_values(subscripts: str, shapes: Sequence[tuple[int, ...] | int], given: dict[str, int],
                    groups: tuple[str, ...], limit: int = 4096) -> list[tuple[int, ...]]:
    """Every assignment of lengths to ``groups`` under which the call solves and plans."""
    from .explaining import explain

    top = max((s if isinstance(s, int) else len(s)) for s in shapes)
    space = list(itertools.islice(itertools.product(range(top + 1), repeat=len(groups)), limit))
    fits = []
    for values in space:
        kwargs: dict[str, Any] = {f"len_{g}": n for g, n in {**given, **dict(zip(groups, values))}.items()}
        try:
            explain(subscripts, *shapes, **kwargs)
        except (ContractionError, TypeError):
            continue
        fits.append(values)
    return fits


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
