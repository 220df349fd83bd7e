# Two commands do the whole set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: install demo test test-slow lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The pinned CPU build of torch first: a bare `torch` requirement can pull a multi-GB CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0 || $(BIN)/python -m pip install -q 'torch>=2.4'
	$(BIN)/python -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/python scripts/demo.py

test: install
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/python -m pytest

test-slow: install
	$(BIN)/python -m pytest -m slow

lint: install
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

bench: install
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
