# The two commands a newcomer runs: `make conformance` (the main job) and `make test`.
# Both set everything up themselves (virtualenv, packages, control-plane binaries) and are idempotent.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Parallel workers for the tests that share the embedded cluster.
WORKERS ?= 2
PYTEST := $(BIN)/pytest -p no:cacheprovider

.PHONY: all venv binaries conformance test test-fast test-slow lint bench catalog clean distclean

all: test

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and kwokctl from the
# Go module proxy into ~/.cache/kthena-conformance/bin/<versions>/ once; later runs reuse them.
# FORCE=1 rebuilds.
binaries: venv
	$(BIN)/kthena-conformance binaries build $(if $(FORCE),--force)

conformance: binaries
	$(BIN)/kthena-conformance run --provider local --report-dir reports

# Unit tests, then the cluster tests in parallel on one shared embedded cluster, then the tests
# that must run alone (own clusters, Ctrl-C, killed parents, a restarted kube-apiserver), then the
# reliability tests that start and SIGKILL controllers of their own (no shared controller there).
test: binaries
	$(PYTEST) -q tests/unit
	$(PYTEST) -q -n $(WORKERS) -m "cluster and not serial" tests/integration
	$(PYTEST) -q -m "serial and not own_controller" tests/integration
	$(PYTEST) -q -m "own_controller" tests/integration

# Unit tests only: no Go, no cluster, a few seconds.
test-fast: venv
	$(PYTEST) -q tests/unit

# Regenerate the behaviour catalog (conformance/catalog.yaml) from the suite's tests.
catalog: venv
	$(BIN)/kthena-conformance catalog --write

lint: venv
	$(BIN)/ruff check conformance kthena_ref tests bench fake-devices
	$(BIN)/mypy

bench: binaries
	$(BIN)/python -m bench.cluster_bench
	$(BIN)/python -m bench.controller_bench
	$(BIN)/python -m bench.rollout_bench
	$(BIN)/python -m bench.dra_bench
	$(BIN)/python -m bench.suite_bench

clean:
	-$(BIN)/kthena-conformance cluster sweep
	rm -rf reports .pytest_cache .mypy_cache .ruff_cache

distclean: clean
	rm -rf $(VENV)
