"""Data-parallel `contract` on a device mesh: shard any group sub-axis, get zero collectives.

A stack of probes ``W = (batch, probe)`` is pushed through a stack of frames ``C = (frame,
slot)`` of cores, then each output is normalised::

    y      = contract('WCa,Caib,WCi->WCb', x, cores, z)
    energy = contract('WCb,WCb->WC', y, y)
    out    = y / sqrt(energy)

Because `contract` keeps every sub-axis of every group an honest einsum axis (nothing is
flattened), any one of them can be sharded over a 1-d device mesh and XLA's SPMD partitioner
runs every device on its own slice: the compiled program contains no all-gather, all-to-all or
collective-permute (and, since no group is summed here, no all-reduce either).

Which axis to shard is your choice (``--shard W:0`` shards the batch sub-axis of W, ``C:1`` the
slot sub-axis of C, ``all`` tries each in turn).  The operands' shardings are derived from the
expansion: every operand carrying that sub-axis is split along it, the others are replicated.

On one CPU, simulate 4 devices::

    python examples/sharded_data_parallel.py --cpu-devices 4 --shard all

On a host with several GPUs or TPUs, drop ``--cpu-devices``: the mesh spans ``jax.devices()``.
See docs/transforms.md ("Sharded execution") for multi-host runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script (python examples/NAME.py): import from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contractions.testing.sharding import FORBIDDEN_OPCODES, count_hlo_opcodes

SUBSCRIPTS = "WCa,Caib,WCi->WCb"
# Every group sub-axis is a multiple of 8, so it splits evenly over 1, 2, 4 or 8 devices.
GROUP_SHAPES = {"W": (8, 16), "C": (8, 8)}
A, I, B = 3, 5, 6

COLLECTIVES = ("all-gather", "all-to-all", "collective-permute", "all-reduce", "reduce-scatter")
FORBIDDEN = FORBIDDEN_OPCODES  # gathers and permutes; reductions would be legitimate


def make_operands(seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    w, c = GROUP_SHAPES["W"], GROUP_SHAPES["C"]
    x = rng.standard_normal((*w, *c, A)).astype(np.float32)
    cores = rng.standard_normal((*c, A, I, B)).astype(np.float32)
    z = rng.standard_normal((*w, *c, I)).astype(np.float32)
    return x, cores, z


def program(x, cores, z):
    """The data-parallel program: propagate every probe through every frame, normalise."""
    import jax.numpy as jnp

    from contractions import contract

    y = contract("WCa,Caib,WCi->WCb", x, cores, z)  # == SUBSCRIPTS, literal for the call-site scan
    energy = contract("WCb,WCb->WC", y, y)
    return y / jnp.sqrt(energy)[..., None]


def partition_specs(group: str, sub_axis: int, shapes) -> list:
    """One PartitionSpec per operand: 'data' where the chosen sub-axis sits, else replicated."""
    from jax.sharding import PartitionSpec

    from contractions import make_plan

    exp = make_plan(SUBSCRIPTS, tuple(tuple(s) for s in shapes), ()).expansion
    labels = dict(exp.group_labels)[group]
    if not 0 <= sub_axis < len(labels):
        raise SystemExit(f"group {group} has {len(labels)} sub-axes; --shard {group}:{sub_axis} "
                         "is out of range")
    target = labels[sub_axis]
    return [PartitionSpec(*("data" if label == target else None for label in term))
            for term in exp.inputs]


def run(group: str, sub_axis: int, operands) -> dict:
    """Compile the program with the chosen sharding, run it, compare, count collectives."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding

    mesh = Mesh(np.array(jax.devices()), ("data",))
    specs = partition_specs(group, sub_axis, [op.shape for op in operands])
    shardings = [NamedSharding(mesh, spec) for spec in specs]
    sharded_ops = [jax.device_put(op, s) for op, s in zip(operands, shardings)]

    compiled = jax.jit(program, in_shardings=shardings).lower(*sharded_ops).compile()
    counts = count_hlo_opcodes(compiled.as_text())
    out = compiled(*sharded_ops)

    reference = jax.jit(program)(*(jax.device_put(op, jax.devices()[0]) for op in operands))
    max_error = float(np.abs(np.asarray(out) - np.asarray(reference)).max())
    output_spec = tuple(out.sharding.spec) if isinstance(out.sharding, NamedSharding) else None
    return {
        "shard": f"{group}:{sub_axis}",
        "devices": len(jax.devices()),
        "platform": jax.devices()[0].platform,
        "operand_specs": [str(tuple(s)) for s in specs],
        "output_spec": str(output_spec),
        "output_shards": len(out.addressable_shards),
        "collectives": {name: counts.get(name, 0) for name in COLLECTIVES},
        "forbidden_collectives": sum(counts.get(name, 0) for name in FORBIDDEN),
        "max_abs_error_vs_unsharded": max_error,
        "matches_unsharded": bool(np.allclose(np.asarray(out), np.asarray(reference),
                                              rtol=1e-5, atol=1e-5)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shard", default="W:0",
                        help="group:sub-axis to shard over the mesh (e.g. W:1, C:0), or 'all'")
    parser.add_argument("--cpu-devices", type=int, default=0,
                        help="simulate this many CPU devices (sets XLA_FLAGS before jax starts)")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    args = parser.parse_args(argv)

    if args.cpu_devices:
        if "jax" in sys.modules:
            raise SystemExit("--cpu-devices must be applied before jax is imported")
        flag = f"--xla_force_host_platform_device_count={args.cpu_devices}"
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
        os.environ.setdefault("JAX_PLATFORMS", "cpu")

    if args.shard == "all":
        choices = [(g, k) for g, shape in GROUP_SHAPES.items() for k in range(len(shape))]
    else:
        group, _, k = args.shard.partition(":")
        choices = [(group, int(k or 0))]

    operands = make_operands()
    reports = [run(g, k, operands) for g, k in choices]
    if args.json:
        print(json.dumps(reports, indent=1))
    else:
        for r in reports:
            print(f"shard {r['shard']} over {r['devices']} {r['platform']} device(s): "
                  f"operand specs {', '.join(r['operand_specs'])}; output spec {r['output_spec']}; "
                  f"collectives {r['collectives']}; max |sharded - unsharded| = "
                  f"{r['max_abs_error_vs_unsharded']:.2e}")
    ok = all(r["forbidden_collectives"] == 0 and r["matches_unsharded"] for r in reports)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
