"""The checkpoints' memory mechanisms beyond RIF (RIF itself is `lethe_core.rif`). Each reads cached pools and
pair scores and is run by one study in `lethe_core.experiments`, read by one notebook:

| module | checkpoint | study (`lethe_core.experiments.*`) | notebook |
|---|---|---|---|
| `embedding_mutation` | 01 germinal-centre mutation of turn embeddings | `mutation_study` | `notebooks/01_embedding_mutation.py` |
| `adapter_mutation` | 02 frozen base + mutable adapter per turn (and 03's reranked top-30 beside it) | `mutation_study` | `notebooks/02_adapter_mutation.py` |
| `usage_stream` | 01, 02, 04: the usage stream over mutable turn vectors they share | `mutation_study`, `mlp_adapter_study` | 01, 02, 04 |
| `mlp_adapter` | 04 learned MLP adapter | `mlp_adapter_study` | `notebooks/04_mlp_adapter.py` |
| `adaptive_depth` | 06 adaptive rerank depth | `adaptive_depth_study` | `notebooks/06_adaptive_depth.py` |
| `rescue_cache` | 06 rescue cache | `adaptive_depth_study` | `notebooks/06_adaptive_depth.py` |
| `dedup` | 07 build-time deduplication | `dedup_study` | `notebooks/07_dedup.py` |
| `routing` | 09 GC routing index | `routing_study` | `notebooks/09_gc_routing.py` |
| `rescue_list` | 14 exploration + rescue list | `rescue_study` | `notebooks/14_exploration_rescue.py` |
| `sdm` | 15 sparse distributed memory | `sdm_study` | `notebooks/15_sdm.py` |
| `score_scale` | 06, 09, 14: the reference's MS MARCO logit thresholds read on our reranker's scale | `adaptive_depth_study`, `routing_study`, `rescue_study` | 06, 09, 14 |

Floor: above `rif` (routing and the rescue list act inside a RIF replay), below `experiments`.
"""
