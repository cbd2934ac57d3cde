# Two commands: `make run` serves the sample data, `make test` checks everything.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SERVE_STAMP := $(VENV)/.installed-serve
DB ?= $(or $(REPORTING_DB),reporting.sqlite3)
FIXTURES ?= fixtures/sample.json
BENCH_DB := bench-data/bench.sqlite3
BENCH_LARGE_DB := bench-data/bench-large.sqlite3
BENCH_TENTH_DB := bench-data/bench-tenth.sqlite3

# The suite starts many Python processes (servers, tools, pytest's workers): let them keep
# their compiled modules, even where the environment says not to (a clean clone's
# collection alone takes twice as long without them), here and in .venv.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-fast lint load clean bench bench-data bench-smoke keys wrk redis postgresql \
	bench-data-large bench-large bench-data-tenth bench-tenth \
	chromium vendor-charts screenshots

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Python 3.11 is needed ($(PYTHON) not found); set PYTHON=..."; exit 1; }
	$(PYTHON) -m venv $(VENV)

# Two installs: serving needs only the package (make run, load, keys, bench); the test
# tools (pytest, hypothesis, schemathesis, ruff, mypy) come with make test and make lint.
# --no-compile: Python compiles (and keeps) only the modules it imports, when it does.
$(SERVE_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e .
	touch $(SERVE_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[test]'
	touch $(STAMP)

## make run: set up, create the database from the sample data if missing, serve on 127.0.0.1:8080
run: $(SERVE_STAMP)
	$(BIN)/reporting-api --db $(DB)

# The suite runs in TEST_PROCESSES processes (pytest-xdist), one per core of the 2-core
# machines it is kept fast on; each has its own Redis and PostgreSQL cluster on free ports.
# worksteal hands tests queued behind a long one to an idle process. TEST_PROCESSES=0 runs
# everything in pytest's own process.
TEST_PROCESSES ?= 2
PARALLEL = -n $(TEST_PROCESSES) --dist worksteal

## make test: set up with the test extras, lint (ruff, formatting, mypy), run the whole suite
## in TEST_PROCESSES processes (with Redis; on SQLite and on a throwaway PostgreSQL cluster;
## Swagger UI and the dashboard in chromium)
test: lint redis postgresql chromium
	$(BIN)/python -m pytest $(PARALLEL)

## make test-fast: the tests that start no process (servers, tools, builds are marked system),
## in TEST_PROCESSES processes too
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not system" $(PARALLEL)

## make lint: ruff check, ruff format --check and mypy (strict, on app/ and scripts/: see pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

## make load: load FIXTURES into DB (all or nothing)
load: $(SERVE_STAMP)
	$(BIN)/reporting-load $(FIXTURES) --db $(DB)

## make keys: list the API keys of DB
keys: $(SERVE_STAMP)
	$(BIN)/reporting-keys --db $(DB) list

## make clean: delete .venv, the caches, bench-data and the database reporting.sqlite3
clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis .schemathesis bench-data
	rm -f reporting.sqlite3 reporting.sqlite3-wal reporting.sqlite3-shm
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

## make postgresql: install PostgreSQL's server when missing (the tests start a throwaway cluster)
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } || \
	  echo "PostgreSQL could not be installed (apt-get install postgresql): its tests will skip"

wrk:
	@command -v wrk >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; } || \
	  { echo "wrk is needed: apt-get install wrk"; exit 1; }

# redis-server for the shared rate limit's tests and benchmark (Debian's package, as root).
# Without it those tests are skipped, except in CI (CI=true), where they fail.
redis:
	@command -v redis-server >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } || \
	  echo "redis-server is missing and could not be installed: apt-get install redis-server"

# Debian's chromium for the browser tests (Swagger UI, the dashboard), driven by Playwright:
# never a browser build downloaded by Playwright. Without it those tests are skipped, except
# in CI (CI=true), where they fail.
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "chromium is missing and could not be installed: apt-get install chromium"

BENCH_SIZES := --companies 2 --employees 20000 --campaigns 100 --events-per-campaign 3980 \
	--big-campaign 100000 --mid-campaign 10000 --courses 40 --inscriptions 100000 --sections 5 \
	--seed 1

## make bench-data: the standard large dataset (2 companies, 500,040 events, 100,000 inscriptions)
bench-data: $(SERVE_STAMP)
	@mkdir -p bench-data; test -f $(BENCH_DB) || $(BIN)/reporting-generate --db $(BENCH_DB) \
	  $(BENCH_SIZES)

# Ten times the standard set in people, events, targets and inscriptions (the same 100
# campaigns and 40 courses): about 5.4 GB and 13 minutes on 2 cores, written to a .partial
# file renamed when complete.
## make bench-data-large: the large set (200,000 employees, 5,000,400 events, 1,000,000 inscriptions)
bench-data-large: $(SERVE_STAMP)
	@mkdir -p bench-data; test -f $(BENCH_LARGE_DB) || { rm -f $(BENCH_LARGE_DB).partial* && \
	  $(BIN)/reporting-generate --db $(BENCH_LARGE_DB).partial $(BENCH_SIZES) --scale 10 && \
	  mv $(BENCH_LARGE_DB).partial $(BENCH_LARGE_DB); }

# Every scenario runs on PostgreSQL too when its server is installed (a throwaway cluster).
WITH_PG = $$(ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && echo --postgresql auto)

## make bench: the benchmark table against the large dataset (never part of make test)
bench: $(SERVE_STAMP) wrk redis postgresql bench-data
	$(BIN)/python scripts/bench.py --db $(BENCH_DB) $(WITH_PG)

## make bench-large: every report, stats, page and stream row on the standard and the large set
bench-large: $(SERVE_STAMP) bench-data bench-data-large
	$(BIN)/python scripts/bench_large.py --db $(BENCH_DB) --large $(BENCH_LARGE_DB)

# A tenth of the standard set: the standard set is this one's --scale 10.
BENCH_TENTH_SIZES := --companies 2 --employees 2000 --campaigns 100 --events-per-campaign 398 \
	--big-campaign 10000 --mid-campaign 1000 --courses 40 --inscriptions 10000 --sections 5 \
	--seed 1
## make bench-data-tenth: a tenth of the standard set (2,000 employees, 50,004 events, 10,000 inscriptions)
bench-data-tenth: $(SERVE_STAMP)
	@mkdir -p bench-data; test -f $(BENCH_TENTH_DB) || $(BIN)/reporting-generate \
	  --db $(BENCH_TENTH_DB) $(BENCH_TENTH_SIZES)

## make bench-tenth: the same comparison one size down: a tenth of the standard set against it
bench-tenth: $(SERVE_STAMP) bench-data bench-data-tenth
	$(BIN)/python scripts/bench_large.py --db $(BENCH_TENTH_DB) --large $(BENCH_DB) \
	  --name bench-tenth

## make bench-smoke: the same benchmarks for a few seconds on tiny datasets (CI runs it)
bench-smoke: $(SERVE_STAMP) wrk redis postgresql
	$(BIN)/python scripts/bench.py --smoke $(WITH_PG)
	$(BIN)/python scripts/bench_large.py --smoke

# The dashboard's chart library (uPlot, MIT), vendored at a pinned version so that
# `make run` needs no Node: npm pack fetches the published tarball (integrity-checked
# against the registry) into a temporary directory, and the built file, its stylesheet
# and its licence are copied into the package. Run it only to move to another version.
UPLOT_VERSION := 1.6.32
DASHBOARD_VENDOR := app/web/static/dashboard
## make vendor-charts: fetch uPlot UPLOT_VERSION from the npm registry into the package (needs npm)
vendor-charts:
	@command -v npm >/dev/null 2>&1 || { echo "npm is needed: apt-get install npm"; exit 1; }
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  (cd "$$tmp" && npm pack --silent uplot@$(UPLOT_VERSION) >/dev/null && tar xzf uplot-$(UPLOT_VERSION).tgz) && \
	  cp "$$tmp/package/dist/uPlot.iife.min.js" "$$tmp/package/dist/uPlot.min.css" $(DASHBOARD_VENDOR)/ && \
	  cp "$$tmp/package/LICENSE" $(DASHBOARD_VENDOR)/uPlot.LICENSE && \
	  echo "uPlot $(UPLOT_VERSION) copied into $(DASHBOARD_VENDOR)"

## make screenshots: the dashboard's views as PNG files in docs/img (needs chromium)
screenshots: $(STAMP) chromium
	$(BIN)/python -m tests.support.screenshots docs/img
