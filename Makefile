# lethe-lab: the README's commands. `make run` = main job on LoCoMo, `make test` = the test suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup run quick test bench clean-cache

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements.txt
	$(BIN)/pip install --disable-pip-version-check -q --no-deps -e .
	@touch $@

setup: $(STAMP)

run: setup  ## main job: describe LoCoMo, build its candidate pools, print the systems table
	$(BIN)/lethe-lab data describe locomo
	$(BIN)/lethe-lab systems locomo

quick: setup  ## the same on the first two conversations (a few minutes)
	$(BIN)/lethe-lab systems locomo --conversations 2

test: setup
	$(BIN)/python -m pytest -q

bench: setup  ## retrieval latency on 200,000 synthetic turns (long: embeds 200k texts once, then cached)
	$(BIN)/python benchmarks/retrieval_latency.py --turns 200000

clean-cache:
	rm -rf data/cache
