# Two entry points for a fresh clone:  make bench  and  make test.
# Both create .venv (reusing a system torch/triton when one is importable, as on a GPU machine),
# install the package, then run. PYTHON picks the interpreter.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv test bench check clean

$(STAMP): pyproject.toml
	@if $(PYTHON) -c "import torch" 2>/dev/null; then \
	  echo "using the system torch (venv with --system-site-packages)"; \
	  $(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
	  $(PYTHON) -m venv $(VENV) && $(PY) -m pip install -q --upgrade pip && \
	  $(PY) -m pip install -q "torch==2.13.0"; \
	fi
	# triton 3.6.0: the GPU machine's version, so the CPU interpreter runs the same front end;
	# numpy < 2.3: triton 3.6's interpreter turns size-1 arrays into ints, which numpy 2.3 refuses.
	$(PY) -m pip install -q "triton==3.6.0" "numpy<2.3"
	$(PY) -m pip install -q -e ".[test,bench]"
	@touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) -m mxfp4 bench

check: $(STAMP)
	$(PY) -m mxfp4 check

clean:
	rm -rf $(VENV) build src/*.egg-info
