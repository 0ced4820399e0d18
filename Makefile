# Everything a learner or CI needs, in two commands:  make lab  |  make test
PYTHON ?= python3
VENV ?= .venv
# CI sets TORCH_SPEC=torch==2.13.0 (a CPU build on local disk); users get the plain requirement.
TORCH_SPEC ?= torch
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install lab test test-fast lint compile strip clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

lab: $(STAMP)
	$(BIN)/python -m mamba2_tutorial env
	$(BIN)/jupyter lab notebooks/00_start_here.ipynb

lint: $(STAMP)
	$(BIN)/ruff check .

compile: $(STAMP)
	$(BIN)/python -m mamba2_tutorial compile

# The whole suite: lint, ahead-of-time compile of every kernel, unit tests and every notebook (nbval).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m mamba2_tutorial compile
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest tests

strip: $(STAMP)
	$(BIN)/nbstripout --keep-id notebooks/*.ipynb notebooks/*/*.ipynb

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
