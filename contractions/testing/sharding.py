"""The any-axis sharding sweep: shard each group sub-axis, compile, count collectives by opcode.

For every vocabulary string and every sub-axis of every group, the operands are laid out with
that sub-axis sharded over 4 virtual CPU devices (`NamedSharding`), `contract` is jit-compiled,
and the compiled HLO must contain no all-gather, all-to-all or collective-permute instruction
(summed groups may all-reduce). Opcodes are read from parsed instruction lines, never found by
substring search (instruction *names* and metadata also contain the word "all-gather").

A guard case proves the counter can fail: a deliberate flatten that fuses two groups, sharded on
the minor member, must be reported with a nonzero count.

JAX only honours `--xla_force_host_platform_device_count` before it initialises, so the whole
sweep runs in one subprocess (`run_sweep`); this module imports jax only inside that worker.

>>> hlo = '''
... ENTRY %main (p: f32[4,1,2]) -> f32[4,4,2] {
...   %p = f32[4,1,2]{2,1,0} parameter(0), metadata={op_name="all-gather(x)"}
...   ROOT %all-gather = f32[4,4,2]{2,1,0} all-gather(%p), dimensions={1}
... }'''
>>> counts = count_hlo_opcodes(hlo)
>>> counts['all-gather'], counts['parameter'], forbidden_collectives(counts)
(1, 1, {'all-gather': 1})
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .cases import letter_sizes, sharded_group_shapes
from .oracle import axis_layout, operand_shapes, split_terms

__all__ = [
    "ALLOWED_COLLECTIVES",
    "FORBIDDEN_OPCODES",
    "GUARD_DESCRIPTION",
    "CaseResult",
    "ShardingCase",
    "SweepReport",
    "count_hlo_opcodes",
    "forbidden_collectives",
    "run_sweep",
    "sharding_cases",
]

#: Collectives that mean data moved between devices to undo a layout: never allowed.
FORBIDDEN_OPCODES: tuple[str, ...] = (
    "all-gather",
    "all-to-all",
    "ragged-all-to-all",
    "collective-permute",
    "collective-broadcast",
)
#: Reductions over a sharded summed group: legitimate.
ALLOWED_COLLECTIVES: tuple[str, ...] = ("all-reduce", "reduce-scatter")

GUARD_DESCRIPTION = (
    "guard: x of shape (W=4, K=4, a=2) sharded on K (the minor member), flattened to (16, 2) "
    "as the old named toolkit did, then einsum 'xa,ab->xb' and reshaped back"
)

# `[ROOT] [%]name = <shape> <opcode>(...`. The shape is a token without spaces, or a
# parenthesised tuple (which may contain spaces); the opcode is followed directly by '('.
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(?P<rest>\S.*)$")
_OPCODE = re.compile(r"\s*(?P<opcode>[a-z][a-z0-9\-]*)\(")


def _skip_shape(rest: str) -> str | None:
    """Return the text after the result shape of an instruction, or None if unparsable."""
    if rest.startswith("("):
        depth = 0
        for i, char in enumerate(rest):
            depth += char == "("
            depth -= char == ")"
            if depth == 0:
                return rest[i + 1 :]
        return None
    parts = rest.split(None, 1)
    return parts[1] if len(parts) == 2 else None


def count_hlo_opcodes(hlo_text: str) -> Counter[str]:
    """Count instructions by opcode in HLO text (all computations, fused ones included).

    Async pairs are counted once under the base opcode: `all-gather-start` counts as one
    `all-gather`, and `-done` halves are not counted.
    """
    counts: Counter[str] = Counter()
    for line in hlo_text.splitlines():
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        after_shape = _skip_shape(match.group("rest"))
        if after_shape is None:
            continue
        opcode_match = _OPCODE.match(after_shape)
        if opcode_match is None:
            continue
        opcode = opcode_match.group("opcode")
        if opcode.endswith("-done"):
            continue
        opcode = opcode.removesuffix("-start")
        counts[opcode] += 1
    return counts


def forbidden_collectives(counts: Mapping[str, int]) -> dict[str, int]:
    """The nonzero counts of forbidden opcodes."""
    return {op: counts[op] for op in FORBIDDEN_OPCODES if counts.get(op, 0)}


@dataclass(frozen=True)
class ShardingCase:
    """One compiled case: `group`'s sub-axis `sub_axis` sharded over the device mesh."""

    subscripts: str
    group: str
    sub_axis: int
    group_shapes: tuple[tuple[str, tuple[int, ...]], ...]
    letter_sizes: tuple[tuple[str, int], ...]
    supplements: tuple[tuple[str, int], ...]

    @property
    def case_id(self) -> str:
        return f"{self.subscripts} [{self.group}.{self.sub_axis}]"

    def operand_shapes(self) -> tuple[tuple[int, ...], ...]:
        return operand_shapes(self.subscripts, dict(self.group_shapes), dict(self.letter_sizes))

    def sharded_positions(self) -> tuple[int | None, ...]:
        """Per operand, the axis that holds the sharded sub-axis (None: replicated)."""
        shapes = dict(self.group_shapes)
        positions: list[int | None] = []
        for term in split_terms(self.subscripts).inputs:
            layout = axis_layout(term, shapes)
            target = (self.group, self.sub_axis)
            positions.append(layout.index(target) if target in layout else None)
        return tuple(positions)

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.case_id,
            "subscripts": self.subscripts,
            "shapes": [list(s) for s in self.operand_shapes()],
            "sharded": list(self.sharded_positions()),
            "supplements": dict(self.supplements),
        }


def sharding_cases(
    subscripts: str,
    supplement_groups: Iterable[str] = (),
    *,
    devices: int = 4,
    axes_per_group: int = 2,
    other_extent: int = 2,
    letter_size: int = 2,
) -> tuple[ShardingCase, ...]:
    """One case per sub-axis of each group of `subscripts`.

    Shapes come from `contractions.testing.cases.sharded_group_shapes` (every group gets
    `axes_per_group` sub-axes of extent `other_extent`, except the sharded one, whose extent
    is `devices`); lowercase letters get `letter_size`. `supplement_groups` (from the table)
    are passed as `len_<G>=axes_per_group`.
    """
    groups = split_terms(subscripts).groups
    letters = tuple(letter_sizes(subscripts, (letter_size,)).items())
    supplements = tuple((f"len_{g}", axes_per_group) for g in supplement_groups)
    return tuple(
        ShardingCase(
            subscripts=subscripts,
            group=group,
            sub_axis=sub_axis,
            group_shapes=tuple(
                sharded_group_shapes(
                    groups, group, sub_axis, devices=devices, axes_per_group=axes_per_group,
                    other_extent=other_extent,
                ).items()
            ),
            letter_sizes=letters,
            supplements=supplements,
        )
        for group in groups
        for sub_axis in range(axes_per_group)
    )


@dataclass(frozen=True)
class CaseResult:
    """The opcode counts of one compiled case, or the error that prevented compiling it."""

    case_id: str
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    @property
    def forbidden(self) -> dict[str, int]:
        return forbidden_collectives(self.counts)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.forbidden


@dataclass(frozen=True)
class SweepReport:
    """Results of one sweep: per case, plus the guard case's counts."""

    results: dict[str, CaseResult]
    guard: CaseResult
    devices: int

    @property
    def failures(self) -> list[CaseResult]:
        return [r for r in self.results.values() if not r.ok]

    def summary(self) -> str:
        n_strings = len({case_id.rsplit(" [", 1)[0] for case_id in self.results})
        guard = (
            f"guard detected {self.guard.forbidden}"
            if self.guard.forbidden
            else f"guard NOT detected ({self.guard.error or 'no forbidden collective'})"
        )
        return (
            f"sharding sweep: {len(self.results)} cases over {n_strings} strings on "
            f"{self.devices} virtual devices, {len(self.failures)} failing; {guard}"
        )


def _package_root() -> str:
    # The directory containing the `contractions` package, so the worker imports this copy.
    return str(Path(__file__).resolve().parents[2])


def run_sweep(
    cases: Sequence[ShardingCase],
    *,
    devices: int = 4,
    workers: int | None = None,
    timeout: float = 1800.0,
) -> SweepReport:
    """Compile every case (and the guard) in subprocesses with `devices` virtual CPUs each.

    Compiling dominates (tens of ms per case) and each worker pays jax's start-up once, so
    the cases are split over `workers` concurrent subprocesses (default: up to 2, one per
    core on a small CI machine).
    """
    if workers is None:
        workers = max(1, min(2, os.cpu_count() or 1, len(cases)))
    chunks = [list(cases[i::workers]) for i in range(workers)]
    env = dict(os.environ)
    flag = f"--xla_force_host_platform_device_count={devices}"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flag}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH", "")) if p)
    results: dict[str, CaseResult] = {}
    guard = CaseResult("guard", error="the guard case did not run")
    with tempfile.TemporaryDirectory(prefix="contractions-sweep-") as tmp:
        running = []
        for index, chunk in enumerate(chunks):
            request = Path(tmp) / f"cases{index}.json"
            response = Path(tmp) / f"results{index}.json"
            request.write_text(
                json.dumps(
                    {"devices": devices, "guard": index == 0, "cases": [c.as_json() for c in chunk]}
                ),
                encoding="utf-8",
            )
            command = [sys.executable, "-m", "contractions.testing.sharding", str(request), str(response)]
            proc = subprocess.Popen(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            running.append((proc, response))
        failures = []
        for proc, response in running:
            try:
                _, stderr = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, stderr = proc.communicate()
                failures.append(f"timed out after {timeout}s")
                continue
            if proc.returncode != 0 or not response.exists():
                failures.append(f"exit {proc.returncode}:\n{stderr[-4000:]}")
                continue
            payload = json.loads(response.read_text(encoding="utf-8"))
            for r in payload["results"]:
                results[r["id"]] = CaseResult(r["id"], r.get("counts", {}), r.get("error"))
            if "guard" in payload:
                g = payload["guard"]
                guard = CaseResult("guard", g.get("counts", {}), g.get("error"))
        if failures:
            raise RuntimeError("sharding sweep worker failed: " + "\n".join(failures))
    return SweepReport(results, guard, devices)


# --- the worker (runs in the subprocess; the only place jax is imported) -----------------


def _worker(request_path: str, response_path: str) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from contractions import contract

    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    devices = int(request["devices"])
    available = jax.devices()
    if len(available) < devices:
        raise SystemExit(f"need {devices} devices, jax sees {len(available)}: is XLA_FLAGS set?")
    mesh = Mesh(np.array(available[:devices]), ("shard",))

    def spec(ndim: int, position: int | None) -> NamedSharding:
        axes = [None] * ndim
        if position is not None:
            axes[position] = "shard"  # type: ignore[call-overload]
        return NamedSharding(mesh, PartitionSpec(*axes))

    def compiled_counts(fn, shapes, positions) -> dict[str, int]:  # type: ignore[no-untyped-def]
        args = [
            jax.ShapeDtypeStruct(tuple(shape), jnp.float32, sharding=spec(len(shape), pos))
            for shape, pos in zip(shapes, positions)
        ]
        text = jax.jit(fn).lower(*args).compile().as_text()
        return dict(count_hlo_opcodes(text or ""))

    results = []
    for case in request["cases"]:
        subscripts, supplements = case["subscripts"], case["supplements"]

        def fn(*operands, _s=subscripts, _sup=supplements):  # type: ignore[no-untyped-def]
            return contract(_s, *operands, **_sup)

        try:
            counts = compiled_counts(fn, case["shapes"], case["sharded"])
            results.append({"id": case["id"], "counts": counts})
        except Exception as exc:  # noqa: BLE001 - reported per case, so one bad string hides no other
            results.append({"id": case["id"], "error": f"{type(exc).__name__}: {exc}"})

    def guard_fn(x, y):  # type: ignore[no-untyped-def]
        fused = x.reshape(x.shape[0] * x.shape[1], x.shape[2])  # W and K fused into one axis
        return jnp.einsum("xa,ab->xb", fused, y).reshape(x.shape[0], x.shape[1], y.shape[1])

    payload: dict[str, object] = {"results": results}
    if request.get("guard", True):
        try:
            payload["guard"] = {
                "counts": compiled_counts(guard_fn, [(4, devices, 2), (2, 3)], [1, None])
            }
        except Exception as exc:  # noqa: BLE001 - reported as the guard's error
            payload["guard"] = {"error": f"{type(exc).__name__}: {exc}"}
    Path(response_path).write_text(json.dumps(payload), encoding="utf-8")


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
