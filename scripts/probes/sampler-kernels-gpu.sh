#!/usr/bin/env bash
# GPU-machine probe: a changed cudaext/kernels/sample.cu built with nvcc,
# checked against the CPU sampler on the GPU (sampler's GPU tests and, where
# built, serve's CUDA tests), and timed by `loaderd bench sample` against an
# earlier build, in one device call (the sampler kernels not yet stamped).
# Built here first (the GPU machine has no Go):
#   go build -o .gpu/bin/loaderd ./cmd/loaderd              # this tree
#   go test -c -o .gpu/bin/sampler.test ./sampler           # this tree
#   go test -c -o .gpu/bin/serve.test ./serve               # optional
#   (a checkout of the base) go build -o .gpu/bin/loaderd.head ./cmd/loaderd   # optional
# or those packed into .gpu/pack.tar.xz (bin/...), unpacked first.
# Then: run(command: "scripts/probes/sampler-kernels-gpu.sh", carry: [".gpu"]).
# $OUT/k holds the new sample.fatbin and its stamp (commit both once the
# checks pass); the logs come back as $OUT/logs.tgz. ROUNDS (2): head/new
# bench pairs.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/sampler-kernels}
mkdir -p "$OUT/k" "$OUT/logs"
L=$OUT/logs
[ -f .gpu/pack.tar.xz ] && tar -C .gpu -xJf .gpu/pack.tar.xz
bin=$PWD/.gpu/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$L/gpu.txt"
if ! scripts/build-kernels.sh "$OUT/k" sample > "$L/build.log" 2>&1; then
	echo "nvcc build FAILED"; tail -30 "$L/build.log"; exit 1
fi
mv "$OUT/k/sample.ptxas.log" "$L/" 2>/dev/null
tail -1 "$L/build.log"
export GNNLOADER_SAMPLE_KERNELS=$OUT/k/sample.fatbin
summary() { # summary NAME LOG RC
	echo "$1 on the GPU (new kernels): rc $3, $(grep -c -- '--- PASS' "$2") passed, $(grep -c -- '--- FAIL' "$2") failed, $(grep -c -- '--- SKIP' "$2") skipped"
	grep -E -- "--- FAIL" "$2" | head -8
}
(cd sampler && GNNLOADER_REQUIRE_GPU=1 "$bin/sampler.test" -test.run 'TestGPU|TestKernels|Device' -test.v -test.count=1) > "$L/sampler-test.log" 2>&1
summary sampler "$L/sampler-test.log" $?
if [ -x "$bin/serve.test" ]; then
	(cd serve && GNNLOADER_REQUIRE_GPU=1 "$bin/serve.test" -test.run 'CUDA|GPU' -test.v -test.count=1 -test.timeout 300s) > "$L/serve-test.log" 2>&1
	summary serve "$L/serve-test.log" $?
fi
for r in $(seq "${ROUNDS:-2}"); do
	for v in head new; do
		b=$bin/loaderd
		if [ $v = head ]; then
			b=$bin/loaderd.head
			[ -x "$b" ] || continue
		fi
		echo "== round $r, $v kernels"
		if [ $v = head ]; then
			env -u GNNLOADER_SAMPLE_KERNELS "$b" bench sample --device cuda:0 --dataset synthetic:papers100M:1:0 --batches 2000 ${HEAD_FLAGS:-}
		else
			"$b" bench sample --device cuda:0 --dataset synthetic:papers100M:1:0 --batches 2000 ${NEW_FLAGS:-}
		fi 2>&1 | grep -v level=INFO | tee "$L/bench-$v-$r.log" | tail -8
	done
done
tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$L"
