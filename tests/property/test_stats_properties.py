"""Any corruption of a valid per-query file is a DatasetError naming file, record and field, or a sound table.

An independent oracle says which files are valid, so the property checks both directions: nothing bad
loads, and nothing good is refused.
"""

import json
import tempfile
from pathlib import Path

from corruption import PROPERTY_SETTINGS, corrupted_json
from hypothesis import given

from lethe_core.datasets import DatasetError
from lethe_core.measures.stats import compare_configs, load_per_query_file

PER_QUERY = {"configs": [
    {"name": "baseline", "ndcg": [0.1, 0.5, 0.0, 1.0], "recall": [0.25, 1.0, 0, 1]},
    {"name": "rif", "ndcg": [0.2, 0.4, 0.3, 1.0], "recall": [0.5, 1.0, 0.5, 1]},
    {"name": "control", "ndcg": [0.3, 0.6, 0.1, 0.9], "recall": [0.5, 0.75, 0.5, 1]},
]}


def _valid(raw: bytes) -> bool:
    """What a usable per-query file is, written independently of the loader."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    configs = data.get("configs") if isinstance(data, dict) else None
    if not isinstance(configs, list) or not configs or not all(isinstance(c, dict) for c in configs):
        return False
    names = [c.get("name") for c in configs]
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        return False
    arrays = [c.get(m) for c in configs for m in ("ndcg", "recall")]
    if not all(isinstance(a, list) and a and len(a) == len(arrays[0]) for a in arrays):
        return False
    return all(type(v) in (int, float) and 0 <= v <= 1 for a in arrays for v in a)  # NaN and inf fail the range


@PROPERTY_SETTINGS
@given(raw=corrupted_json(PER_QUERY))
def test_corrupted_per_query_file(raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "per_query.json"
        path.write_bytes(raw)
        try:
            configs = load_per_query_file(path)
        except DatasetError as err:
            assert not _valid(raw), f"a valid file was refused: {err}"
            assert err.file == str(path) and str(path) in str(err)
            if err.record is not None and not err.record.startswith("line "):  # "line N": a byte that is not UTF-8
                assert err.record.startswith("configs[") and err.field in ("name", "ndcg", "recall")
            return
    assert _valid(raw), "an invalid file loaded"
    data = json.loads(raw)
    assert list(configs) == [c["name"] for c in data["configs"]]
    for c in data["configs"]:
        assert configs[c["name"]]["ndcg"].tolist() == [float(v) for v in c["ndcg"]]
    table = compare_configs(configs, next(iter(configs)), seed=0)
    json.dumps(table, allow_nan=False)  # strict JSON: nothing in the table is NaN
