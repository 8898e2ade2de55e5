# One command to run the farm, one to test it. Both do their own set-up first.
SHELL := /bin/bash
.DEFAULT_GOAL := run

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The venv holds the pinned packages and this repository's webfarm, installed
# editable (its metadata gives webfarm.__version__): redone when either changes.
REQ_STAMP := $(VENV)/.req-$(shell cat requirements.txt pyproject.toml | sha1sum | cut -c1-16)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get
APT_UPDATED := /tmp/.webfarm-apt-updated

# Where `make run` listens.
HOST ?= 127.0.0.1
PORT ?= 8000
# Where `make run` starts its memcached (or uses the one that answers there).
MEMCACHED_PORT ?= 11211
# pytest-xdist workers: farm tests mostly wait on processes, so a 2-core
# machine keeps three busy (CONTRIBUTING.md, "Time", has the measurements).
TEST_WORKERS ?= 3
CHECK_WORKERS ?= 3

# The second leg of `make test`, today's stack: Python 3.13 with Django 6.1
# (requirements-py313.txt). The interpreter is the machine's own (on PATH, or
# pyenv's); where it has none, `make test` says plainly that it skipped the
# leg, and REQUIRE_PY313=1 (as .ci/run sets) makes that a failure.
ifndef PY313
PY313 := $(shell for p in python3.13 $$HOME/.pyenv/versions/3.13*/bin/python3.13; do \
  "$$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null \
  && { command -v "$$p"; break; }; done)
endif
VENV313 := .venv-py313
REQ313_STAMP := $(VENV313)/.req-$(shell cat requirements-py313.txt pyproject.toml | sha1sum | cut -c1-16)
# Two suites, each on its own project (tests/harness/suites.py): the
# library's on its test project, the demo's on the demo's settings.
LIBRARY_TESTS := tests/unit
DEMO_TESTS := tests/demo tests/farm tests/hosts tests/browser
# What the Python 3.13 leg runs: everything that starts no farm, and the
# wheel in a project of its own, end to end in Chromium.
PY313_DEMO_TESTS := tests/demo tests/farm/test_install.py tests/browser/test_installed_site.py

.PHONY: setup system-packages test-packages farm-packages venv bytecode migrate demo run farm test test-py313 check bench lint clean

setup: system-packages venv bytecode migrate demo

# Install an OS package when its command is missing: $(call need,command,package)
define need
	@command -v $(1) >/dev/null 2>&1 || { \
	  [ -f $(APT_UPDATED) ] || { $(APT) update -qq && touch $(APT_UPDATED); }; \
	  echo "installing $(2) from the OS packages"; $(APT) install -y -qq $(2) >/dev/null; }
endef

system-packages:
	$(call need,memcached,memcached)
	$(call need,redis-server,redis-server)

# The balancer of `make farm` (the tests and benchmarks drive a farm through it too).
farm-packages:
	$(call need,nginx,nginx)

# Only the tests and benchmarks need a browser, a load generator,
# PostgreSQL's programs (they start a server of their own on a free port) and
# iproute2 (the farm of hosts is built of network namespaces).
test-packages: farm-packages
	$(call need,chromium,chromium)
	$(call need,wrk,wrk)
	$(call need,ip,iproute2)
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  [ -f $(APT_UPDATED) ] || { $(APT) update -qq && touch $(APT_UPDATED); }; \
	  echo "installing postgresql from the OS packages"; $(APT) install -y -qq postgresql >/dev/null; }

venv: $(REQ_STAMP)
$(REQ_STAMP): requirements.txt pyproject.toml
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	@rm -f $(VENV)/.req-* && touch $@

# Every process the farm and the tests start imports the project: compiled
# once here, not in each (where PYTHONDONTWRITEBYTECODE is set, none writes it).
bytecode: venv
	@$(PY) -m compileall -q -j 0 webfarm demofarm tests bench manage.py >/dev/null

# A demo database from before webfarm 1.0 (whose migrations 1.0 squashed) is made anew: it says so.
migrate: venv
	@$(PY) manage.py stale_demo_database
	@$(PY) manage.py migrate --no-input -v 0
	@$(PY) manage.py collectstatic --no-input -v 0

demo: migrate
	@$(PY) manage.py seed_demo

run: setup
	@$(PY) -m demofarm.launch --host $(HOST) --port $(PORT) --memcached-port $(MEMCACHED_PORT)

# nginx in front of web nodes, workers, beat, two memcached and PostgreSQL (docs/farm.md).
farm: setup farm-packages
	@$(PY) -m demofarm.farm --port $(PORT)

test: setup test-packages lint
	$(PY) -m pytest $(LIBRARY_TESTS) -n $(TEST_WORKERS) --dist loadgroup
	$(PY) -m pytest $(DEMO_TESTS) -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=15
	@$(MAKE) --no-print-directory test-py313

ifeq ($(PY313),)
test-py313:
	@if [ "$(REQUIRE_PY313)" = 1 ]; then \
	  echo "FAILED: the Python 3.13 + Django 6.1 leg is required here, and this machine has no python3.13" >&2; \
	  exit 1; \
	fi
	@echo
	@echo "SKIPPED the Python 3.13 + Django 6.1 leg: this machine has no python3.13."
	@echo "  Install one (pyenv install 3.13, or the OS's python3.13), or name it: make test PY313=/path/to/it"
else
test-py313: setup test-packages $(REQ313_STAMP)
	@$(VENV313)/bin/python -m compileall -q -j 0 webfarm demofarm tests >/dev/null
	@echo "The Python 3.13 + Django 6.1 leg ($(PY313)):"
	$(VENV313)/bin/python -m pytest $(LIBRARY_TESTS) -n $(CHECK_WORKERS) --dist loadgroup
	$(VENV313)/bin/python -m pytest $(PY313_DEMO_TESTS) -n $(CHECK_WORKERS) --dist loadgroup
endif

$(REQ313_STAMP): requirements-py313.txt pyproject.toml
	@[ -x $(VENV313)/bin/python ] || $(PY313) -m venv $(VENV313)
	$(VENV313)/bin/python -m pip install -q --disable-pip-version-check -r requirements-py313.txt
	$(VENV313)/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	@rm -f $(VENV313)/.req-* && touch $@

# The quick tier: lint and the tests that start no farm (about a minute).
check: setup lint
	$(PY) -m pytest $(LIBRARY_TESTS) -n $(CHECK_WORKERS) --dist loadgroup
	$(PY) -m pytest tests/demo -n $(CHECK_WORKERS) --dist loadgroup

bench: setup test-packages
	$(PY) -m bench

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

clean:
	rm -rf $(VENV) $(VENV313) var staticfiles db.sqlite3*
