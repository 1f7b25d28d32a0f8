#!/usr/bin/env bash
# The test command (what .ci/run runs): installs what the tests need, checks
# that go.mod is tidy, vets and staticchecks both builds (with CUDA, and
# nocuda: CGO_ENABLED=0 or -tags nocuda), then runs every CPU test and each
# benchmark once. GPU tests skip here with their reason; on a GPU machine
# scripts/gpu-check.sh runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH=/usr/local/go/bin:$PATH
# go-nvml's header marks functions deprecated; the warnings are noise.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
# setup.sh installed g++: the GPU sampler's kernels emulated on the CPU must
# run here, not skip (sampler's TestKernelsEmulatedMatchCPU).
export GNNLOADER_REQUIRE_GXX=1

echo "== go mod tidy (go.mod and go.sum must already be tidy)"
go mod tidy -diff
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
echo "== go vet"
go vet ./...
echo "== go vet, the nocuda build (cudaext's stubs in place of its cgo calls)"
go vet -tags nocuda ./...
echo "== go build without cgo (CGO_ENABLED=0 implies nocuda)"
CGO_ENABLED=0 go build ./...
echo "== staticcheck (both builds)"
# A tool, not a dependency of the product: installed at a pinned version
# into $(go env GOPATH)/bin, where it stays between runs, and kept out of go.mod.
staticcheck_version=v0.8.2
staticcheck=$(go env GOPATH)/bin/staticcheck
if ! "$staticcheck" -version 2> /dev/null | grep -qF "(${staticcheck_version#v})"; then
	go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
fi
# Any finding fails.
for tags in "" nocuda; do
	pkgs=./...
	[ -n "$tags" ] && pkgs="./cudaext/... ./cmd/loaderd/" # the only code that differs
	"$staticcheck" -tags "$tags" $pkgs
done
echo "== go test -race"
go test -race -count=1 ./...
echo "== go test without -race of what the race detector distorts (CPU time by stage)"
go test -count=1 ./internal/stages/
echo "== go test, the nocuda build of the packages with a cuda/nocuda split, and the daemon that says so"
go test -tags nocuda -count=1 ./cudaext/... ./cmd/loaderd/
echo "== benchmarks, once each so that they never rot (GPU ones skip here)"
GNNLOADER_BENCH_SCALE=0.001 go test -run='^$' -bench=. -benchtime=1x ./sampler/ ./ipc/ ./internal/bench/...
# fuzz TARGET PKG FLAGS...: a short fuzz run. Go's fuzz coordinator can end a
# run that found nothing with only "context deadline exceeded" (no failing
# input written), when -fuzztime runs out while a worker still handles a new
# interesting input (seen once on 2026-11-25 with a 450-input cache); such a
# run is made once more. A run that finds a failure writes it under
# testdata/fuzz/ and fails as ever.
fuzz() {
	local target=$1 pkg=$2 out
	shift 2
	for attempt in 1 2; do
		if out=$(go test -run='^$' -fuzz="$target" "$@" "$pkg" 2>&1); then
			echo "$out"
			return 0
		fi
		echo "$out"
		if [ "$attempt" = 1 ] && grep -q 'context deadline exceeded' <<< "$out" && ! grep -q 'Failing input written' <<< "$out"; then
			echo "(the fuzz coordinator ran out of time with no failing input: once more)"
			continue
		fi
		return 1
	done
}
echo "== fuzz the protocol decoder (short; longer runs are recorded in docs/reliability.md)"
fuzz FuzzUnmarshal ./ipc/ -fuzztime=20s
echo "== fuzz opening dataset files (short; the minimizing of each new input is capped so it cannot eat the run)"
fuzz FuzzOpenDataset ./datasets/ -fuzztime=20s -fuzzminimizetime=100x
echo "== build loaderd"
go build -o bin/loaderd ./cmd/loaderd
echo "== python tests (real loaderd, real clients)"
/usr/bin/python3 -m unittest discover -s python/tests -v
