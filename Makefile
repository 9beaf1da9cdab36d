# One entry point for developers and CI. `make check` is what CI runs.
PY ?= .venv/bin/python
BIN := $(dir $(PY))

.PHONY: setup demo check fmt format-check lint types contracts test bench clean

.venv/bin/python:
	python3 -m venv .venv

setup: .venv/bin/python
	bash .ci/system-deps.sh
	bash .ci/node-deps.sh
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'

demo: setup
	$(BIN)supervisor demo

fmt:
	$(BIN)ruff format .
	$(BIN)ruff check --fix .

format-check:
	$(BIN)ruff format --check .

lint:
	$(BIN)ruff check .

types:
	$(BIN)mypy

contracts:
	$(BIN)lint-imports

test:
	$(PY) -m pytest -q

check: format-check lint types contracts test

# The quick set (about 2 minutes); bench/RESULTS.md gives each full command, and the MemoRizz
# peers' venv (bench_seed_peer.py, bench_memorizz_peer.py).
bench:
	$(PY) bench/bench_dispatch.py
	$(PY) bench/bench_runtime.py --rounds 5 --decisions 0
	$(PY) bench/bench_ingest.py --quick
	$(PY) bench/bench_team.py --quick --no-tui

clean:
	rm -rf .venv .mypy_cache .ruff_cache .pytest_cache build dist
