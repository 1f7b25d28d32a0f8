#!/usr/bin/env bash
# GPU-machine step: the sampler benchmark on that machine's cores, on a
# papers100M-shaped graph at scale 0.1 and at scale 1 (graph only); then the
# GPU sampler alone on cuda:0 at scale 1, its kernels as one CUDA graph and
# launched one by one (docs/gpu.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${GPU_BIN:-.gpu/bin}
for scale in 0.1 1; do
	GOMAXPROCS=16 $bin/loaderd bench sample --dataset synthetic:papers100M:$scale:1 --duration 5s 2>&1 | grep -v level=INFO
done
$bin/loaderd bench sample --device cuda:0 --dataset synthetic:papers100M:1:0 --batches 1000 2>&1 | grep -v level=INFO
