#!/usr/bin/env bash
# The ring all-reduce benchmark beside NCCL's, on the GPU machine, in one run:
#   1. gnnloader's ring (ringbench.Run through TestBenchRing of
#      internal/bench/ringbench, or
#      `loaderd bench ring`), float32 sum, 1 KiB .. 1 GiB, every GPU;
#   2. NCCL through torch.distributed (scripts/ring_nccl_bench.py), one
#      process per GPU, the same sizes and timing, the same GPUs;
#   3. both tables side by side (markdown).
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# NVSHMEM_DISABLE_NVLS=1.
# Build here first:
#   go test -c -ldflags="-s -w" -o .gpu/ring/ringbench.test ./internal/bench/ringbench
# then run(command: "scripts/ring-bench.sh", carry: [".gpu/ring"]).
# Env: RING_TEST (test binary, default .gpu/ring/ringbench.test), OUT (output folder),
# RING_BENCH_MAX (largest size in bytes, default 1 GiB).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/ring-bench}
mkdir -p "$OUT"
bin=${RING_TEST:-$root/.gpu/ring/ringbench.test}
max=${RING_BENCH_MAX:-1073741824}
n=$(nvidia-smi -L | grep -c '^GPU')
[ "$max" -lt 1073741824 ] && export GNNLOADER_BENCH_SCALE=small
(cd internal/bench/ringbench && GNNLOADER_REQUIRE_GPU=1 GNNLOADER_BENCH=1 GNNLOADER_BENCH_OUT="$OUT/ring-${n}gpu.txt" \
	"$bin" -test.run '^TestBenchRing$' -test.count=1 -test.timeout=5m > "$OUT/ring-bench.log" 2>&1) ||
	{ echo "ring bench failed:"; tail -20 "$OUT/ring-bench.log"; }
python3 scripts/ring_nccl_bench.py --max-bytes "$max" --out "$OUT/nccl-${n}gpu.txt" > "$OUT/nccl-bench.log" 2>&1 ||
	{ echo "nccl bench failed:"; tail -20 "$OUT/nccl-bench.log"; }
cat "$OUT/ring-${n}gpu.txt" "$OUT/nccl-${n}gpu.txt" 2> /dev/null
echo "== $n GPUs, side by side"
python3 scripts/ring_nccl_bench.py --join "$OUT/ring-${n}gpu.txt" "$OUT/nccl-${n}gpu.txt"
