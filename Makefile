# evichain: the two commands of the README are `make all` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120
export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
comma := ,

.PHONY: all setup setup-core setup-llm repro demo demo-stages test ui clean-artifacts lock

# The main job on the bundled default (the demo dataset), LLM steps included: data, BM25,
# dense, the shared reader and direct inference, EviReform (LLM extraction, selection,
# reformulation; base and full), evaluation and the report. ~15 min on 2 cores.
DEMO_STAGES := prepare@demo retrieve_bm25@demo retrieve_dense@demo 'evaluate@demo-*' \
	read_direct@demo 'read@demo-*' 'evaluate_qa@demo-*' extract_propositions@demo \
	canonicalize_entities@demo evaluate_evireform@demo-base evaluate_evireform@demo-full

## all: install everything (venv, pinned deps, offline LLM) and run the main job on the demo
all: setup demo

## setup: venv + torch 2.13.0 (CPU) + pinned dependencies + the offline LLM
setup: setup-core setup-llm

setup-core: $(VENV)/.core-installed

$(VENV)/.core-installed: pyproject.toml constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade "pip>=24"
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -c constraints.txt -e ".[dev]"
	touch $@

setup-llm: $(VENV)/.llm-installed

$(VENV)/.llm-installed: $(VENV)/.core-installed scripts/setup_local_llm.sh
	PY=$(PY) bash scripts/setup_local_llm.sh
	touch $@

# Every recorded result again from the recorded LLM answers (reproduce/*.sqlite), 0 model
# calls: a fresh replay cache, then `dvc repro` of the stages dvc.lock records, under one
# Prefect server, with a progress line per stage (scripts/repro.py). REPRO_DATASETS=demo,musique
# limits it to some datasets. Stages never recorded (they need the model) are not started.
REPRO_DATASETS ?=

## repro: regenerate every recorded result (reports/) from the recorded answers, 0 model calls
repro: setup
	$(PY) -m scripts.repro $(if $(REPRO_DATASETS),--datasets $(REPRO_DATASETS),)
	@$(PY) -m scripts.results_summary --dataset $(or $(firstword $(subst $(comma), ,$(REPRO_DATASETS))),musique)

# The demo's LLM answers recorded with the offline model. llama.cpp at temperature 0 is not
# bit-stable across machines (a few of the demo's prompts get a different answer on different
# CPUs), so `make demo` first copies these answers into the LLM cache (answers already there are
# kept) and reproduces the committed numbers; any prompt they lack is sent to the model.
# `make demo DEMO_LIVE=1` skips the import and asks the model for every answer.
DEMO_CACHE := reproduce/demo-llm-cache.sqlite
DEMO_LIVE ?= 0

## demo: the main job on the bundled demo dataset, then the report
demo: setup
	@if [ "$(DEMO_LIVE)" = "1" ]; then echo "DEMO_LIVE=1: every LLM answer from the model"; \
	else $(VENV)/bin/evichain cache import $(DEMO_CACHE); fi
	$(PY) -m scripts.prefect_session -- $(MAKE) --no-print-directory demo-stages
	@$(PY) -m scripts.results_summary --dataset demo

# the demo's stages, then the report (one Prefect server serves both: `make demo`)
demo-stages:
	$(VENV)/bin/dvc repro --glob $(DEMO_STAGES)
	$(VENV)/bin/dvc repro --single-item report

## test: the offline test suite (installs the core dependencies first if needed)
test: setup-core
	$(PY) -m pytest -q

## ui: a local Prefect server with its UI on http://127.0.0.1:4200 (then: export PREFECT_API_URL=http://127.0.0.1:4200/api)
ui: setup-core
	$(VENV)/bin/prefect server start --host 127.0.0.1 --port 4200

## lock: refresh constraints.txt from the current venv
lock:
	$(PIP) freeze --exclude-editable | grep -v '^evichain' > constraints.txt

clean-artifacts:
	rm -rf artifacts
