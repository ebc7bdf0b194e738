# Two entry points for a fresh clone:  make bench  and  make test.
# Both create .venv, install what is missing, then run from this checkout's src/.
# A machine whose python already has torch (a GPU box) gets a venv that reuses it; elsewhere
# the venv gets torch 2.13.0 (CPU), triton 3.6.0 and numpy < 2.3 for Triton's CPU interpreter.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
RUN    := PYTHONPATH=$(CURDIR)/src $(PY)

.PHONY: venv test bench check clean

$(STAMP): pyproject.toml
	@if $(PYTHON) -c "import torch, triton" 2>/dev/null; then \
	  echo "using the system torch and triton (venv with --system-site-packages)"; \
	  $(PYTHON) -m venv --system-site-packages $(VENV); \
	  $(PY) -m pip install -q -e ".[test,bench]" \
	    || echo "pip install failed (offline?): running from src/ with the system packages"; \
	else \
	  $(PYTHON) -m venv $(VENV) && $(PY) -m pip install -q --upgrade pip && \
	  $(PY) -m pip install -q "torch==2.13.0" "triton==3.6.0" "numpy<2.3" && \
	  $(PY) -m pip install -q -e ".[test,bench]"; \
	fi
	@touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(RUN) -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(RUN) -m mxfp4 bench

check: $(STAMP)
	$(RUN) -m mxfp4 check

clean:
	rm -rf $(VENV) build src/*.egg-info
