"""The prices: one frozen `Profile` holding every number the time models use (numpy and torch).

The built-in defaults were fitted on the development machine (a 2-core x86 VM, OpenBLAS 0.3.31;
the comments below say how each was measured); ``contractions calibrate`` measures them on the
user's machine and writes a profile file (`docs/calibration.md`).  Which profile prices the plans
is chosen once, at import (`active_profile`):

1. ``CONTRACTIONS_PROFILE=FILE`` in the environment: that file;
2. else the user's calibrated profile, ``profile.json`` in the user cache directory
   (`user_profile_path`), when it exists;
3. else the built-in defaults, with this machine's cache sizes and BLAS thread count.

A file that cannot be read gives one `ProfileWarning` naming it, and the defaults price the plans.
The cost models take a profile (``NumpyCostModel(profile=...)``, ``TorchCostModel(profile=...)``);
tests pass their own, so no test depends on the machine it runs on.

>>> p = Profile()                       # the reference machine: no host probing
>>> p.ns_per_mac, p.blas_threads, p.memory_threshold
(0.0272, 2, 1048576)
>>> replace(p, blas_threads=1).describe()
'built-in defaults'
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .host import Machine, this_machine

__all__ = ["ENVIRONMENT_VARIABLE", "Profile", "ProfileError", "ProfileWarning", "active_profile",
           "builtin_profile", "cache_prices", "load_profile", "save_profile", "select_profile",
           "user_profile_path"]

#: The environment variable that names a profile file to plan with.
ENVIRONMENT_VARIABLE = "CONTRACTIONS_PROFILE"
#: What a profile file says it is (checked on load).
FORMAT = "grouped-einsum profile 1"


class ProfileWarning(UserWarning):
    """A profile file could not be used; the built-in defaults price the plans instead."""


class ProfileError(ValueError):
    """A profile file that cannot be read: missing, not JSON, or holding a bad price."""


@dataclass(frozen=True)
class Profile:
    """Every price and threshold of the numpy and torch time models, and what they were
    measured on.  Defaults: the development machine's fitted values (`builtin_profile` adds
    this machine's caches and threads).  ``source`` is the file it was read from ('' for the
    built-in defaults), ``measured`` when, ``machine`` on what.
    """

    # --------------------------------------------------------------- BLAS products, copies
    # Fitted by `contractions.model.calibrate` (formerly bench/refit_model.py): stacks of
    # (m x k) @ (k x n) products with m, n in 1..400, k in 2..400, up to 8192 per stack, every
    # stack within two L2 caches and written into a preallocated result; least squares on
    # relative error (on the VM: median error 21%, 90% of points within -42%/+43%):
    #   matmul of `calls` stacked products ~ calls * (30 + 0.0272 m k n + 0.214 (m k + k n + m n))
    #       (and ~0.9 us per np.matmul call, fitted apart and left out: every kernel call pays one)
    #       An earlier fit from stacks up to 32 MB read about 2x higher: it took in reads from
    #       memory and first-touch writes, which `ns_per_fresh_element` and the memory prices
    #       below price apart.  Large products are threaded (`thread_gain`, below).
    #   gathering an operand into a new layout ~ 1.5 per element (0.6 for the strided copy, the
    #       rest for first-touching the freshly allocated pages: ~1 us per 4 KiB page fault)
    #   a transposed right factor in a batched product: ~0.75 per result element more (OpenBLAS
    #       is slower on it: (1296,64,6,6) 695 vs 305 us plain, (256,64,16,16) 332 vs 182 us); a
    #       transposed left factor, or either one in a single 2-D product, costs nothing extra.
    ns_per_matmul_call: float = 30.3
    ns_per_mac: float = 0.0272
    ns_per_matrix_element: float = 0.214
    ns_per_copied_element: float = 1.5
    ns_per_batched_right_transpose_element: float = 0.75
    # A result buffer above glibc's mmap threshold (128 KiB) is fresh pages every call: ~0.9 ns
    # per element beyond the write itself (the 1.5 ns of a copied element minus its 0.6 ns
    # strided copy).  Small results reuse warm memory.  (A schedule's several large
    # intermediates are not reused warm: pricing them warm drew paths through 26 MB
    # intermediates that ran 2x slower; dev/decisions.md, 35.)
    ns_per_fresh_element: float = 0.9
    fresh_buffer_elements: int = 16384
    # The call's own result is the exception below glibc's largest dynamic mmap threshold
    # (32 MiB): in a caller's loop the previous result is freed after the next is made and the
    # next lands in warm pages (measured: 1-31 MB results within 0.97-1.09x of `out=`, 36 MB
    # 1.23x).  Its first touch is priced only from this many float64 elements.
    warm_result_max_elements: int = 1 << 22
    # A product of at least 2 * `threaded_product_macs` multiply-adds runs faster on several
    # threads (one per `threaded_product_macs`, up to `blas_threads`), each thread past the
    # first adding `thread_gain` of a thread's speed.  OpenBLAS splits products from 2 * 2**18,
    # but below about 2**21 the split gains nothing or loses (decision 57).
    threaded_product_macs: int = 1 << 20
    thread_gain: float = 0.5
    # A stack of products each below `split_max_macs` (OpenBLAS's own threading threshold)
    # runs on one core: its leading axis is cut into one part per BLAS thread, run at once,
    # each part past the first adding `split_gain` of one's speed, for `ns_per_split` of
    # hand-over (a pool thread's wake-up: 64 us measured on the VM; both measured by
    # `contractions calibrate`, a gain of 0 where the cut does not pay).  Below `split_min_macs`
    # multiply-adds a product, the parts contend (OpenBLAS's buffer lock, we suppose: 165-5,184
    # ran 0.6-1.4x split, 24,576-373,248 1.3-1.9x; decision 63).
    split_max_macs: int = 1 << 19
    split_min_macs: int = 1 << 14
    split_gain: float = 0.6
    ns_per_split: float = 60_000.0

    # ------------------------------------------------------ one einsum call against steps
    # The direct strategy runs numpy's einsum as ONE nested loop over every distinct label;
    # chosen by measurement (bench/direct_threshold.py): "direct iff naive count <= T", T 4096
    # up to 7 labels, 512 beyond, cost 1.051x the per-point best over ~1350 points.
    direct_max_naive: int = 4096
    direct_max_naive_many_labels: int = 512
    direct_few_labels: int = 7
    # A vector-like step whose per-batch matrix is at most this many multiply-adds runs faster
    # as einsum's SIMD loop than as one BLAS call per batch element.
    einsum_vector_step_max_macs: int = 256
    # A stack of dot products runs as stacked (1 x k) @ (k x 1) matmuls once the dots are this
    # long (einsum faster up to k = 32, a tie at 48, matmul 1.1-1.4x faster from 64 up).
    min_dot_matmul_length: int = 64
    # einsum's C loop: ~0.5 ns per multiply-add, ~1.6 when its innermost loop reads an operand
    # at a stride (no SIMD; bench/read_patterns.py), and `ns_per_inner_loop` each time its
    # innermost loop restarts (numpy's iterator, ~12 ns: a (65536,4,4) product of two strided
    # blocks ran at 9.2 ns an element against 2.1 with 20-long runs).
    ns_per_einsum_mac: float = 0.5
    ns_per_strided_einsum_mac: float = 1.6
    ns_per_inner_loop: float = 12.0
    # A broadcast outer product ('bi,bj->bij') as einsum's loop or as np.multiply of broadcast
    # views (bench/kernel_choice.py --outer: einsum 0.42 ns an element plus 4.4 a loop, multiply
    # 0.58 plus 7.2).  These pick the kernel only; the step's cost stays `multiply_ns`
    # (decision 33).  A product written in another order than its larger operand's goes to
    # einsum's loop from this many result elements (decision 42).
    permuted_within_einsum_min_elements: int = 1 << 18
    ns_per_outer_einsum_element: float = 0.42
    ns_per_outer_einsum_loop: float = 4.4
    ns_per_outer_multiply_element: float = 0.58
    ns_per_outer_multiply_loop: float = 7.2

    # --------------------------------------------------------------- Python, per call/block
    # Per block of a blocked schedule: slicing, one call per step, the write into the result
    # (~9 us for a block of two tiny steps).  Per unblocked call: `contract`'s lookup and the
    # program's entry (~2.5 us), and per step its views, reshapes and numpy call (~2 us).
    ns_per_block: float = 4000.0
    ns_per_block_step: float = 2500.0
    ns_per_call: float = 2500.0
    ns_per_step: float = 2000.0
    # The planner's own Python (calls/tiers.py): the full search's fixed part (plan checks,
    # the limit, blocking tests), its price per step it lowers (every candidate path of n
    # operands has n - 1 steps) and, past four operands, its path searches (opt_einsum's greedy
    # and dp, cotengra's).  Measured on the development VM (bench/first_call.py): 18 paths of
    # 3 steps in ~4.4 ms, 3 paths of 2 steps in ~0.7 ms.  Where the memory limit asks for
    # blocks, the search for them adds `search_blocks_ns` (chunkings of the two fastest orders
    # priced, the chosen blocks lowered: 6.8-10 ms for the large 3-4 operand calls there).
    search_fixed_ns: float = 150_000.0
    search_step_ns: float = 75_000.0
    search_paths_ns: float = 10_000_000.0
    search_blocks_ns: float = 7_500_000.0

    # ------------------------------------------------------------------- caches and memory
    # Derived from the cache sizes (`cache_prices`): a bandwidth-bound chain is made in blocks
    # of `cache_blocks_per_l2` L2 caches (`cache_elements`; bench/cache_blocks.py) when its
    # steps do at most `cache_block_max_flops_per_element`; arrays past a quarter of the last
    # level (`memory_threshold`, float64 elements) are read from memory; a gather whose
    # permutation stays within an L2 (`gather_window`) sweeps its source once.  Defaults: a
    # 1 MiB L2 and a 32 MiB L3.
    cache_blocks_per_l2: int = 4
    cache_block_max_flops_per_element: int = 16
    cache_elements: int = 4 * (1 << 20) // 8
    memory_threshold: int = (32 << 20) // 4 // 8
    gather_window: int = (1 << 20) // 8
    # Reading from memory, for arrays past `memory_threshold`:
    #   streaming a matmul factor ~0.8 ns an element more (a batched matrix-vector product over
    #       32 MB ran at 1.06-1.3 ns an element, 0.3 in cache); into einsum's loop nothing more
    #       (decision 34);
    #   runs of up to `far_run_elements` whose starts are a page or more apart: ~50 ns a run
    #       plus ~10 a line (the prefetcher does not follow jumps across pages);
    #   near runs (starts 256 B to a page apart, read as more than a few streams): ~30 ns a run
    #       (decision 32);
    #   shorter runs: more pages than the first-level TLB holds (`tlb_pages`) ~5 ns an
    #       element, more lines than `memory_threshold` holds ~10;
    #   up to `streams_prefetched` interleaved streams read at the contiguous speed.
    ns_per_streamed_element: float = 0.8
    ns_per_einsum_streamed_element: float = 0.0
    ns_per_far_run: float = 50.0
    ns_per_near_run: float = 30.0
    ns_per_far_line: float = 10.0
    ns_per_paged_element: float = 5.0
    ns_per_evicted_element: float = 10.0
    tlb_pages: int = 64
    streams_prefetched: int = 16
    far_run_elements: int = 64
    # A layout chosen by the memory prices replaces the in-cache choice only when modelled at
    # least this much faster (bench/model_ab.py: letting them decide every layout ran 0.88x at
    # the geometric mean; with this margin 1.20x).
    layout_memory_worth: float = 1.5
    # A gather sweeping its source `passes` times costs 1 + gain * log2(passes) flat copies
    # (decision 38).
    hard_gather_gain: float = 0.15
    #: OpenBLAS's thread count the products are priced with.
    blas_threads: int = 2

    # ------------------------------------------------------------------- the roofline
    # No step runs faster than its bytes at the memory system's speed or its FLOPs at the
    # products' peak: every step price is floored there (`NumpyCostModel.roofline_ns`).  The
    # bandwidths count bytes read plus bytes written by np.copyto of float64 arrays: `cache_`
    # while the arrays touched fit within `memory_threshold` elements, `memory_` past it (on
    # the VM 80-96 GB/s within 8 MB, 28-33 GB/s past the 32 MB L3); the peak is the best
    # float64 square matmul with every BLAS thread (182 GFLOP/s; `builtin_profile` puts this
    # CPU's estimate in its place where it has one).  `contractions calibrate` measures all
    # three (dev/decisions.md 57, 62).
    cache_bytes_per_ns: float = 80.0
    memory_bytes_per_ns: float = 25.0
    peak_flops_per_ns: float = 180.0

    # ------------------------------------------------------------------------------ torch
    # Eager torch (`contractions.model.torch_prices`; bench/refit_torch_model.py fits them): one
    # operation's dispatch; one matrix product of a batched product; one torch.einsum call and
    # each pair inside it; a multiply-add; a gathered element; the share of each pair's operand
    # elements torch's einsum copies; and the margin by which the steps must beat one einsum.
    torch_ns_per_op: float = 1500.0
    torch_ns_per_matmul_call: float = 60.0
    torch_ns_per_einsum_call: float = 6000.0
    torch_ns_per_einsum_pair: float = 2500.0
    torch_ns_per_mac: float = 0.02
    torch_ns_per_copied_element: float = 0.4
    torch_einsum_copy_share: float = 0.75
    torch_steps_margin: float = 0.5

    # --------------------------------------------------------------------------- provenance
    machine: Machine = Machine()
    measured: str = ""
    source: str = ""
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # schedules are cached per cost model, which hashes its profile: hash the fields once
        object.__setattr__(self, "_hash", hash(tuple(getattr(self, f.name) for f in price_fields())
                                               + (self.machine, self.measured, self.source)))

    def __hash__(self) -> int:
        return self._hash

    def prices(self) -> dict[str, float | int]:
        """Every price and threshold by name (what a profile file stores)."""
        return {f.name: getattr(self, f.name) for f in price_fields()}

    def describe(self, here: Machine | None = None) -> str:
        """Which profile this is, in one line (``explain`` prints it): the built-in defaults,
        or the file, when and on what it was measured, and how ``here`` differs from that
        machine (``here``: this one, probed; give it to compare with another)."""
        if not self.source:
            if self.peak_flops_per_ns != Profile.peak_flops_per_ns and self.peak_flops_per_ns > 0:
                return f"built-in defaults (peak {self.peak_flops_per_ns:.0f} GFLOP/s: this CPU's vector width and clock)"
            return "built-in defaults"
        text = f"profile {self.source}"
        if self.measured or self.machine.cpu:
            text += (f" (measured {self.measured[:10] or 'at an unknown date'} on "
                     f"{self.machine.cpu or 'an unknown CPU'}, {self.machine.threads} BLAS threads)")
        differences = self.machine.differences(this_machine() if here is None else here)
        if differences:
            text += "; this machine differs: " + ", ".join(differences) + " (re-run contractions calibrate)"
        return text

    def differences_from(self, other: Profile) -> list[tuple[str, Any, Any]]:
        """(name, other's value, this one's) for every price that differs."""
        mine, theirs = self.prices(), other.prices()
        return [(name, theirs[name], mine[name]) for name in mine if mine[name] != theirs[name]]


@functools.lru_cache(maxsize=1)
def price_fields() -> tuple[Any, ...]:
    """The `Profile` fields that are prices (not provenance)."""
    return tuple(f for f in fields(Profile) if f.name not in ("machine", "measured", "source", "_hash"))


def cache_prices(l2_bytes: int, l3_bytes: int, blocks_per_l2: int = 4) -> dict[str, int]:
    """The thresholds that follow from the cache sizes (float64 elements).

    >>> cache_prices(1 << 20, 32 << 20)
    {'cache_elements': 524288, 'memory_threshold': 1048576, 'gather_window': 131072}
    """
    return {"cache_elements": blocks_per_l2 * l2_bytes // 8,
            "memory_threshold": l3_bytes // 4 // 8,
            "gather_window": l2_bytes // 8}


#: The share of the data-sheet peak a float64 matrix product reaches (what the roofline's peak
#: is: `contractions calibrate` times the best square product): on the AMD EPYC VM of
#: dev/decisions.md 62, 74 GFLOP/s of 78 calibrated, 70 in a busy benchmark run.
ATTAINED_PEAK_SHARE = 0.9


def builtin_profile(machine: Machine | None = None) -> Profile:
    """The built-in defaults with this machine's (or ``machine``'s) cache sizes, BLAS thread
    count and, where its CPU says, arithmetic peak: what an uncalibrated machine plans with.

    The peak is one core's (`Machine.core_flops_per_ns`, read off its vector width and clock)
    times the cores BLAS runs on, times the share of it a matrix product reaches
    (`ATTAINED_PEAK_SHARE`); it floors the price of a step bound by its FLOPs, so a machine
    slower than the one the defaults were fitted on gets no price below its roofline
    (dev/decisions.md 62).  The other prices stay as fitted: only ``calibrate`` measures them.

    >>> builtin_profile(Machine(cores=2, threads=2, core_flops_per_ns=40.0)).peak_flops_per_ns
    72.0
    >>> builtin_profile(Machine(cores=2, threads=2)).peak_flops_per_ns == Profile.peak_flops_per_ns
    True
    """
    machine = this_machine() if machine is None else machine
    caches = cache_prices(machine.l2_bytes, machine.l3_bytes, Profile.cache_blocks_per_l2)
    threads = max(1, machine.threads)
    peak = Profile.peak_flops_per_ns
    if machine.core_flops_per_ns > 0:
        peak = (machine.core_flops_per_ns * max(1, min(threads, machine.cores or threads))
                * ATTAINED_PEAK_SHARE)
    return replace(Profile(), blas_threads=threads, cache_elements=caches["cache_elements"],
                   memory_threshold=caches["memory_threshold"], gather_window=caches["gather_window"],
                   peak_flops_per_ns=peak)


def user_profile_path() -> Path:
    """Where ``contractions calibrate`` writes the user's profile by default (the user cache
    directory, by `platformdirs`)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("grouped-einsum")) / "profile.json"


def save_profile(profile: Profile, path: str | os.PathLike[str]) -> Path:
    """Write ``profile`` as JSON to ``path`` (its folder made if needed); returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    m = profile.machine
    data = {"format": FORMAT,
            "measured": profile.measured or datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
            "machine": {"cpu": m.cpu, "cores": m.cores, "blas": m.blas, "threads": m.threads,
                        "l2_bytes": m.l2_bytes, "l3_bytes": m.l3_bytes,
                        "core_flops_per_ns": m.core_flops_per_ns},
            "prices": profile.prices()}
    target.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return target


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """Read a profile file; `ProfileError` (naming the file and what is wrong) if it cannot
    be used.  Prices the file lacks keep the built-in defaults (a profile written before a
    price existed)."""
    source = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(f"the profile {source} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"the profile {source} cannot be read ({exc.__class__.__name__}: {exc})") from None
    except json.JSONDecodeError as exc:
        raise ProfileError(f"the profile {source} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ProfileError(f"the profile {source} is not a grouped-einsum profile "
                           f"(expected \"format\": \"{FORMAT}\")")
    prices, machine = data.get("prices"), data.get("machine", {})
    if not isinstance(prices, dict) or not isinstance(machine, dict):
        raise ProfileError(f"the profile {source} lacks its \"prices\" or \"machine\" table")
    kinds = {f.name: f.type for f in price_fields()}
    checked: dict[str, Any] = {}
    for name, value in prices.items():
        if name not in kinds:
            raise ProfileError(f"the profile {source} holds an unknown price {name!r}")
        integer = kinds[name] in ("int", int)
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (integer and not isinstance(value, int)) or not math.isfinite(value) or value < 0):
            raise ProfileError(f"the profile {source} gives {name!r} the value {value!r}: expected "
                               f"a non-negative {'integer' if integer else 'number'}")
        checked[name] = int(value) if integer else float(value)
    copied = checked.get("ns_per_copied_element", Profile.ns_per_copied_element)
    fresh = checked.get("ns_per_fresh_element", Profile.ns_per_fresh_element)
    if copied < fresh:
        raise ProfileError(f"the profile {source} prices a copied element ({copied:g} ns) below a fresh "
                           f"page's share ({fresh:g} ns): a copy's price holds its first touch")
    try:
        recorded = Machine(cpu=str(machine.get("cpu", "")), cores=int(machine.get("cores", 0)),
                           blas=str(machine.get("blas", "")), threads=int(machine.get("threads", 0)),
                           l2_bytes=int(machine.get("l2_bytes", 0)), l3_bytes=int(machine.get("l3_bytes", 0)),
                           core_flops_per_ns=float(machine.get("core_flops_per_ns", 0.0)))
    except (TypeError, ValueError):
        raise ProfileError(f"the profile {source} has a malformed \"machine\" table") from None
    return replace(Profile(), **checked, machine=recorded, measured=str(data.get("measured", "")),
                   source=source)


def select_profile(environ: Mapping[str, str] | None = None) -> Profile:
    """The profile to plan with: ``CONTRACTIONS_PROFILE``'s file, else the user's calibrated
    one, else `builtin_profile`.  A file that cannot be used warns once (`ProfileWarning`,
    naming it) and falls back to the built-in defaults."""
    named = (os.environ if environ is None else environ).get(ENVIRONMENT_VARIABLE, "")
    path = Path(named) if named else user_profile_path()
    if not named and not path.exists():
        return builtin_profile()
    try:
        return load_profile(path)
    except ProfileError as exc:
        how = f" (set by {ENVIRONMENT_VARIABLE})" if named else ""
        warnings.warn(ProfileWarning(f"contractions: {exc}{how}; planning with the built-in defaults. "
                                     f"Run 'contractions calibrate' to measure this machine."),
                      stacklevel=2)
        return builtin_profile()


@functools.lru_cache(maxsize=1)
def active_profile() -> Profile:
    """The profile this process plans with, chosen once (`select_profile`)."""
    return select_profile()
