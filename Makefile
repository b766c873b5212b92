# The two commands a newcomer runs: `make conformance` (the main job) and `make test`.
# Both set everything up themselves (virtualenv, packages, control-plane binaries) and are idempotent.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Parallel workers for the tests that share the embedded cluster.
WORKERS ?= 2
# Workers of `make conformance`: its tests mostly wait on the cluster, so more than the 2 cores
# (docs/development.md: 7 m 37 s with 2 workers and 193 behaviours; see there for 4).
CONFORMANCE_WORKERS ?= 4
# Workers of the own-controller pass (the control run, self-validation variants on a kept cluster
# per worker, sharding, the installed wheel): mostly waiting, so more workers than cores (six:
# 834 s against 1,138 s on four, 2026-12-05, no flake; docs/development.md).
OWN_WORKERS ?= 6
PYTEST := $(BIN)/pytest -p no:cacheprovider

.PHONY: all venv binaries host-packages conformance nightly test test-all test-fast lint bench catalog clean distclean

all: test

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, kwokctl and Prometheus (the
# Autoscaling profile's metrics server) from the
# Go module proxy into ~/.cache/kthena-conformance/bin/<versions>/ once; later runs reuse them.
# FORCE=1 rebuilds.
binaries: venv
	$(BIN)/kthena-conformance binaries build --prometheus $(if $(FORCE),--force)

# The Debian packages real nodes need (runc, CNI plugins, iptables, busybox-static), installed when
# missing and this is root; elsewhere one line says what to install (and runs fall back to kwok).
host-packages: venv
	-$(BIN)/python -m conformance.cluster.host_packages real-nodes

# Real nodes by default wherever the host can run them: their binaries and packages first.
conformance: binaries host-packages
	$(BIN)/kthena-conformance binaries build --real-nodes --prometheus
	$(BIN)/kthena-conformance run --provider local --report-dir reports --workers $(CONFORMANCE_WORKERS)

# Unit tests, then the cluster tests in parallel on one shared embedded cluster, then the tests
# that must run alone, then the own-controller tests on OWN_WORKERS workers: the suite's control
# run against the healthy reference and self-validation (each broken variant of the reference
# against the behaviours it must break, on a kept cluster per worker) among them. Prints each
# pass's time and the total.
test: binaries host-packages
	$(BIN)/kthena-conformance binaries build --real-nodes --prometheus
	$(BIN)/python ci/test_passes.py --workers $(WORKERS) --own-workers $(OWN_WORKERS)

# The exhaustive run: as `make test`, but every broken variant runs the whole suite (faults x
# behaviours) and reports what else it breaks. Use it when the suite's judging or the faults change.
test-all: binaries host-packages
	$(BIN)/kthena-conformance binaries build --real-nodes --prometheus
	$(BIN)/python ci/test_passes.py --workers $(WORKERS) --own-workers $(OWN_WORKERS) --all

# The nightly CI run on kind, here (root; the harness installs and starts Docker itself): every
# profile against the reference controller deployed in the kind cluster; prints its wall time.
# SHARD=I/N runs one shard, as the workflow's jobs do.
nightly: venv
	PATH="$(CURDIR)/.venv/bin:$$PATH" ci/nightly-kind.sh

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
	$(BIN)/python -m bench.realnode_bench
	$(BIN)/python -m bench.controller_bench
	$(BIN)/python -m bench.autoscaler_bench
	$(BIN)/python -m bench.rollout_bench
	$(BIN)/python -m bench.dra_bench
	$(BIN)/python -m bench.suite_bench
	$(BIN)/python -m bench.selfval_bench

clean:
	-$(BIN)/kthena-conformance cluster sweep
	rm -rf reports .pytest_cache .mypy_cache .ruff_cache

distclean: clean
	rm -rf $(VENV)
