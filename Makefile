# adaptyst-top: `make demo` and `make test` are the two commands; both set up first.
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: setup demo test test-suite test-fast test-stock check lint typecheck bench screenshots clean install-agent

# Every target sets up first: the script is idempotent (a second run only checks,
# in well under a second) and re-mounts tracefs after a reboot.
setup:
	@./scripts/setup.sh

demo: setup
	$(VENV)/bin/adaptyst-top demo

# The whole check: lint and types first (seconds), then the suite in parallel (JOBS
# pytest-xdist workers; one service's folder on one worker, see tests/conftest.py), then
# the `serial` tests alone (they measure time or CPU, or change a node-wide setting),
# then the TUI's tests on Textual's stock rendering. Each names its slowest tests. The
# package built, the suite runs as a node with no compiler and no kernel headers would
# (scripts/no_compiler.sh), but for the tests that build it as an admin does (`builds`).
# CI runs this.
JOBS ?= 2
PARALLEL := -n $(JOBS) --dist loadgroup
BARE := ./scripts/no_compiler.sh
# Under a folder other users cannot pass (a clone in root's home), scripts/reachable.sh
# runs the suite where the users it makes can reach the checkout.
test: setup lint typecheck
	./scripts/reachable.sh $(MAKE) --no-print-directory test-suite

# Coverage (pyproject.toml's [tool.coverage]) is measured in the parallel and builds runs,
# not in the serial one, whose tests measure time and CPU. Its data folder is one every
# user may write in (tests run the CLI as users they make), under a random name in a
# folder no one else may list.
test-suite:
	@top=$$(mktemp -d /tmp/adt-coverage.XXXXXX) && trap 'rm -rf "$$top"' EXIT \
	&& chmod 0711 $$top && cov=$$(mktemp -d $$top/XXXXXXXXXX) && chmod 1777 $$cov \
	&& export ADT_COVERAGE_DIR=$$cov \
	&& set -x && $(BARE) $(PY) -m pytest $(PARALLEL) -m "not serial and not builds" \
		--require-ebpf-if-root --durations=25 --cov --cov-report= \
	&& $(PY) -m pytest $(PARALLEL) -m "builds and not serial" --require-ebpf-if-root \
		--durations=10 --cov --cov-append --cov-report= \
	&& $(PY) scripts/coverage_summary.py $$cov/.coverage
	$(BARE) $(PY) -m pytest -m serial --durations=25
	$(MAKE) --no-print-directory test-stock

# The TUI's tests with tui/textual_private.py's switch on: what users get where a
# Textual without the private names the fast paths read is installed. By folder: the
# pilot's tests, the widgets' (the fast table) and the real terminal's.
test-stock: setup
	ADAPTYST_TOP_STOCK_RENDERING=1 $(BARE) $(PY) -m pytest -q $(PARALLEL) tests/unit/tui/pilot \
		tests/unit/tui/widgets \
		tests/system/tmux

# tests/unit/: no root, no services, nothing sleeping over a second, as any user; the
# loop while writing code.
test-fast: setup
	$(PY) -m pytest -q $(PARALLEL) -p no:cacheprovider tests/unit

lint: setup
	$(VENV)/bin/ruff check src tests bench experiments
	$(VENV)/bin/ruff format --check src tests bench experiments
	@# requires-python (>=3.10) is checked: which stdlib modules and syntax each version has
	$(VENV)/bin/vermin --target=3.10- --violations --no-tips --eval-annotations -q \
		src bench experiments

typecheck: setup
	VENV=$(VENV) ./scripts/typecheck.sh

check: test

# Every benchmark, each as a module from the repository root (bench/README.md).
bench: setup
	@for b in bench/bench_*.py; do name=$$(basename $$b .py); echo "== $$name"; \
		$(PY) -m bench.$$name || exit 1; done

screenshots: setup
	$(PY) -m scripts.screenshots

# An admin's one command for a node's agent (root): see docs/install.md.
PREFIX ?= /opt/adaptyst-top
install-agent:
	PREFIX=$(PREFIX) ./scripts/install_agent.sh

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
