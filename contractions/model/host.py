"""What this machine is: its CPU, cores, caches, BLAS and BLAS thread count, read from the OS.

Pure probing, no prices: the built-in profile takes its cache sizes and thread count from here
(`contractions.model.profile`), a calibrated profile records them, and a profile used on another
machine is noted by comparing the two (`Machine`).

>>> cache_bytes(2) > 0 and blas_threads() >= 1
True
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass

__all__ = ["Machine", "blas_name", "blas_threads", "cache_bytes", "clock_ghz", "core_peak_flops_per_ns", "cpu_model",
           "flops_per_cycle", "this_machine"]


def cache_bytes(level: int = 2, fallback: int = 1 << 20) -> int:
    """The size of this CPU's level-``level`` data cache, read from the OS (Linux sysfs,
    then ``sysconf``); ``fallback`` (1 MiB, a common L2) where neither says."""
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(root)):
            path = os.path.join(root, entry)
            with open(os.path.join(path, "level")) as f:
                if int(f.read()) != level:
                    continue
            with open(os.path.join(path, "type")) as f:
                if f.read().strip() not in ("Data", "Unified"):
                    continue
            with open(os.path.join(path, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            return int(text.rstrip("KMG")) * scale
    except (OSError, ValueError):
        pass
    try:
        size = os.sysconf(f"SC_LEVEL{level}_CACHE_SIZE")
        if size > 0:
            return int(size)
    except (AttributeError, ValueError, OSError):
        pass
    return fallback


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def blas_threads() -> int:
    """Threads OpenBLAS runs a large product on: its own environment variables, as it reads
    them, else the CPUs this process may use."""
    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        try:
            value = int(os.environ.get(name, "").split(",")[0])
        except ValueError:
            continue
        if value > 0:
            return value
    return cores()


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, ...]:
    """The lines of ``/proc/cpuinfo`` (none where there is no such file), read once: the
    model name, clock and flags all come from it."""
    try:
        with open("/proc/cpuinfo", errors="replace") as f:
            return tuple(f)
    except OSError:
        return ()


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else the platform's processor)."""
    for line in _cpuinfo():
        if line.lower().startswith(("model name", "hardware", "cpu model")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def flops_per_cycle(flags: set[str] | frozenset[str]) -> int:
    """Float64 FLOPs one core can issue a cycle, from its instruction-set flags (as
    ``/proc/cpuinfo`` lists them): two fused multiply-add pipes as wide as the widest vectors
    (AVX-512: 8 doubles, AVX2: 4, NEON: 2; without FMA one add and one multiply); 0 when no
    flag says.

    >>> flops_per_cycle({'avx512f', 'avx2', 'fma'}), flops_per_cycle({'avx2', 'fma'}), flops_per_cycle({'asimd'})
    (32, 16, 8)
    """
    if "avx512f" in flags:
        return 32
    if "avx2" in flags and "fma" in flags:
        return 16
    if "avx" in flags or "asimd" in flags:
        return 8
    if "sse2" in flags:
        return 4
    return 0


def clock_ghz() -> float:
    """This CPU's highest clock in GHz: the kernel's frequency limit where it publishes one,
    else the fastest ``cpu MHz`` of ``/proc/cpuinfo`` (a VM's nominal clock); 0.0 when
    neither says."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as f:
            return int(f.read()) / 1e6
    except (OSError, ValueError):
        pass
    fastest = 0.0
    for line in _cpuinfo():
        if line.lower().startswith("cpu mhz"):
            try:
                fastest = max(fastest, float(line.split(":", 1)[1]) / 1e3)
            except ValueError:
                pass
    return fastest


def core_peak_flops_per_ns() -> float:
    """One core's float64 peak in GFLOP/s (FLOPs a nanosecond), estimated from its flags and
    clock (`flops_per_cycle` x `clock_ghz`); 0.0 where either is unknown (not Linux, say).
    Read off the data sheet, not measured (dev/decisions.md 62: 39 a core estimated on an
    AMD EPYC VM whose two cores ``contractions calibrate`` measured at 74 together)."""
    for line in _cpuinfo():
        if line.lower().startswith(("flags", "features")):
            return flops_per_cycle(set(line.split(":", 1)[1].split())) * clock_ghz()
    return 0.0


def blas_name() -> str:
    """numpy's BLAS, as ``numpy.show_config`` names it (name and version)."""
    try:
        import numpy as np

        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name', 'unknown')} {blas.get('version', '')}".strip()
    except Exception:   # an old numpy without mode='dicts', or a build that does not say
        return "unknown BLAS"


@dataclass(frozen=True)
class Machine:
    """What a profile was measured on: CPU model, usable cores, numpy's BLAS, its thread
    count, the L2 and last-level cache sizes (bytes) and one core's estimated float64 peak
    (`core_peak_flops_per_ns`; 0.0: unknown)."""

    cpu: str = ""
    cores: int = 0
    blas: str = ""
    threads: int = 0
    l2_bytes: int = 0
    l3_bytes: int = 0
    core_flops_per_ns: float = 0.0

    def differences(self, other: Machine) -> list[str]:
        """How ``other`` (this machine, usually) differs, one short phrase each.

        >>> Machine('x', 2, 'openblas', 2, 1 << 20, 32 << 20).differences(
        ...     Machine('x', 1, 'openblas', 1, 1 << 20, 32 << 20))
        ['cores 2 -> 1', 'BLAS threads 2 -> 1']
        """
        found = []
        for name, label in (("cpu", "CPU"), ("cores", "cores"), ("blas", "BLAS"),
                            ("threads", "BLAS threads"), ("l2_bytes", "L2 bytes"),
                            ("l3_bytes", "L3 bytes")):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine and theirs and mine != theirs:
                found.append(f"{label} {mine} -> {theirs}")
        return found

    def __str__(self) -> str:
        return (f"{self.cpu or 'unknown CPU'}, {self.cores} cores, {self.blas or 'unknown BLAS'} "
                f"on {self.threads} threads, L2 {self.l2_bytes >> 10} KiB, L3 {self.l3_bytes >> 10} KiB"
                + (f", ~{self.core_flops_per_ns:.0f} GFLOP/s a core" if self.core_flops_per_ns else ""))


@functools.lru_cache(maxsize=1)
def this_machine() -> Machine:
    """The machine this process runs on, as a profile records it (probed once)."""
    return Machine(cpu=cpu_model(), cores=cores(), blas=blas_name(), threads=blas_threads(),
                   l2_bytes=cache_bytes(2), l3_bytes=cache_bytes(3, fallback=32 << 20),
                   core_flops_per_ns=round(core_peak_flops_per_ns(), 3))
