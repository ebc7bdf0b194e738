# Two entry points for a fresh clone:  make bench (build/bench.csv, build/bench.png)  and  make test
# (the tests but those marked slow, which make test-slow runs: CI runs both).
# Both install what is missing, then run from this checkout's src/. A python that already has
# torch and cuda.core (a GPU box) is used directly; elsewhere .venv gets torch 2.13.0 (CPU) and
# cuda-core with NVRTC (the kernels compile without a GPU; CI compiles every shipped variant).
PYTHON ?= python3
VENV   := .venv

SYSTEM_STACK := $(shell $(PYTHON) -c "import torch, cuda.core, cuda.bindings.nvrtc" >/dev/null 2>&1 && echo yes)

ifeq ($(SYSTEM_STACK),yes)
PY     := $(PYTHON)
STAMP  := build/.deps-system
$(STAMP): pyproject.toml
	@echo "using $(PYTHON): it has torch and cuda.core (no virtual environment)"
	@$(PY) -c "import pytest" 2>/dev/null || $(PY) -m pip install -q pytest \
	  || echo "pytest is missing and could not be installed: make test needs it"
	@$(PY) -c "import safetensors, transformers" 2>/dev/null || $(PY) -m pip install -q safetensors transformers \
	  || echo "safetensors / transformers could not be installed: the checkpoint tests will be skipped"
	@$(PY) -c "import matplotlib" 2>/dev/null || $(PY) -m pip install -q matplotlib \
	  || echo "matplotlib could not be installed: make bench's plot (build/bench.png) needs it"
	@mkdir -p build && touch $(STAMP)
else
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV) && $(PY) -m pip install -q --upgrade pip && \
	$(PY) -m pip install -q "torch==2.13.0" && \
	$(PY) -m pip install -q -e ".[test]"
	@touch $(STAMP)
endif
RUN    := PYTHONPATH=$(CURDIR)/src $(PY)

.PHONY: venv test test-slow bench check clean

venv: $(STAMP)

test: $(STAMP)
	$(RUN) -m pytest -q -rs -p no:cacheprovider -m "not slow"

# the tests marked slow (over ~10 s on a 2-core machine: every shipped kernel compiled, the 5,000-case fuzz run,
# every kernel family's shared memory read from every shipped variant)
test-slow: $(STAMP)
	$(RUN) -m pytest -q -rs -p no:cacheprovider -m slow

bench: $(STAMP)
	$(RUN) -m mxfp4 bench --record build/bench.csv --plot build/bench.png

check: $(STAMP)
	$(RUN) -m mxfp4 check

clean:
	rm -rf $(VENV) build src/*.egg-info
