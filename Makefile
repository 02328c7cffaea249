# Two commands do all set-up on a fresh machine with only python3:
#   make verify  - bootstrap .venv, run the default suites on the emulated MLU, write reports/latest/
#   make test    - bootstrap .venv, run mluverify's own tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: verify test gate bench venv

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[vision,dev]'
	touch $(STAMP)

verify: $(STAMP)
	$(BIN)/mluverify run

# The default suites against the committed baseline; fails on any regression (CI runs it).
gate: $(STAMP)
	$(BIN)/mluverify run -- --mlu-baseline reports/baseline --mlu-gate

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done
