# adaptyst-top: `make demo` and `make test` are the two commands; both set up first.
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: setup demo test test-fast test-stock check lint typecheck bench screenshots clean install-agent

# Every target sets up first: the script is idempotent (a second run only checks,
# in well under a second) and re-mounts tracefs after a reboot.
setup:
	@./scripts/setup.sh

demo: setup
	$(VENV)/bin/adaptyst-top demo

# The whole check: lint and types first (seconds), then the suite, then the TUI's tests
# on Textual's stock rendering (the fast paths off), the 25 slowest tests named. CI runs this.
test: setup lint typecheck
	$(PY) -m pytest --require-ebpf-if-root --durations=25
	$(MAKE) --no-print-directory test-stock

# The TUI's tests with tui/textual_private.py's switch on: what users get where a
# Textual without the private names the fast paths read is installed.
TUI_TESTS := tests/test_tui.py tests/test_e2e_tmux.py tests/test_fast_table.py
test-stock: setup
	ADAPTYST_TOP_STOCK_RENDERING=1 $(PY) -m pytest -q $(TUI_TESTS)

# The tests that need no root and no services (tests/conftest.py: the `system` marker),
# as any user, in under 2 minutes: the loop while writing code.
test-fast: setup
	$(PY) -m pytest -q -m "not system" -p no:cacheprovider

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	@# requires-python (>=3.10) is checked: which stdlib modules and syntax each version has
	$(VENV)/bin/vermin --target=3.10- --violations --no-tips --eval-annotations -q \
		src bench

typecheck: setup
	VENV=$(VENV) ./scripts/typecheck.sh

check: test

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

screenshots: setup
	$(PY) scripts/screenshots.py

# An admin's one command for a node's agent (root): see docs/install.md.
PREFIX ?= /opt/adaptyst-top
install-agent:
	PREFIX=$(PREFIX) ./scripts/install_agent.sh

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
