# Two commands from a fresh Debian machine with the Swift toolchain: `make demo`, `make test`.
# Both install what is missing first (liblz4-dev), and only when it is missing.

SWIFT      ?= swift
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BENCH_N    ?= 200000
PENDING_N  ?= 100000
DELIVER_N  ?= 4000

.PHONY: all deps tmux build test smoke demo bench fixtures verify-fixtures clean

all: build

# liblz4 headers + pkg-config file; `apt-get update` only when an install is needed.
deps:
	@if pkg-config --exists liblz4 2>/dev/null; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  echo "courier: installing liblz4-dev and pkg-config (missing)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq liblz4-dev pkg-config >/dev/null \
	    || { echo "courier: could not install liblz4-dev; install it by hand (apt-get install liblz4-dev)"; exit 1; }; \
	elif command -v brew >/dev/null 2>&1; then brew install lz4 pkg-config; \
	else echo "courier: liblz4 not found; install liblz4 development files (Debian: liblz4-dev, macOS: brew install lz4)"; exit 1; fi

# tmux drives the sample app in the smoke test; installed only when missing.
tmux:
	@command -v tmux >/dev/null 2>&1 || { echo "courier: installing tmux (missing, needed by the smoke test)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq tmux >/dev/null; }

build: deps
	$(SWIFT) build

# Builds everything, smoke-tests the sample app in a pseudo-terminal (~15 s), runs every test.
test: deps tmux
	$(SWIFT) build --build-tests
	Tools/smoke-sample.sh .build/debug/courier-sample
	$(SWIFT) test --skip-build --disable-xctest

smoke: deps tmux
	$(SWIFT) build --product courier-sample
	Tools/smoke-sample.sh .build/debug/courier-sample

# The sample app against the built-in flaky server (500 half the time), in this terminal.
# Quit with q (on [ Send ]) or Ctrl-C; run it again to see pending messages resume.
demo: deps
	$(SWIFT) build --product courier-sample
	.build/debug/courier-sample --directory .build/demo-outbox

# Benchmarks: release build, figures printed side by side in one run (not part of `make test`:
# timing belongs to benchmarks, never to unit tests).
bench: deps
	$(SWIFT) run -c release wal-bench $(BENCH_N)
	$(SWIFT) run -c release courier-bench $(PENDING_N) $(DELIVER_N)

# Regenerate the golden logs and wal-dump snapshots in Fixtures/ (commit the result only for a
# deliberate format change).
fixtures: deps
	Fixtures/regenerate.sh

verify-fixtures: deps
	$(SWIFT) build --product wal-dump
	@for d in Fixtures/logs/*/; do printf '%-40s ' "$$d"; $(SWIFT) run --skip-build wal-dump verify "$$d" >/dev/null 2>&1; echo "exit $$?"; done

clean:
	rm -rf .build
