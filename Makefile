# The two set-up commands for a fresh machine are `make demo` and `make test`;
# both install what they need first (scripts/install-deps.sh, idempotent).
PYTHON ?= python3
PYTEST_ARGS ?=

.PHONY: deps demo test test-pyspark35 unit integration lint docs options-doc dist screenshots bench clean

deps:
	@bash scripts/install-deps.sh

demo: deps
	$(PYTHON) -m dstream_exactly_once.cli demo

# The suite as three pytest processes side by side (the tests marked slow as two balanced groups of files
# beside the rest, each with its own services, ports and temp dirs; any failing fails the target):
# scripts/run-tests.sh.
# PYTEST_ARGS (a -k selection, a file) runs one ordinary pytest instead.
test: deps lint
	PYTHON=$(PYTHON) bash scripts/run-tests.sh $(PYTEST_ARGS)

# The core suite again on PySpark 3.5 (its own virtualenv); CI runs it beside `make test` (.ci/run).
test-pyspark35: deps
	bash scripts/test-pyspark35.sh $(PYTEST_ARGS)

unit: deps
	$(PYTHON) -m pytest tests/unit $(PYTEST_ARGS)

integration: deps
	$(PYTHON) -m pytest tests/integration $(PYTEST_ARGS)

lint: deps
	$(PYTHON) -m ruff check dstream_exactly_once tests examples bench
	$(PYTHON) -m mypy

# The API reference from the docstrings (Sphinx autodoc), warnings as errors; open build/api/index.html.
# `make test` builds it too (tests/integration/test_api_docs.py).
docs: deps
	$(PYTHON) -m sphinx -W --keep-going -b html docs/api build/api

# docs/options.md's option tables, generated from the option registry (a unit test checks they are current).
options-doc:
	$(PYTHON) -m dstream_exactly_once.cli._options_doc docs/options.md

# What a cluster deployment ships (docs/deploy.md): the wheel, and the zip for `spark-submit --py-files`
# (the package with kafka-python; PySpark's workers import .zip files, never .whl). DIST=dir writes elsewhere.
DIST ?= dist
dist:
	$(PYTHON) scripts/build_dist.py $(DIST)

# The Streaming tab pictures in docs/images (headless Chromium, installed if needed); not part of `make test`.
screenshots: deps
	bash scripts/screenshot-streaming-tab.sh

bench: deps
	$(PYTHON) -m bench

clean:
	rm -rf .deps-stamp build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
