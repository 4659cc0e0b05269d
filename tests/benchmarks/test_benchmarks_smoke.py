"""Every benchmark runs at its tiny size (`--smoke`) and prints its JSON line (issue 24, finding 12): a signature change
breaks a test here, not `make bench`. A new file in benchmarks/ without an entry in SMOKE fails
`test_every_benchmark_has_a_smoke_run`, so it cannot rot either. The whole module takes well under a minute; the Ray
one starts Ray and runs in `make test`'s second, `-m ray` pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lethe_core.util.paths import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"


def _agree(out: dict) -> None:
    assert out["states_agree"] is True and out["ratio_vs_dict_loop"] > 0 and out["seconds"] >= 0


def _parity(out: dict) -> None:
    assert out["parity"]["ours_same_top_k"] == out["parity"]["queries"] > 0 and out["ratio_p50_ours_over_bm25s"] > 0


def _rates(out: dict) -> None:
    assert {"ratio_torch_vs_torch", "ratio_onnx_vs_torch", "ratio_onnx_int8_vs_torch", "bi_ratio_onnx_vs_torch"} <= set(out)
    assert out["cross_encoder_parity_vs_torch_predict"]["torch"]["max_abs_diff"] < 1e-4


def _training(out: dict) -> None:
    assert out["ratio_bucketed_vs_plain"] > 0 and out["plain"]["pairs_per_s"] > 0


def _latency(out: dict) -> None:
    assert out["turns"] == 1000 and out["bm25_ratio_vs_rank_bm25"] > 0 and out["hybrid"]["p50_ms"] >= 0


def _render(out: dict) -> None:
    assert out["whatif_replay_seconds"] >= 0 and out["queries"] == 30
    assert out["pages_first_visit_s"] is None or set(out["pages_first_visit_s"]) == {"overview"}


def _ray(out: dict) -> None:
    one = out["ray"]["1_workers"]
    assert out["ray_start_s"] > 0 and one["embeddings_byte_identical"] and one["logits_max_abs_diff"] < 1e-4


# file -> (arguments, pytest marks, check of the printed JSON); each finishes in seconds
SMOKE = {
    "bm25_scale.py": (["--smoke"], [], _parity),
    "dashboard_render.py": (["--smoke"], [], _render),
    "ray_stages.py": (["--smoke"], [pytest.mark.ray], _ray),
    "reranker_speed.py": (["--smoke"], [], _rates),
    "retrieval_latency.py": (["--smoke"], [], _latency),
    "rif_replay.py": (["--smoke"], [], _agree),
    "training_speed.py": (["--smoke"], [], _training),
}


def test_every_benchmark_has_a_smoke_run():
    files = sorted(p.name for p in BENCHMARKS.glob("*.py"))
    assert files and files == sorted(SMOKE), f"benchmarks without a smoke entry: {sorted(set(files) - set(SMOKE))}; " \
                                             f"entries without a file: {sorted(set(SMOKE) - set(files))}"


def test_make_bench_runs_benchmark_files_that_exist():
    makefile = (REPO_ROOT / "Makefile").read_text()
    recipe = makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    named = [word.split("/", 1)[1] for word in recipe.split() if word.startswith("benchmarks/")]
    assert named and all(name in SMOKE for name in named), named


@pytest.mark.parametrize("name", [pytest.param(n, marks=SMOKE[n][1], id=n) for n in sorted(SMOKE)])
def test_benchmark_prints_its_json_line(name, tmp_path):
    args, _, check = SMOKE[name]
    env = {**os.environ, "LETHE_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, str(BENCHMARKS / name), *args], check=False, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"{name} --smoke failed:\n{done.stderr[-4000:]}"
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"{name} printed nothing:\n{done.stderr[-2000:]}"
    out = json.loads(lines[-1])  # the benchmark's result: one JSON object on its last line
    assert isinstance(out, dict)
    check(out)
