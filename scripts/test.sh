#!/usr/bin/env bash
# The test command (what .ci/run runs): installs what the tests need, then
# runs every CPU test. GPU tests skip here with their reason; on a GPU machine
# scripts/gpu-check.sh runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH=/usr/local/go/bin:$PATH
# go-nvml's header marks functions deprecated; the warnings are noise.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
echo "== go vet"
go vet ./...
echo "== go test -race"
go test -race -count=1 ./...
echo "== fuzz the protocol decoder (short; longer runs are recorded in docs/reliability.md)"
go test -run='^$' -fuzz=FuzzUnmarshal -fuzztime=20s ./ipc/
echo "== fuzz opening dataset files (short; the minimizing of each new input is capped so it cannot eat the run)"
go test -run='^$' -fuzz=FuzzOpenDataset -fuzztime=20s -fuzzminimizetime=100x ./datasets/
echo "== build loaderd"
go build -o bin/loaderd ./cmd/loaderd
echo "== python tests (real loaderd, real clients)"
/usr/bin/python3 -m unittest discover -s python/tests -v
