"""UMAP with numba's on-disk cache.

UMAP (and pynndescent under it) compile their numba kernels without `cache=True`, several with `parallel=True`, so
every process that fits a query map spent about 20 s of its first fit compiling, on 2 cores, whatever the number of
queries: each `lethe-lab rif run`, notebook kernel and dashboard fixture. `umap_module` turns on the same on-disk
cache that `cache=True` would (numba's `Dispatcher.enable_caching`; files in the package's `__pycache__`, or numba's
user-wide cache dir where that is read-only), so only the first process on a machine compiles. The compiled code is
the same; the cache is keyed by the source file and the CPU, and numba recompiles when either changes.
"""

from __future__ import annotations

import functools
import sys

_PACKAGES = ("umap", "pynndescent")


@functools.cache
def umap_module():
    """`import umap`, with every numba kernel of umap and pynndescent cached on disk (module docstring); once per process."""
    import umap
    from numba.core.registry import CPUDispatcher

    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in _PACKAGES and module is not None:
            for obj in list(vars(module).values()):
                if isinstance(obj, CPUDispatcher):
                    obj.enable_caching()
    return umap
