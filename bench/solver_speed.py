"""Cold-cache cost of the string-level stages on adversarial inputs: `identifiability` on
strings using all 26 groups, solving (`solve_lengths`) strings of thousands of terms that
share groups, and `parse` on strings of 10^5 characters (valid and not).

Every measurement clears the caches first (parse's included, so the identifiability times
contain parsing), so it is the cost of a string never seen before; each is repeated and the
median reported, with the worst string last::

    python bench/solver_speed.py            # both tables
    python bench/solver_speed.py --repeat 3 # fewer repetitions

    python bench/solver_speed.py --terms 100  # smoke run: small many-term cases

Targets (not asserted anywhere): identifiability <= 50 ms and parse <= 50 ms per string;
solving 1,000 terms well under 0.1 s and 10,000 under 1 s (linear in the number of terms).
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contractions import ContractionError, identifiability, parse, solve_lengths  # noqa: E402
from contractions import parser as _parser  # noqa: E402
from contractions import solver as _solver  # noqa: E402

U = string.ascii_uppercase


def _random_terms(rng: random.Random, count: int, p: float) -> str:
    """``count`` random subsets of the 26 groups; groups no subset drew join the last one."""
    terms = ["".join(g for g in U if rng.random() < p) for _ in range(count)]
    missing = "".join(g for g in U if not any(g in t for t in terms))
    terms[-1] = "".join(g for g in U if g in terms[-1] + missing)
    return ",".join(t or "a" for t in terms)


def _paired_terms(rng: random.Random, count: int, pairs: int) -> str:
    """Terms holding both or neither of each pair (X, Y), apart: equal columns, no runs."""
    chosen = [[k for k in range(pairs) if rng.random() < 0.5] for _ in range(count)]
    rest = U[2 * pairs:]
    return ",".join("".join(U[k] for k in ks) + "".join(g for g in rest if rng.random() < 0.3)
                    + "".join(U[pairs + k] for k in ks) or "a" for ks in chosen)


def identifiability_cases() -> dict[str, str]:
    rng = random.Random(0)
    reversed_output = U[::-1]
    everything = "," + U
    return {
        "one term, output reversed (25 pins)": U + "->" + reversed_output,
        "13 runs of 2, one equation": U + "->" + "".join(U[i:i + 2] for i in range(24, -1, -2)),
        "runs of 1..5, one equation": "ABCDEFGHIJKLMNOPQRSTUVWXYZ->"
                                      + "ONMLKJ" + "ABCDE" + "FGHI" + "Z" + "PQRSTUVWXY",
        "pairs as terms": ",".join(U[i:i + 2] for i in range(0, 26, 2)) + "->" + reversed_output,
        "sliding triples": ",".join(U[i:i + 3] for i in range(24)) + "->" + reversed_output,
        "two halves": U[:13] + "," + U[13:] + "->" + reversed_output,
        "6 random terms": _random_terms(rng, 6, 0.5) + "->" + reversed_output,
        "13 random terms": _random_terms(rng, 13, 0.5) + "->" + reversed_output,
        "25 random terms": _random_terms(rng, 25, 0.5) + "->" + reversed_output,
        "200 random terms": _random_terms(rng, 200, 0.3) + "->" + reversed_output,
        "2000 random terms": _random_terms(rng, 2000, 0.2) + "->" + reversed_output,
        "2000 terms, one pair always together": _paired_terms(rng, 2000, 1) + everything
                                                + "->" + reversed_output,
        "7000 terms, 13 pairs always together": _paired_terms(rng, 7000, 13) + everything
                                                + "->" + reversed_output,
        "mixed run weights, 8 terms": ",".join(
            ["ABCDE", "FGHI", "JKL", "MN", "OPQRSTUVWXYZ", "ABCDEFGHI", "JKLMN", "OPQ"])
            + "->" + "ABCDE" + "IHGF" + "LKJ" + "NM" + reversed_output[:12],
    }


def parse_cases() -> dict[str, str]:
    n = 100_000
    perms = ",".join("".join(p) for p in itertools.islice(itertools.permutations(U, 3), 25_000))
    return {
        "'->' * 50000 (error)": "->" * (n // 2),
        "'a,' * 50000 (valid)": "a," * (n // 2 - 1) + "a->a",
        "'W a , ' * 16666 (valid)": "W a , " * (n // 6) + "K->WK",
        "3-group permutations (valid)": perms[:n - 2].rstrip(",").rsplit(",", 1)[0] + "->",
        "26 groups + 10^5 letters + repeat": U + "a" * (n - 30) + "Z->",
        "an empty term at the end": "a," * (n // 2 - 2) + ",a->",
        "10^5 dots": "." * n,
        "repeated output letter": "a" * (n // 2) + "->" + "a" * (n // 2 - 2),
        "tabs between repeated groups": "W" + "\t" * (n - 5) + "W->W",
    }


def many_term_cases(terms: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Strings of ``terms`` input terms sharing a few groups, with ndims that solve."""
    rng = random.Random(1)
    k = terms
    mixed = [rng.choice(["WCa", "Cab", "WKa", "Ka"]) for _ in range(k - 1)] + ["WKCa"]
    width = {"W": 2, "C": 1, "K": 3}
    return {
        f"'Wa,' * {k - 1} + 'Wa->W'": ("Wa," * (k - 1) + "Wa->W", (3,) * k),
        f"{k} terms over W, C, K": (",".join(mixed) + "->WKC",
                                    tuple(sum(width.get(ch, 1) for ch in t) for t in mixed)),
        f"{k} terms, 26 groups, one each": (
            ",".join(U[i % 26] + "a" for i in range(k)) + "->" + U, (3,) * k),
    }


def _time(call: Callable[[], object], clear: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        clear()
        start = time.perf_counter()
        try:
            call()
        except ContractionError:
            pass
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _clear_all() -> None:
    _parser._parse.cache_clear()
    _solver._runs_of.cache_clear()
    _solver._identifiability.cache_clear()
    _solver.solve.cache_clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--terms", type=int, nargs="*", default=[1000, 10000],
                    help="numbers of terms of the many-term solving cases")
    args = ap.parse_args()

    print("solve_lengths on many terms, cold caches (median of", args.repeat, "runs)")
    for terms in args.terms:
        for name, (s, ndims) in many_term_cases(terms).items():
            t = _time(lambda s=s, ndims=ndims: solve_lengths(s, ndims), _clear_all, args.repeat)
            print(f"  {t * 1e3:8.2f} ms  {name}")
    print()

    print("identifiability, cold caches (median of", args.repeat, "runs)")
    worst = 0.0
    for name, s in identifiability_cases().items():
        assert len(parse(s).groups) == 26, name
        t = _time(lambda s=s: identifiability(s), _clear_all, args.repeat)
        info = identifiability(s)
        worst = max(worst, t)
        print(f"  {t * 1e3:8.2f} ms  {name:38s} minimum_pins={info.minimum_pins}")
    print(f"  worst {worst * 1e3:.2f} ms\n")

    print("parse, cold cache (median of", args.repeat, "runs)")
    worst = 0.0
    for name, s in parse_cases().items():
        t = _time(lambda s=s: parse(s), _parser._parse.cache_clear, args.repeat)
        worst = max(worst, t)
        print(f"  {t * 1e3:8.2f} ms  {name:38s} ({len(s)} characters)")
    print(f"  worst {worst * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
