"""Finished runs on disk: reading them (`runs`: the RIF results schema, `load_run`, `list_runs`, replay from a run),
per-query analysis of a run (`analysis`), and writing them (`store`: run folders, atomic writes, the reuse rule)."""
