# Everything a learner or CI needs, in two commands:  make lab  |  make test  (and the pre-class check: make env)
# Linux and macOS (on macOS, without cuTile: `make test` skips what needs it, saying so). Windows: see README.
# VENV may come from the environment: the dev container keeps its virtual environment outside the mounted
# repository (.devcontainer/devcontainer.json), so that it never meets a macOS .venv there.
PYTHON ?= python3
VENV ?= .venv
# CI sets TORCH_SPEC=torch==2.13.0 (a CPU build on local disk); users get the plain requirement.
TORCH_SPEC ?= torch
# An index for torch alone, e.g. https://download.pytorch.org/whl/cpu for the small CPU build (the dev container).
TORCH_INDEX ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install env lab test test-fast rung lint compile strip clean

# --no-compile: the install does not compile every file of every package to bytecode (most of torch's and
# jupyterlab's are never imported here); one import of what the notebooks and tests use compiles those modules
# once, so that the test processes started side by side do not each compile them again.
PIP := $(BIN)/python -m pip install --quiet --no-compile
WARM := torch, matplotlib.pyplot, ipykernel.kernelapp, nbval.plugin, transformers, mamba2_tutorial

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(PIP) $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)") "$(TORCH_SPEC)"
	$(PIP) -e ".[dev]"
	$(BIN)/python -c "import $(WARM)"
	touch $(STAMP)

install: $(STAMP)

# The pre-class check: the environment report, ending with the verdict (which notebooks run on this machine).
env: $(STAMP)
	$(BIN)/python -m mamba2_tutorial env

# As root (a container, a cloud notebook VM, many classroom images) JupyterLab refuses to start unless told
# --allow-root: say so in one line and pass it. LAB_ARGS adds options (e.g. LAB_ARGS="--no-browser --port 8890").
ROOT_USER := $(filter 0,$(shell id -u 2>/dev/null))
LAB_ARGS ?=

lab: $(STAMP)
	$(BIN)/python -m mamba2_tutorial env
	@$(if $(ROOT_USER),echo "make lab: running as root: JupyterLab starts with --allow-root.")
	$(BIN)/jupyter lab $(if $(ROOT_USER),--allow-root) $(LAB_ARGS) notebooks/00_start_here.ipynb

lint: $(STAMP)
	$(BIN)/ruff check .

compile: $(STAMP)
	$(BIN)/python -m mamba2_tutorial compile

# The whole suite: lint, then pytest on every core: the unit tests, the ahead-of-time compile check
# (tests/test_compile_check.py: every kernel spec for sm_90, one spec of each kernel for the other architectures;
# `make compile` is the whole matrix) and every notebook (nbval). Where cuda-tile has no wheels (macOS) what needs
# cuTile is skipped, saying so. Each phase's time is printed at the end. JOBS: pytest worker processes.
JOBS ?= auto
PHASES := $(VENV)/.test-phases
timed = echo '$(2)'; t=$$(date +%s); $(2); rc=$$?; echo "$(1) $$(( $$(date +%s) - t ))" >> $(PHASES); exit $$rc

test: $(STAMP)
	@rm -f $(PHASES)
	@$(call timed,lint,$(BIN)/ruff check .)
	@$(call timed,pytest,$(BIN)/python -m pytest -n $(JOBS) --dist loadgroup --durations=10)
	@echo "make test phases: $$(awk '{printf "%s%s %s s", (NR > 1 ? ", " : ""), $$1, $$2}' $(PHASES))"

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadgroup tests

# One rung alone, e.g. `make rung N=07`: its notebook, and its exercise's solution where it has one.
rung: $(STAMP)
	@test -n "$(N)" || { echo 'make rung: say which rung, e.g. `make rung N=07`'; exit 2; }
	@test -n "$(wildcard notebooks/$(N)_*.ipynb)" || { echo "make rung: no notebooks/$(N)_*.ipynb"; exit 2; }
	$(BIN)/python -m pytest $(wildcard notebooks/$(N)_*.ipynb notebooks/solutions/ex$(N)_*.ipynb)

strip: $(STAMP)
	$(BIN)/nbstripout --keep-id notebooks/*.ipynb notebooks/*/*.ipynb

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
