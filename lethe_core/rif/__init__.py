"""Retrieval-induced forgetting, replayed from cached pools: the suppression state and update rules (`state`,
`rules`), query clusters (`clusters`), one retrieval step and its judgements (`replay`), the compiled whole-schedule
kernel (`fast`), the protocols that drive a replay (`protocols`; their names and splits are `datasets.splits`), and
the per-step views of what the mechanism did (`mechanism`)."""
