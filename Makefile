# mcpkit developer commands. `make serve` and `make test` do all set-up on a fresh machine.
# A host may launch `make serve` itself, so nothing but protocol may reach stdout: recipe lines are
# silent (@), make never names the directory it enters, and pip's output goes to stderr.
MAKEFLAGS += --no-print-directory
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.mcpkit-installed
PLUGIN_DIRS := $(patsubst %/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml))
# mcpkit's extras (Redis state, OAuth/JWT, hypercorn, OpenTelemetry, the dev watcher) and openapi's [embeddings] extra (hybrid
# ranking) are installed too, so `make serve` can use every setting and `make test` tests them all.
EDITABLES   := -e '.[test,dev,redis,oauth,hypercorn,otel]' $(foreach p,$(PLUGIN_DIRS),-e '$(p)$(if $(findstring openapi,$(p)),[embeddings])')

.PHONY: install serve test test-tools ts-fixtures fixtures conformance conformance-client bench bench-http bench-telemetry bench-instructions bench-gateway bench-scaleout bench-io bench-session dist fuzz clean

install: $(STAMP)

# The example plugins (hello, conformance) are test fixtures: never installed into the venv that
# `make serve` serves (an older venv may still have hello: it is taken out).
$(STAMP): Makefile pyproject.toml $(wildcard plugins/*/pyproject.toml)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "mcpkit needs Python >= 3.11" >&2; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) >&2
	@echo "make: installing mcpkit and the bundled plugins into $(VENV) (output on stderr)" >&2
	@$(PY) -m pip install -qq --upgrade pip >&2
	@$(PY) -m pip install -qq --config-settings editable_mode=compat $(EDITABLES) >&2
	@$(PY) -m pip uninstall --quiet --yes mcpkit-hello >&2 2>/dev/null || true
	@touch $@

serve: install
	@$(VENV)/bin/mcpkit serve

# The fixture plugins (examples/hello-plugin, examples/conformance-server) go into a folder of
# their own, seen only by the tests, benchmarks and the conformance run (PYTHONPATH), so
# `make serve` never serves them. tests/conftest.py builds it too when it is missing.
CONF_SITE := .conformance/site
FIXTURE_DIRS := examples/hello-plugin examples/conformance-server
$(CONF_SITE)/.fixtures: $(STAMP) $(foreach d,$(FIXTURE_DIRS),$(d)/pyproject.toml) $(wildcard examples/hello-plugin/hello_plugin/*.py examples/conformance-server/mcpkit_conformance/*.py)
	@rm -rf $(CONF_SITE)
	@$(PY) -m pip install -qq --no-deps --target $(CONF_SITE) $(FIXTURE_DIRS) >&2
	@touch $@

fixtures: $(CONF_SITE)/.fixtures

# The gateway tests run an upstream written on the official TypeScript SDK (tests/ts_upstream,
# versions pinned in its package.json; npm writes no lock file there).
TS_FIXTURE := tests/ts_upstream
$(TS_FIXTURE)/node_modules/.installed: $(TS_FIXTURE)/package.json
	@command -v npm >/dev/null || scripts/need-debian-packages nodejs npm
	@cd $(TS_FIXTURE) && npm install --no-audit --no-fund --loglevel=error >&2
	@touch $@

ts-fixtures: $(TS_FIXTURE)/node_modules/.installed

# The scale-out tests run a real redis-server and HAProxy, the console tests a headless Chromium driven
# through chromedriver, the metrics tests a real Prometheus (Debian packages, installed when missing).
test: install fixtures test-tools ts-fixtures
	$(VENV)/bin/lint-imports --no-logo --no-cache
	PYTHONPATH=$(CONF_SITE) $(VENV)/bin/pytest -q
	CONFORMANCE_EXTENSIONS=0 scripts/conformance

test-tools:
	@command -v redis-server >/dev/null && command -v haproxy >/dev/null && command -v prometheus >/dev/null || scripts/need-debian-packages redis-server haproxy prometheus
	@command -v chromium >/dev/null && test -x /usr/bin/chromedriver || scripts/need-debian-packages chromium chromium-driver
	@command -v openssl >/dev/null || scripts/need-debian-packages openssl  # test certificates (HTTPS, Redis over TLS)

# The official conformance harness against the conformance example plugin (installs both).
conformance: install fixtures
	scripts/conformance

# Only the client legs: the harness's mock servers against examples/conformance-client.
conformance-client: install
	scripts/conformance client

bench: install fixtures
	$(PY) bench/bench_stdio.py

# Wheels of mcpkit and the bundled plugins, for installing them outside this checkout
# (docs/installing.md).
DIST ?= dist
dist: install
	@rm -f $(DIST)/mcpkit*.whl
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir $(DIST) . $(PLUGIN_DIRS)
	@ls $(DIST)/*.whl

# I/O-bound tools, a session per call (the public MCP benchmark v2 workload): mcpkit against the
# official TypeScript SDK (npm packages pinned in bench/ts/package.json, no lock file kept) and the
# official Python SDK, with a catalogue API and a real redis-server on loopback. BENCH_IO_ARGS
# passes options, e.g. BENCH_IO_ARGS="--rounds 5 --json io.json".
BENCH_IO_ARGS ?=
$(VENV)/.bench-io-installed: bench/requirements-io.txt $(STAMP)
	@$(PY) -m pip install -qq -r bench/requirements-io.txt >&2
	@touch $@

bench/ts/node_modules/.installed: bench/ts/package.json
	@command -v npm >/dev/null || scripts/need-debian-packages nodejs npm
	@cd bench/ts && npm install --silent --no-package-lock >&2
	@touch $@

bench-io: install fixtures test-tools $(VENV)/.bench-io-installed bench/ts/node_modules/.installed
	$(PY) bench/bench_io.py $(BENCH_IO_ARGS)

# HTTP: mcpkit (own server, and on hypercorn) against the official SDK, with wrk (installed
# from Debian's packages when missing; that needs root).
bench-http: install fixtures
	@command -v wrk >/dev/null || scripts/need-debian-packages wrk
	$(PY) bench/bench_http.py

# What telemetry costs on the stateless tools/call path: off, --metrics, --metrics plus OTLP, and --traces
# (more with --variants, e.g. off,traces,traces-none,traces-ratio10; --micro 20000 for the span path alone).
bench-telemetry: install fixtures
	@command -v wrk >/dev/null || scripts/need-debian-packages wrk
	$(PY) bench/bench_telemetry.py

# Instructions per call under valgrind: a figure this noisy VM cannot move, for comparing two
# versions of the code (bench/bench_instructions.py; the goals are judged by the CPU benches).
bench-instructions: install fixtures
	@command -v valgrind >/dev/null || scripts/need-debian-packages valgrind
	@command -v wrk >/dev/null || scripts/need-debian-packages wrk
	$(PY) bench/bench_instructions.py

# mcpkit direct, through its gateway (stdio and HTTP upstreams) and FastMCP's proxy (installed
# into .bench/fastmcp-venv on first use), side by side (docs/benchmarks.md).
bench-gateway: install fixtures
	@command -v wrk >/dev/null || scripts/need-debian-packages wrk
	$(PY) bench/bench_gateway.py

# state = "memory" against state = "redis://..." on 1, 2 and 4 workers (redis-server and wrk
# installed from Debian's packages when missing).
bench-scaleout: install fixtures test-tools
	@command -v wrk >/dev/null || scripts/need-debian-packages wrk
	$(PY) bench/bench_scaleout.py

# What a session per call (initialize, initialized, tools/call, DELETE) costs the server against
# one stateless call, with memory and Redis state (redis-server from `make test-tools`).
bench-session: install fixtures test-tools
	$(PY) bench/bench_session_cost.py

# The fuzz and abuse campaign against real servers, 3 minutes per transport (a short run is in
# `make test`). FUZZ_SECONDS and FUZZ_SEED change it; the report goes to .fuzz-report.json too.
FUZZ_SECONDS ?= 180
FUZZ_SEED ?= 1
fuzz: install fixtures test-tools
	$(PY) fuzz/campaign.py --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED) --out .fuzz-report.json

clean:
	rm -rf $(VENV) .pytest_cache .conformance dist
