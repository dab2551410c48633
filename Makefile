# foxlib — the Makefile is the table of contents. `make` lists the targets.
PY      ?= python3
VENV    := .venv
PYTHON  := $(VENV)/bin/python
STAMP   := $(VENV)/.foxlib-installed
WAVE    ?= 8.10
# extra notebook parameters: make report WAVE=8.10 P="preset=small batch_size=8"; a value with spaces
# or ';' in single quotes: make report WAVE=8.12 P="strategies='fp32 (baseline);bf16;checkpoint blocks'"
P       ?=
# WAVE and P reach the commands through the environment ("$$P"), never pasted into a shell line:
# no character in them can end or change the command; foxlib splits P like a shell (shlex)
export WAVE P
# a failed command fails make, also in a pipeline or loop
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -ec

.DEFAULT_GOAL := help
PEER_VENV  := .venv-peer
PEER_STAMP := $(PEER_VENV)/.foxlib-peer-installed
REPEATS ?= 10
# the peer benchmark's torch.compile rows: auto = on for CUDA, off on the CPU (minutes per row there)
COMPILE ?= auto
export COMPILE
# a folder of measurement files from scripts/h200.sh (the device tool's $OUT, copied here)
MEASURED ?= device-out/h200

.PHONY: help venv report reports test test-isa test-fast browser screenshot lab waves clean-venv peer-bench peer-test render

help: ## list the targets with what they do
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): requirements.txt pyproject.toml
	@echo "setting up $(VENV) (pinned packages from requirements.txt, CPU torch where there is no GPU)"
	$(PY) -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -r requirements.txt
	$(PYTHON) -m pip install -q --no-deps -e .
	$(PYTHON) -m ipykernel install --sys-prefix --name foxlib --display-name foxlib
	@touch $(STAMP)

venv: $(STAMP) ## create the environment if it is missing (a venv with pinned packages + the foxlib kernel)

report: $(STAMP) ## run one wave on the best device here: make report WAVE=8.10 [P="name=value ..."]
	$(PYTHON) -m foxlib report --wave "$$WAVE" --parameters "$$P"

reports: $(STAMP) ## run every wave in dependency order (8.10 .. 8.13), then write reports/index.html
	$(PYTHON) -m foxlib reports --parameters "$$P"

# a results file's device folder (reports/<device>/)
DEVICE_OF = $(PYTHON) -c "import json,sys; print(json.load(open(sys.argv[1]))['device']['short'])"

render: $(STAMP) ## render a GPU run's measurements into reports/<device>/: make render MEASURED=<folder>
	@test -d "$(MEASURED)" || (echo "no folder $(MEASURED): run scripts/h200.sh on the GPU machine first (README)"; exit 2)
	@if [ -f "$(MEASURED)/wave-8.12-timelines.tgz" ]; then tar -C "$(MEASURED)" -xzf "$(MEASURED)/wave-8.12-timelines.tgz"; fi
	@for w in 8.10 8.11 8.12 8.13; do f="$(abspath $(MEASURED))/wave-$$w.json"; \
	  if [ -f "$$f" ]; then $(PYTHON) -m foxlib report --wave $$w -p measurements="$$f" || exit 1; fi; done
	@for f in $(MEASURED)/wave-8.13-card_class-*.json; do [ -f "$$f" ] || continue; \
	  $(PYTHON) -m foxlib report --wave 8.13 -p measurements="$$(realpath "$$f")" || exit 1; done
	@for f in $(MEASURED)/peer-benchmark*.json; do [ -f "$$f" ] || continue; \
	  d=$$($(DEVICE_OF) "$$f"); \
	  mkdir -p reports/$$d && cp "$$f" reports/$$d/ && \
	  $(PYTHON) benchmarks/peer_tft.py --render "reports/$$d/$$(basename $$f)" --html "reports/$$d/$$(basename $$f .json).html" || exit 1; done
	@f="$(MEASURED)/throughput.json"; if [ -f "$$f" ]; then \
	  d=$$($(DEVICE_OF) "$$f"); \
	  mkdir -p reports/$$d && cp "$$f" reports/$$d/throughput-benchmark.json && \
	  $(PYTHON) -m foxlib.report.throughput_page reports/$$d/throughput-benchmark.json \
	    reports/$$d/throughput-benchmark.md reports/$$d/throughput-benchmark.html || exit 1; fi
	$(PYTHON) -m foxlib index

waves: $(STAMP) ## list the waves with their titles and verdicts
	$(PYTHON) -m foxlib waves

test: $(STAMP) browser ## everything, what CI runs (under 6 minutes on 2 cores): pytest on two workers, then the prediction tests under two capped CPU ISAs
	$(PYTHON) -m pytest -q -rs -n 2 --dist loadfile
	PYTHON=$(PYTHON) bash scripts/test-isa.sh -m "not slow"

test-isa: $(STAMP) ## the prediction and profiler tests under the AVX2 and avx512_bf16 (no AMX) caps this CPU has (others skipped, said why)
	PYTHON=$(PYTHON) bash scripts/test-isa.sh

test-fast: $(STAMP) ## the unit tier only: no notebook runs, no browser, on two workers (under a minute on 2 cores)
	$(PYTHON) -m pytest -q -rs -n 2 --dist loadfile -m "not slow"

browser: ## install headless Chromium for the report tests if it is missing (Debian's package)
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  (echo "installing chromium for the browser tests"; apt-get update -q && apt-get install -y -q chromium >/dev/null) || \
	  echo "could not install chromium: the browser tests will fail; install it by hand"

screenshot: $(STAMP) ## screenshots of the index and the H200 wave 8.12 report into reports/
	$(PYTHON) -c "from foxlib.report.browser import screenshot; screenshot('reports/index.html', 'reports/screenshot-index.png'); screenshot('reports/h200/wave-8.12/report.html', 'reports/screenshot-h200-wave-8.12.png')"

$(PEER_STAMP): requirements-peer.txt requirements-peer-nodeps.txt pyproject.toml
	@echo "setting up $(PEER_VENV) for the peer benchmark (pytorch-forecasting, neuralforecast, darts; not needed by the workbook)"
	$(PY) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/python -m pip install -q --upgrade pip
	$(PEER_VENV)/bin/python -m pip install -q -r requirements-peer.txt
	$(PEER_VENV)/bin/python -m pip install -q --no-deps -r requirements-peer-nodeps.txt
	$(PEER_VENV)/bin/python -m pip install -q --no-deps -e .
	@touch $(PEER_STAMP)

peer-bench: $(STAMP) $(PEER_STAMP) ## foxlib's TFT against pytorch-forecasting's, neuralforecast's and darts', same config and their defaults, into reports/<device>/peer-benchmark.* [COMPILE=auto|on|off]
	$(PEER_VENV)/bin/python benchmarks/peer_tft.py --device auto --preset seed --repeats $(REPEATS) --compile "$$COMPILE" --html auto
	$(PYTHON) -m foxlib index

peer-test: $(PEER_STAMP) ## the peer benchmark's tests, with pytorch-forecasting, neuralforecast and darts installed
	$(PEER_VENV)/bin/python -m pytest -q -rs tests/test_peer_benchmark.py

lab: $(STAMP) ## open JupyterLab on the project's kernel (notebooks/*.py open as notebooks, via jupytext)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $$([ "$$(id -u)" = 0 ] && echo --allow-root || true)

clean-venv: ## remove the environment
	rm -rf $(VENV)
