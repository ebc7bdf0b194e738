# Two entry points for a fresh clone:  make bench  and  make test.
# Both install what is missing, then run from this checkout's src/. A python that already has
# torch and triton (a GPU box) is used directly; elsewhere .venv gets torch 2.13.0 (CPU),
# triton 3.6.0 and numpy < 2.3 for Triton's CPU interpreter.
PYTHON ?= python3
VENV   := .venv

# A python that already imports torch and triton (a GPU box, often itself a venv or conda env)
# is used as it is: a venv made from it would not see its packages.
SYSTEM_STACK := $(shell $(PYTHON) -c "import torch, triton" >/dev/null 2>&1 && echo yes)

ifeq ($(SYSTEM_STACK),yes)
PY     := $(PYTHON)
STAMP  := build/.deps-system
$(STAMP): pyproject.toml
	@echo "using $(PYTHON): it has torch and triton (no virtual environment)"
	@$(PY) -c "import pytest" 2>/dev/null || $(PY) -m pip install -q pytest \
	  || echo "pytest is missing and could not be installed: make test needs it"
	@mkdir -p build && touch $(STAMP)
else
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV) && $(PY) -m pip install -q --upgrade pip && \
	$(PY) -m pip install -q "torch==2.13.0" "triton==3.6.0" "numpy<2.3" && \
	$(PY) -m pip install -q -e ".[test,bench]"
	@touch $(STAMP)
endif
RUN    := PYTHONPATH=$(CURDIR)/src $(PY)

.PHONY: venv test bench check clean

venv: $(STAMP)

test: $(STAMP)
	$(RUN) -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(RUN) -m mxfp4 bench

check: $(STAMP)
	$(RUN) -m mxfp4 check

clean:
	rm -rf $(VENV) build src/*.egg-info
