#!/usr/bin/env bash
# Regenerates the golden logs and the wal-dump snapshots. Run it only for a deliberate format
# or output change, and commit the result with that change.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf Fixtures/logs
swift run --traits AsyncHTTPClientTransport wal-fixtures golden Fixtures/logs
UPDATE_SNAPSHOTS=1 swift test --traits AsyncHTTPClientTransport --disable-xctest --filter outputMatchesTheSnapshots
git status --short Fixtures
