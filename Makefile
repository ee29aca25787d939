# mcpkit developer commands. `make serve` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.mcpkit-installed
PLUGIN_DIRS := $(patsubst %/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml))
EDITABLES   := -e '.[test]' $(foreach p,$(PLUGIN_DIRS),-e $(p)) -e examples/hello-plugin

.PHONY: install serve test conformance conformance-client bench bench-http fuzz clean

install: $(STAMP)

$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml) examples/hello-plugin/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "mcpkit needs Python >= 3.11"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --config-settings editable_mode=compat $(EDITABLES)
	@touch $@

serve: install
	@$(VENV)/bin/mcpkit serve

# The conformance fixture plugin goes into a folder of its own, seen only by the tests and the
# conformance run (PYTHONPATH), so `make serve` never serves its fixtures.
CONF_SITE := .conformance/site
$(CONF_SITE)/.stamp: $(STAMP) examples/conformance-server/pyproject.toml $(wildcard examples/conformance-server/mcpkit_conformance/*.py)
	rm -rf $(CONF_SITE)
	$(PY) -m pip install --quiet --no-deps --target $(CONF_SITE) examples/conformance-server
	@touch $@

test: install $(CONF_SITE)/.stamp
	PYTHONPATH=$(CONF_SITE) $(VENV)/bin/pytest -q
	CONFORMANCE_EXTENSIONS=0 scripts/conformance

# The official conformance harness against the conformance example plugin (installs both).
conformance: install $(CONF_SITE)/.stamp
	scripts/conformance

# Only the client legs: the harness's mock servers against examples/conformance-client.
conformance-client: install
	scripts/conformance client

bench: install
	$(PY) bench/bench_stdio.py

# HTTP: mcpkit (own server, and on hypercorn) against the official SDK, with wrk (installed
# from Debian's packages when missing; that needs root).
bench-http: install
	@command -v wrk >/dev/null || scripts/need-debian-packages wrk
	$(PY) bench/bench_http.py

# The fuzz and abuse campaign against real servers, 3 minutes per transport (a short run is in
# `make test`). FUZZ_SECONDS and FUZZ_SEED change it; the report goes to .fuzz-report.json too.
FUZZ_SECONDS ?= 180
FUZZ_SEED ?= 1
fuzz: install $(CONF_SITE)/.stamp
	$(PY) fuzz/campaign.py --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED) --out .fuzz-report.json

clean:
	rm -rf $(VENV) .pytest_cache
