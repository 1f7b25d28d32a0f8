#!/usr/bin/env bash
# GPU-machine probe: a changed cudaext/kernels/sample.cu built with nvcc,
# checked against the CPU sampler on the GPU, and timed against the
# committed kernels, in one device call (sampler kernels not yet stamped).
# Built here first (the GPU machine has no Go):
#   go build -o .gpu/bin/loaderd ./cmd/loaderd             # this tree
#   go test -c -o .gpu/bin/sampler.test ./sampler          # this tree
#   (a checkout of the base) go build -o .gpu/bin/loaderd.head ./cmd/loaderd
# Then: run(command: "scripts/probes/sampler-kernels-gpu.sh", carry: [".gpu"]).
# $OUT/k holds the new sample.fatbin and its stamp (commit both once the
# check passes); logs under $OUT. ROUNDS (2): head/new bench pairs.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/sampler-kernels}
mkdir -p "$OUT/k"
bin=.gpu/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
if ! scripts/build-kernels.sh "$OUT/k" sample > "$OUT/build.log" 2>&1; then
	echo "nvcc build FAILED"; tail -30 "$OUT/build.log"; exit 1
fi
tail -1 "$OUT/build.log"
export GNNLOADER_SAMPLE_KERNELS=$OUT/k/sample.fatbin
(cd sampler && GNNLOADER_REQUIRE_GPU=1 "../$bin/sampler.test" -test.run 'TestGPU|TestKernels|Device' -test.v -test.count=1) > "$OUT/sampler-test.log" 2>&1
echo "sampler tests on the GPU (new kernels): rc $?"
grep -E "^(--- |ok|PASS|FAIL)" "$OUT/sampler-test.log" | grep -v "^    ---" | tail -8
grep -c -- "--- PASS" "$OUT/sampler-test.log" | sed 's/^/subtests passed: /'
grep -E -- "--- (FAIL|SKIP)" "$OUT/sampler-test.log" | head -5
for r in $(seq "${ROUNDS:-2}"); do
	for v in head new; do
		b=$bin/loaderd; [ $v = head ] && b=$bin/loaderd.head
		echo "== round $r, $v kernels"
		if [ $v = head ]; then
			env -u GNNLOADER_SAMPLE_KERNELS "$b" bench sample --device cuda:0 --dataset synthetic:papers100M:1:0 --batches 2000
		else
			"$b" bench sample --device cuda:0 --dataset synthetic:papers100M:1:0 --batches 2000
		fi 2>&1 | grep -v level=INFO | tee "$OUT/bench-$v-$r.log" | tail -6
	done
done
