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

.PHONY: all setup setup-core setup-llm repro demo test ui clean-artifacts lock

## all: install everything (venv, pinned deps, offline LLM) and run the pipeline (dvc repro)
all: setup repro

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

## repro: run every DVC stage that is out of date
repro: setup
	$(VENV)/bin/dvc repro

## demo: only the bundled demo dataset, end to end
demo: setup
	$(VENV)/bin/dvc repro --glob 'prepare@demo' 'retrieve_*@demo' 'evaluate@demo-*' report

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
