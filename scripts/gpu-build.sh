#!/usr/bin/env bash
# Builds every package's test binary into .gpu/bin (run it HERE, on a machine
# with Go; the GPU machine has none). Then, on the GPU machine, with .gpu
# carried: scripts/gpu-check.sh. A package that fails to build is reported
# and skipped, so one broken package does not stop the GPU check of the others.
# Usage: scripts/gpu-build.sh [packages...]   (default: every package with tests)
# It also builds bin/loaderd into .gpu/bin/loaderd (the Python tests' daemon).
# Binaries are stripped: what travels to the GPU machine (tree + .gpu) is
# limited to 64 MiB.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
export CGO_ENABLED=1 CGO_CFLAGS="${CGO_CFLAGS:--Wno-deprecated-declarations}"
mkdir -p .gpu/bin .gpu/steps
rm -f .gpu/bin/*.test .gpu/bin/*.dir
failed=0
for pkg in $(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' "${@:-./...}"); do
	rel=${pkg#github.com/gnnloader/gnnloader}
	rel=${rel#/}
	name=$(echo "${rel:-root}" | tr / _)
	if go test -c -ldflags="-s -w" -o ".gpu/bin/$name.test" "./$rel" 2> ".gpu/build-$name.log"; then
		# The package directory, so the test runs where `go test` would run it.
		echo "$rel" > ".gpu/bin/$name.dir"
		echo "built .gpu/bin/$name.test"
	else
		echo "FAILED to build $pkg (see .gpu/build-$name.log)"
		failed=1
	fi
done
# The daemon itself, for the Python client's tests on CUDA (gpu-check runs
# them with LOADERD=.gpu/bin/loaderd).
if go build -ldflags="-s -w" -o .gpu/bin/loaderd ./cmd/loaderd 2> .gpu/build-loaderd.log; then
	echo "built .gpu/bin/loaderd"
else
	echo "FAILED to build cmd/loaderd (see .gpu/build-loaderd.log)"
	failed=1
fi
exit $failed
