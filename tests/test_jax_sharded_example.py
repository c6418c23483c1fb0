"""examples/sharded_data_parallel.py on 4 virtual CPU devices (in subprocesses, since the device
count must be fixed before jax starts): every group sub-axis shards with zero collectives and
the result matches the unsharded run; a deliberate flatten is caught by the same counter."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("jax")

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "sharded_data_parallel.py"


def load_example():
    spec = importlib.util.spec_from_file_location("sharded_data_parallel", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, check=False, **kwargs)


def test_every_group_sub_axis_shards_with_zero_collectives():
    proc = run([str(EXAMPLE), "--cpu-devices", "4", "--shard", "all", "--json"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = json.loads(proc.stdout)
    assert [r["shard"] for r in reports] == ["W:0", "W:1", "C:0", "C:1"]
    # Position of each sub-axis in the output 'WCb' (W = 2 axes, C = 2 axes, then b).
    output_position = {"W:0": 0, "W:1": 1, "C:0": 2, "C:1": 3}
    for r in reports:
        assert r["devices"] == 4 and r["platform"] == "cpu"
        assert r["collectives"] == {"all-gather": 0, "all-to-all": 0, "collective-permute": 0,
                                    "all-reduce": 0, "reduce-scatter": 0}, r
        assert r["matches_unsharded"], r
        assert r["max_abs_error_vs_unsharded"] < 1e-5
        # The output stays split along the same sub-axis, across all 4 devices.
        spec = ast.literal_eval(r["output_spec"])  # a tuple of None / 'data'
        assert spec[output_position[r["shard"]]] == "data"
        assert r["output_shards"] == 4


def test_single_choice_human_readable_report():
    proc = run([str(EXAMPLE), "--cpu-devices", "4", "--shard", "C:1"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("shard C:1 over 4 cpu device(s)")
    assert "'all-gather': 0" in proc.stdout


def test_guard_a_flatten_that_fuses_sub_axes_is_detected():
    """The same counter flags the program a flattening library would produce."""
    code = textwrap.dedent(f"""
        import importlib.util, json
        spec = importlib.util.spec_from_file_location("ex", {str(EXAMPLE)!r})
        ex = importlib.util.module_from_spec(spec); spec.loader.exec_module(ex)
        import jax, jax.numpy as jnp, numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        assert len(jax.devices()) == 4
        x, cores, z = ex.make_operands()
        mesh = Mesh(np.array(jax.devices()), ("data",))
        shardings = [NamedSharding(mesh, s) for s in ex.partition_specs("W", 1, [x.shape, cores.shape, z.shape])]

        def flattened(x, cores, z):
            # Fuse W's two sub-axes and C's two sub-axes into one batch axis each, as a
            # flatten-then-fixed-einsum helper would, then compute the same thing.
            w, c = x.shape[:2], x.shape[2:4]
            xf = x.reshape(-1, c[0] * c[1], x.shape[-1])
            zf = z.reshape(-1, c[0] * c[1], z.shape[-1])
            cf = cores.reshape(c[0] * c[1], *cores.shape[2:])
            return jnp.einsum('wca,caib,wci->wcb', xf, cf, zf).reshape(*w, *c, -1)

        ops = [jax.device_put(o, s) for o, s in zip((x, cores, z), shardings)]
        compiled = jax.jit(flattened, in_shardings=shardings,
                           out_shardings=NamedSharding(mesh, P(None, "data"))).lower(*ops).compile()
        counts = ex.count_hlo_opcodes(compiled.as_text())
        print(json.dumps({{k: counts.get(k, 0) for k in ex.FORBIDDEN}}))
    """)
    proc = run_with_devices(code)
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout)
    assert sum(counts.values()) > 0, counts


def run_with_devices(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=4")
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_partition_specs_follow_the_expansion():
    ex = load_example()
    x, cores, z = ex.make_operands()
    specs = ex.partition_specs("C", 0, [x.shape, cores.shape, z.shape])
    assert [tuple(s) for s in specs] == [(None, None, "data", None, None),
                                         ("data", None, None, None, None),
                                         (None, None, "data", None, None)]
    with pytest.raises(SystemExit, match="has 2 sub-axes"):
        ex.partition_specs("W", 2, [x.shape, cores.shape, z.shape])
