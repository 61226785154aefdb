# Two commands from a fresh Debian machine with the Swift toolchain: `make demo`, `make test`.
# Both install what is missing first (liblz4-dev and the lz4 tool on Debian), and only when it is missing.

SHELL      := /bin/bash
SWIFT      ?= swift
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BENCH_N    ?= 200000
PENDING_N  ?= 10000,100000,1000000
DELIVER_N  ?= 4000
IDLE_SECONDS ?= 20

# This repository is built with the Linux HTTP transport on: the package trait is off by default
# so that an app adding Courier resolves swift-log alone (see Package.swift, `consumer-check`).
TRAITS     := --traits AsyncHTTPClientTransport

FUZZ_SECONDS ?= 300
# The short fuzz run inside `make test`, per target.
FUZZ_SHORT_SECONDS ?= 20
FUZZ_BUILD = $(SWIFT) build --sanitize fuzzer --scratch-path .build-fuzz

.PHONY: all deps tmux build test format-check format consumer-check xcodeproj-check ios-check ios-check-mutations doc-snippets smoke demo docs bench bench-compare bench-outage bench-drain bench-outbox bench-batching bench-model bench-background soak fuzz fuzz-short fuzz-build tsan fixtures verify-fixtures data-path delivery-ratio lock-hold clean

all: build

# liblz4 headers + pkg-config file; `apt-get update` only when an install is needed.
deps:
	@if pkg-config --exists liblz4 zlib 2>/dev/null && command -v lz4 >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  echo "courier: installing liblz4-dev, zlib1g-dev, pkg-config and lz4 (missing)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq liblz4-dev zlib1g-dev pkg-config lz4 >/dev/null \
	    || { echo "courier: could not install liblz4-dev and zlib1g-dev; install them by hand"; exit 1; }; \
	elif command -v brew >/dev/null 2>&1; then brew install lz4 pkg-config; \
	else echo "courier: liblz4 not found; install liblz4 development files (Debian: liblz4-dev, macOS: brew install lz4)"; exit 1; fi

# tmux drives the sample app in the smoke test; installed only when missing.
tmux:
	@command -v tmux >/dev/null 2>&1 || { echo "courier: installing tmux (missing, needed by the smoke test)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq tmux >/dev/null; }

build: deps
	$(SWIFT) build $(TRAITS)

# Builds everything, smoke-tests the sample app in a pseudo-terminal (~15 s), runs every test.
# Checks first that every code block of the README and the DocC articles is code the build
# compiles (Tools/doc-examples/check.py; `make doc-snippets` copies the compiled code in).
test: deps tmux
	python3 Tools/doc-examples/check.py
	$(MAKE) xcodeproj-check
	$(MAKE) format-check
	$(SWIFT) build $(TRAITS) --build-tests
	Tools/smoke-sample.sh .build/debug/courier-sample
	$(SWIFT) test $(TRAITS) --skip-build --disable-xctest
	$(MAKE) consumer-check
	$(MAKE) fuzz-short

# Layout of Sources/ and Tools/: `swift format` (it ships with the toolchain) with .swift-format
# (120 columns, 4 spaces, existing line breaks kept; no lint rules, layout only), and no line over
# 120 columns, which the formatter cannot break in comments and string literals. Under a second.
# `make format` rewrites the files in place.
format-check:
	$(SWIFT) format lint --strict --recursive --parallel Sources Tools
	@long=$$(find Sources Tools -name '*.swift' -print0 | xargs -0 awk 'length > 120 {print FILENAME ":" FNR}'); \
	  if [ -n "$$long" ]; then echo "format-check: lines over 120 columns:"; echo "$$long"; exit 1; fi
	@long=$$(find Tests Package.swift -name '*.swift' -print0 | xargs -0 awk 'length > 120 {print FILENAME ":" FNR}'); \
	  if [ -n "$$long" ]; then echo "format-check: lines over 120 columns in Tests/ or Package.swift:"; \
	  echo "$$long"; exit 1; fi
	@open=$$( (grep -rnE '\bcore\.(write|read)\b|\bCoreState\b|^extension CourierCore\b' Sources Tools --include='*.swift'; \
	  grep -rnE '\bcore\.(write|read)\b' Tests --include='*.swift') \
	  | grep -v '^Sources/CourierKit/State/' | grep -vE '^[^:]*:[0-9]+:[[:space:]]*//'); \
	  if [ -n "$$open" ]; then echo "format-check: CoreState reached outside Sources/CourierKit/State/ (call an intent," \
	  "or read core.diagnostics; pure tests may build a CoreState):"; echo "$$open"; exit 1; fi
	@echo "format-check: Sources/ and Tools/ are formatted, no line over 120 columns (there, in Tests/ or in" \
	  "Package.swift), the core is closed"

format:
	$(SWIFT) format --in-place --recursive --parallel Sources Tools

# An app's view (Tools/consumer-check: one dependency on the CourierKit product, default traits):
# fails if its Package.resolved pins more than swift-log; then builds and runs it (~1 min), which
# checks the error without a transport on Linux and a delivery through the app's own transport.
CONSUMER := Tools/consumer-check
consumer-check: deps
	@rm -f $(CONSUMER)/Package.resolved
	@$(SWIFT) package --package-path $(CONSUMER) --scratch-path .build-consumer resolve >/dev/null
	@python3 -c 'import json, sys; pins = sorted(p["identity"] for p in json.load(open(sys.argv[1]))["pins"]); \
	  print("consumer-check: an app depending on CourierKit pins %d package(s): %s" % (len(pins), ", ".join(pins) or "none")); \
	  sys.exit(0 if set(pins) <= {"swift-log"} else 1)' $(CONSUMER)/Package.resolved
	$(SWIFT) build --package-path $(CONSUMER) --scratch-path .build-consumer
	.build-consumer/debug/consumer-check

# The iOS device kit (an app, its share extension and simulator tests: Samples/README.md), its
# Xcode project read without Xcode: object ids, targets, the embedded extension, the local
# package, one App Group, Info.plist keys, iOS 17.0, Swift 6, the shared scheme
# (Tools/xcodeproj-check/check.py says each). Then the check of the check: broken copies of the
# project must each fail. Python only, about a second; part of `make test`.
XCODEPROJ := Samples/CourierSample/CourierSample.xcodeproj
xcodeproj-check:
	python3 Tools/xcodeproj-check/check.py $(XCODEPROJ)
	@out=$$(python3 Tools/xcodeproj-check/check.py --self-test $(XCODEPROJ)) || { echo "$$out"; exit 1; }; \
	  echo "$$out" | tail -1

# Type-checks for iOS every target an iOS app builds (those of the library products), the iOS
# device kit's app and share extension, and the documentation's iOS examples. On macOS:
# xcodebuild for a generic iOS device (the kit's tests too). On Linux: Tools/ios-check against
# the iPhoneOS SDK directory in IOS_SDK, with the Dispatch and os API notes in IOS_APINOTES
# (README, "Contributing without a Mac"; both have defaults, see Tools/ios-check/ios-check.py).
# About a minute. Nothing is linked or run.
IOS_SDK      ?=
IOS_APINOTES ?=
IOS_APP      := Samples/CourierSample Tools/doc-examples/ios
IOS_LIBRARIES := CourierKit CourierTesting
ios-check:
ifeq ($(shell uname -s),Darwin)
	@for scheme in $(IOS_LIBRARIES); do \
	  xcodebuild -quiet -scheme $$scheme -destination 'generic/platform=iOS' CODE_SIGNING_ALLOWED=NO build || exit 1; \
	  echo "ios-check: $$scheme builds for a generic iOS device"; done
	xcodebuild -quiet -project $(XCODEPROJ) -scheme CourierSample -destination 'generic/platform=iOS' CODE_SIGNING_ALLOWED=NO build-for-testing
	@echo "ios-check: the device kit (app, share extension, tests) builds for a generic iOS device"
	cd Tools/doc-examples/ios && xcodebuild -quiet -scheme DocumentationExamplesIOS -destination 'generic/platform=iOS' CODE_SIGNING_ALLOWED=NO build
	@echo "ios-check: the documentation's iOS examples build for a generic iOS device"
else
	@# The dependencies' sources are type-checked too: resolve them first (a fresh clone has none).
	@$(SWIFT) package resolve >/dev/null
	@IOS_SDK="$(IOS_SDK)" IOS_APINOTES="$(IOS_APINOTES)" python3 Tools/ios-check/ios-check.py $(IOS_APP)
endif

# Proves the check above (Linux): plants an error in every branch of Apple-only code that
# ios-check type-checks (found by its #if os(iOS) / canImport / #else branches, and the sample
# app's files), runs the check on a copy, and requires each error reported by file and line.
# One line per file; fails on a miss. Needs the SDK, so not in `make test` (about 10 minutes).
ios-check-mutations:
	@$(SWIFT) package resolve >/dev/null
	@IOS_SDK="$(IOS_SDK)" IOS_APINOTES="$(IOS_APINOTES)" python3 Tools/ios-check/ios-check-mutations.py $(IOS_APP)

# Copies each compiled example (Tests/CourierTests/DocumentationExamples.swift, and the iOS
# ones in Tools/doc-examples/ios) into the README and DocC blocks that show it.
doc-snippets:
	python3 Tools/doc-examples/check.py --write

smoke: deps tmux
	$(SWIFT) build $(TRAITS) --product courier-sample
	Tools/smoke-sample.sh .build/debug/courier-sample

# The sample app against the built-in flaky server (500 half the time), in this terminal.
# Quit with q (on [ Send ]) or Ctrl-C; run it again to see pending messages resume.
demo: deps
	$(SWIFT) build $(TRAITS) --product courier-sample
	.build/debug/courier-sample --directory .build/demo-outbox

# Benchmarks: release build, figures printed side by side in one run (not part of `make test`:
# timing belongs to benchmarks, never to unit tests). courier-bench prints memory and open time
# at each pending count in PENDING_N, send next to SQLite and write(2), delivery next to the bare
# clients, and idle CPU (IDLE_SECONDS measured). About 3 minutes after the build.
# The files a delivered message visits, measured by coverage (ARCHITECTURE.md, "From send to
# delivered"). Builds into .build-coverage.
data-path: deps
	SWIFT=$(SWIFT) Tools/data-path/data-path.sh

# The core's lock at segment rolls: `courier-bench --deliver` with 64 KiB segments (a roll every
# few hundred messages), built with the lock probe (-DCOURIER_LOCK_PROBE, into .build-probe):
# blocking file calls made under the core's lock (target 0) and its longest hold with and without
# a roll in the critical section. About a minute after the build.
LOCK_HOLD_N ?= 20000
lock-hold: deps
	$(SWIFT) build $(TRAITS) -c release --scratch-path .build-probe --product courier-bench -Xswiftc -DCOURIER_LOCK_PROBE
	.build-probe/release/courier-bench --deliver $(LOCK_HOLD_N) 0 courier 65536

# Delivery next to the bare AsyncHTTPClient (issue 25's ratio): ROUNDS alternated runs of
# `courier-bench --deliver` per failure rate, medians and the per-round ratio. ~3 minutes at 20.
ROUNDS ?= 20
delivery-ratio: deps
	SWIFT=$(SWIFT) Tools/delivery-ratio/delivery-ratio.sh $(ROUNDS) 4000 0 0.5

bench: deps
	$(SWIFT) run $(TRAITS) -c release wal-bench $(BENCH_N)
	$(SWIFT) run $(TRAITS) -c release courier-bench $(PENDING_N) $(DELIVER_N) $(IDLE_SECONDS)
	$(MAKE) bench-compare

# package-benchmark (Benchmarks/, a package of its own): send's p50/p99 and allocations next to
# GRDB, a whole-file JSON rewrite and write(2), at 100, 1,000 and 10,000 pending, compaction time
# and send beside a running compactor; then
# Benchmarks/results.md and Benchmarks/send-cost.svg (commit both after a deliberate run).
BENCH_RESULTS := $(CURDIR)/.build-bench-results
bench-compare: deps
	@rm -rf $(BENCH_RESULTS) && mkdir -p $(BENCH_RESULTS)
	cd Benchmarks && $(SWIFT) package --allow-writing-to-directory $(BENCH_RESULTS) benchmark --format jmh --path $(BENCH_RESULTS) --no-progress
	python3 Benchmarks/chart.py $(BENCH_RESULTS) "$$(nproc) cores, $$(uname -sm), $$(swift --version 2>/dev/null | head -1 | sed 's/ (.*//'), $$(date -u +%Y-%m-%d)"

# A million messages through one courier and the loopback flaky server, many compaction cycles:
# prints disk, memory and compactions per 100,000; fails if any message did not arrive. Minutes.
SOAK_N ?= 1000000
soak: deps
	$(SWIFT) run $(TRAITS) -c release courier-bench --soak $(SOAK_N)

# DocC for Courier and CourierLog (swift-docc-plugin from the package mirror), as static sites
# in .build/docs/Courier and .build/docs/CourierLog; DOCC_FLAGS=--warnings-as-errors to be strict.
# Not part of `make test`. Open .build/docs/CourierKit/documentation/courierkit/index.html through
# any static file server (e.g. `python3 -m http.server -d .build/docs/CourierKit`).
DOCC_FLAGS ?=
docs: deps
	@mkdir -p .build/docs; rm -rf .build/docs/symbol-graphs .build/docs/ios-graphs
	@mkdir -p .build/docs/symbol-graphs .build/docs/ios-graphs
	@# CourierKit as iOS sees it (the Apple-only API included): the symbol graphs `make ios-check`
	@# emits while it type-checks for iOS, given to DocC; without an SDK, as Linux sees it.
	@if IOS_SYMBOL_GRAPH_DIR=$(CURDIR)/.build/docs/symbol-graphs $(MAKE) -s ios-check >/dev/null 2>&1; then \
	  cp .build/docs/symbol-graphs/CourierKit*.symbols.json .build/docs/ios-graphs/ && \
	  docc convert Sources/CourierKit/CourierKit.docc --additional-symbol-graph-dir .build/docs/ios-graphs \
	    --fallback-display-name CourierKit --fallback-bundle-identifier courier.CourierKit \
	    --transform-for-static-hosting --hosting-base-path CourierKit --output-path .build/docs/CourierKit \
	    $(DOCC_FLAGS) >/dev/null || exit 1; \
	  echo "docs: .build/docs/CourierKit, the API as an iOS app sees it (symbol graphs of make ios-check)"; \
	else \
	  $(SWIFT) package $(TRAITS) --allow-writing-to-directory .build/docs generate-documentation \
	    --target CourierKit --disable-indexing --transform-for-static-hosting --hosting-base-path CourierKit \
	    --output-path .build/docs/CourierKit $(DOCC_FLAGS) || exit 1; \
	  echo "docs: .build/docs/CourierKit, as Linux sees it (no iOS SDK for make ios-check: no iOS-only API)"; \
	fi
	@$(SWIFT) package $(TRAITS) --allow-writing-to-directory .build/docs generate-documentation --target CourierLog \
	  --disable-indexing --transform-for-static-hosting --hosting-base-path CourierLog \
	  --output-path .build/docs/CourierLog $(DOCC_FLAGS) || exit 1
	@echo "docs: .build/docs/CourierLog (the log's own, for contributors)"

# Issue 11's destination scenarios on loopback, real time, backoff per destination off then on:
# 500 messages through OUTAGE_SECONDS of 503s (requests during it, drain after it), and a live
# server beside a dead port (about 4 minutes); then FLAKY_N messages to a server failing half
# of all requests at random (about 5 minutes).
OUTAGE_SECONDS ?= 30
FLAKY_N ?= 1000
bench-outage: deps
	$(SWIFT) run $(TRAITS) -c release courier-bench --outage $(OUTAGE_SECONDS)
	$(SWIFT) run $(TRAITS) -c release courier-bench --flaky $(FLAKY_N)

# Issue 24's drain scenarios, side by side in one run, loopback, real time, default settings:
# 1,000 messages at 0-400 ms latency; 500 against a 20/s limiter (burst 10) answering 503, then
# 429 with Retry-After: 1; 1,000 and 300 to a server failing half the time, and 2 a second for
# 90 s to it, each also with issue 36's rules .disabled (send-to-delivered p50/p99/max, requests
# per message); 500 through a 30 s outage. One line each: seconds, requests, refused, the ideal.
# Each stops at max(150 s, 5 x ideal), the 50% ones at 900 s. DRAIN_SCENARIOS="2 3" runs those
# alone. The 503 limiter's drain is drawn (in flight, accepted, refused over time) to DRAIN_PLOT,
# the picture of the DocC article "Retry and backoff", and the 1,000 at 50%'s send-to-delivered
# times beside it (retry-tail-latency.svg). Then issue 36's scenarios on virtual time, defaults
# and .disabled (poison message, outages, a 90% server: hours, in seconds). Then 1,000 messages
# over TLS with ALPN h2 to a loopback HTTP/2 server: connections and streams it saw
# (multiplexed: one connection). About 20 minutes, most of it the .disabled runs.
DRAIN_SCENARIOS ?=
DRAIN_PLOT ?= Sources/CourierKit/CourierKit.docc/Resources/drain-limiter.svg
bench-drain: deps
	$(SWIFT) run $(TRAITS) -c release courier-bench --drain $(DRAIN_SCENARIOS) $(DRAIN_PLOT)
	$(SWIFT) run $(TRAITS) -c release courier-bench --retry-tail
	$(SWIFT) run $(TRAITS) -c release courier-bench --h2 1000

# ExtensionOutbox.send next to Courier.send in one run: sends per second (outbox, .always,
# .interval; 3 rotated rounds, medians) and send → delivered p50/p99 to the loopback server.
OUTBOX_N ?= 2000
bench-outbox: deps
	$(SWIFT) run $(TRAITS) -c release courier-bench --outbox $(OUTBOX_N)

# Batching and gzip (issue 46): requests and body bytes per message, 1,000 bench messages at 0%
# failures, one request per message next to gzip, batches of 50, and both, in one run.
bench-batching: deps
	$(SWIFT) run $(TRAITS) -c release courier-bench --batching 1000

# What a CourierModel costs the main actor: CPU per event (with a model minus without, 1,000 of
# N pending cancelled one by one) and heap per message, at 1,000, 5,000 and 10,000 pending.
bench-model: deps
	$(SWIFT) run $(TRAITS) -c release courier-bench --model

# Issue 19's background hand-off on the simulated system (virtual time; a debug build, since
# nothing is timed; about two seconds once built). Line 1 (the first with "suspended"): 500
# messages, server failing 50%, 30 minutes suspended; line 2: a 10-minute outage then recovery
# while suspended; line 3: line 1 under the rate limiter Apple's forums report.
bench-background: deps
	$(SWIFT) run $(TRAITS) courier-background-bench

# libFuzzer (not part of `make test`, which runs `fuzz-short`): fuzz-lz4-frame (LZ4 frame parser,
# segment scanner) and fuzz-courier (event decoder, JSON writer, wal-dump), FUZZ_SECONDS each.
# Seeds: frames the stock lz4 tool makes and the golden logs. A crash is written to crash-* and
# becomes a fixture with its fix.
fuzz: fuzz-build
	SWIFT_BACKTRACE=enable=no .build-fuzz/debug/fuzz-lz4-frame -max_total_time=$(FUZZ_SECONDS) -max_len=140000 .build-fuzz/corpus-lz4
	SWIFT_BACKTRACE=enable=no .build-fuzz/debug/fuzz-courier -max_total_time=$(FUZZ_SECONDS) -max_len=140000 .build-fuzz/corpus-courier

# A short bounded run of both targets (FUZZ_SHORT_SECONDS each), part of `make test`.
fuzz-short: fuzz-build
	SWIFT_BACKTRACE=enable=no .build-fuzz/debug/fuzz-lz4-frame -max_total_time=$(FUZZ_SHORT_SECONDS) -max_len=140000 .build-fuzz/corpus-lz4
	SWIFT_BACKTRACE=enable=no .build-fuzz/debug/fuzz-courier -max_total_time=$(FUZZ_SHORT_SECONDS) -max_len=140000 .build-fuzz/corpus-courier

# Both targets without the HTTP client (its trait is off unless asked for: nothing they reach needs it),
# and their seed corpora.
fuzz-build: deps
	$(FUZZ_BUILD) --product fuzz-lz4-frame
	$(FUZZ_BUILD) --product fuzz-courier
	@mkdir -p .build-fuzz/corpus-lz4 .build-fuzz/corpus-courier
	@cp Fixtures/logs/*/*.wal .build-fuzz/corpus-lz4/ 2>/dev/null || true
	@for n in 0 1 100 70000; do head -c $$n /dev/urandom > .build-fuzz/in.$$n; \
	  yes '{"text":"hello"}' | head -c $$n >> .build-fuzz/in.$$n; \
	  lz4 -q -f -c -B4 -BI --content-size .build-fuzz/in.$$n > .build-fuzz/corpus-lz4/frame.$$n.lz4; done
	@for f in Fixtures/logs/*/*.wal; do n=$$(echo $$f | tr '/' '_'); \
	  { printf '\300'; cat $$f; } > .build-fuzz/corpus-courier/dump.$$n; done
	@printf '\200\006\001a\001\000\377' > .build-fuzz/corpus-courier/json.small
	@printf '\001\001\001' > .build-fuzz/corpus-courier/event.small

# The whole suite under ThreadSanitizer (not part of `make test`: a separate build, ~2-3x slower).
# Fails if any test fails or if TSan reports anything, even in a test that passed.
# At most TSAN_WIDTH tests at once: under TSan every test costs 5-15x the CPU, and with the
# whole suite in flight on 2 cores the loopback tests, which measure real time, got a sliver of
# it (a live server beside a dead port: 92 of 200 delivered in 30 s; 200 in 1 s at width 4).
# The sanitizer run is about races, not throughput: 4 keeps it at ~2.5 min here.
TSAN_WIDTH ?= 4
tsan: deps tmux
	$(SWIFT) build $(TRAITS) --build-tests --sanitize thread --scratch-path .build-tsan
	@set -o pipefail; SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TSAN_WIDTH) \
	  $(SWIFT) test $(TRAITS) --skip-build --sanitize thread --scratch-path .build-tsan --disable-xctest 2>&1 | tee .build-tsan/tsan.log
	@if grep -q "WARNING: ThreadSanitizer" .build-tsan/tsan.log; then echo "tsan: ThreadSanitizer reported races (.build-tsan/tsan.log)"; exit 1; fi
	@echo "tsan: no ThreadSanitizer report"

# Regenerate the golden logs and wal-dump snapshots in Fixtures/ (commit the result only for a
# deliberate format change).
fixtures: deps
	Fixtures/regenerate.sh

verify-fixtures: deps
	$(SWIFT) build $(TRAITS) --product wal-dump
	@for d in Fixtures/logs/*/; do printf '%-40s ' "$$d"; $(SWIFT) run $(TRAITS) --skip-build wal-dump verify "$$d" >/dev/null 2>&1; echo "exit $$?"; done

clean:
	rm -rf .build
