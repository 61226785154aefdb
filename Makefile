# Two commands from a fresh Debian machine with the Swift toolchain: `make demo`, `make test`.
# Both install what is missing first (liblz4-dev), and only when it is missing.

SWIFT      ?= swift
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BENCH_N    ?= 200000
PENDING_N  ?= 100000
DELIVER_N  ?= 4000

.PHONY: all deps build test demo bench fixtures verify-fixtures clean

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

build: deps
	$(SWIFT) build

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-xctest

# Until the sample app lands (issue 4), the demo writes a small log and inspects it with wal-dump.
demo: deps
	$(SWIFT) build --product wal-fixtures
	$(SWIFT) build --product wal-dump
	@rm -rf .build/demo-log && mkdir -p .build/demo-log
	$(SWIFT) run --skip-build wal-fixtures demo .build/demo-log
	$(SWIFT) run --skip-build wal-dump stats .build/demo-log
	$(SWIFT) run --skip-build wal-dump records .build/demo-log
	$(SWIFT) run --skip-build wal-dump verify .build/demo-log

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
