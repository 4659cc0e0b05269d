"""UMAP's numba kernels are cached on disk (`lethe_core.util.jit`): a second process loads them, compiles none."""

import json
import subprocess
import sys

import numpy as np

from lethe_core.experiments.rif import query_map

FIT = """
import json, numpy as np
from lethe_core.experiments.rif import query_map
from lethe_core.util.jit import umap_module
x = np.random.default_rng(0).normal(size=(80, 16)).astype(np.float32)
frame = query_map(x, [f"q{i}" for i in range(80)], k=5)
umap = umap_module()
from numba.core.registry import CPUDispatcher
import sys
kernels = [o for n, m in list(sys.modules.items()) if n.split(".")[0] in ("umap", "pynndescent") and m
           for o in vars(m).values() if isinstance(o, CPUDispatcher)]
import umap.umap_ as u
print(json.dumps({"hits": sum(sum(k.stats.cache_hits.values()) for k in kernels),
                  "parallel_misses": sum(sum(k.stats.cache_misses.values()) for k in (u.smooth_knn_dist, u.compute_membership_strengths)),
                  "xy": frame[["x", "y"]].values.round(5).tolist()}))
"""


def _fit() -> dict:
    out = subprocess.run([sys.executable, "-c", FIT], capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_compiled_kernels_and_maps_the_same():
    first, second = _fit(), _fit()  # the first may find the cache warm already (another test or a run on this machine)
    assert second["hits"] > 10 and second["parallel_misses"] == 0  # the parallel kernels, most of the compile time
    assert first["xy"] == second["xy"]


def test_the_map_is_seeded():
    x = np.random.default_rng(1).normal(size=(40, 8)).astype(np.float32)
    a, b = query_map(x, [str(i) for i in range(40)], k=4), query_map(x, [str(i) for i in range(40)], k=4)
    assert a.equals(b) and list(a.columns) == ["query_id", "x", "y", "cluster"]
