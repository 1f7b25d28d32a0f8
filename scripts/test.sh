#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every CPU test.
# GPU tests skip here with a reason; scripts/gpu-check.sh runs them on a GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH=/usr/local/go/bin:$PATH
# go-nvml's header marks functions deprecated; the warnings are noise.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
echo "== go vet"
go vet ./...
echo "== go test -race"
go test -race -count=1 ./...
