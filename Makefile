# lethe-lab: the README's commands. `make run` = main job on LoCoMo, `make test` = the test suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# No HF_HUB_OFFLINE here: online, `--reranker auto` fetches the paper's MS MARCO cross-encoder. The tests force offline.
export TOKENIZERS_PARALLELISM ?= false
# The long steps record their wall time in data/results/timings.jsonl (README's timing table is generated from it);
# "fresh clone" when make started with no model or cache on disk.
TIMED = $(BIN)/python -m lethe_core.util.timing
FRESH := $(if $(wildcard data/cache data/models),,--fresh-clone)

.PHONY: setup browser run run-steps teachers-steps matrix-steps study-steps test-steps quick reranker teachers matrix study learning-curve haystack reproduce notebooks test parity-heavy dashboard screenshots bench clean-cache

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements.txt
	$(BIN)/pip install --disable-pip-version-check -q --no-deps -e .
	@touch $@

setup: $(STAMP)

# Headless Chromium + its driver for the browser check of the dashboard (Debian packages, as root).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 || \
	    echo "warning: could not install chromium (not root?); the browser test will be skipped"; }

run: setup  ## main job: describe LoCoMo, the fold reranker (the first-run recipe is trained when none is on disk), its pools (fp32 ONNX), systems table, RIF paper protocol
	$(TIMED) make-run $(FRESH) -- $(MAKE) --no-print-directory run-steps

run-steps:
	$(BIN)/lethe-lab data describe locomo
	$(BIN)/lethe-lab reranker ensure
	$(BIN)/lethe-lab systems locomo --backend onnx
	$(BIN)/lethe-lab rif run locomo --backend onnx --protocol paper --seeds 5
	@echo "Dashboard: run '$(BIN)/lethe-lab dashboard' and open http://127.0.0.1:8501"

quick: setup  ## the same on the first two conversations (a few minutes)
	$(BIN)/lethe-lab systems locomo --conversations 2 --backend onnx
	$(BIN)/lethe-lab rif run locomo --conversations 2 --backend onnx --protocol paper --seeds 1

reranker: setup  ## the full fold recipe behind RESULTS.md (about 40 minutes on 2 cores); `auto` then prefers it
	$(BIN)/lethe-lab reranker train locomo --folds 2 --name minilm-2fold

teachers: setup  ## the fold and cross-dataset teachers of LoCoMo and REALTALK (first-run recipe point; resumable), and RERANKER.md's teacher table
	$(TIMED) make-teachers $(FRESH) -- $(MAKE) --no-print-directory teachers-steps

teachers-steps:
	$(BIN)/lethe-lab reranker ensure
	$(BIN)/lethe-lab reranker train realtalk --folds 2 --precision auto
	$(BIN)/lethe-lab reranker train realtalk --folds 1 --precision auto
	$(BIN)/lethe-lab reranker train locomo --folds 1 --precision auto
	$(BIN)/lethe-lab reranker teachers

matrix: teachers  ## RIF on LoCoMo and REALTALK under each teacher: 3 protocols x 5 seeds, raw reading, plus the calibrated ablation (resumable); then RESULTS.md
	$(TIMED) make-matrix -- $(MAKE) --no-print-directory matrix-steps

matrix-steps:
	$(BIN)/lethe-lab rif matrix
	$(BIN)/lethe-lab rif report

study: setup browser  ## the canonical build behind README's results, RESULTS.md, RERANKER.md and notebooks/README.md: one teacher (LoCoMo's fold teacher), fp32 ONNX; resumable
	$(TIMED) make-study $(FRESH) -- $(MAKE) --no-print-directory run matrix study-steps

# The 100-deep pools (notebooks 05, 06 and 14 read them) are scored here on both cores, before two kernels share them.
study-steps:
	$(BIN)/lethe-lab reranker report --backend onnx
	$(TIMED) pools-deep -- $(BIN)/lethe-lab pools build locomo --reranker fold --backend onnx --k-leg 100
	$(TIMED) notebooks-build -- $(BIN)/lethe-lab notebooks build --reranker fold --backend onnx --jobs 2

learning-curve: setup  ## held-out full/control NDCG@10 against training budget (five recipes, resumable; about 1.5 h on 2 cores)
	$(BIN)/lethe-lab reranker curve locomo

haystack: setup  ## the haystack size curve: systems and RIF (3 protocols, 5 seeds) on LoCoMo in 5.9k to 145k-turn haystacks (resumable; docs/haystack_study.md)
	$(BIN)/lethe-lab haystack

reproduce: reranker  ## RESULTS.md and RERANKER.md for the full fold recipe minilm-2fold instead (both second stages, three protocols, teacher study; torch)
	$(BIN)/lethe-lab reranker report minilm-2fold --backend torch
	$(BIN)/lethe-lab rif run locomo --reranker trained:minilm-2fold --backend torch --protocol paper --seeds 5
	$(BIN)/lethe-lab rif run locomo --reranker trained:minilm-2fold --backend torch --protocol heldout --seeds 5
	$(BIN)/lethe-lab rif run locomo --reranker trained:minilm-2fold --backend torch --protocol prequential --seeds 5
	$(BIN)/lethe-lab rif teacher locomo --reranker trained:minilm-2fold
	$(BIN)/lethe-lab rif report --reranker trained:minilm-2fold

notebooks: setup  ## execute every checkpoint notebook at full parameters (resumable) and regenerate notebooks/README.md
	$(BIN)/lethe-lab notebooks build

test: setup browser
	$(TIMED) make-test $(FRESH) --note "the venv set-up before it is not in this time" -- $(MAKE) --no-print-directory test-steps

test-steps:
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=15 -m "not heavy and not ray"
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q -m ray

parity-heavy: setup  ## the parity checks on whole datasets (ONNX bi-encoder vs NFCorpus's 0.3165; minutes)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q -m heavy

dashboard: setup
	$(BIN)/lethe-lab dashboard

screenshots: setup browser  ## one PNG per dashboard page under screenshots/ (gitignored), with render times
	$(BIN)/python dashboard/browser.py screenshots

bench: setup  ## retrieval latency on 200,000 synthetic turns, then RIF replay speed
	$(BIN)/python benchmarks/retrieval_latency.py --turns 200000
	$(BIN)/python benchmarks/rif_replay.py

clean-cache:
	rm -rf data/cache
