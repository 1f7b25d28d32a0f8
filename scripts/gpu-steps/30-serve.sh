#!/usr/bin/env bash
# GPU-machine step: the CPU serving pipeline on that machine's cores.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${GPU_BIN:-.gpu/bin}
for t in 1 4; do
	$bin/loaderd bench serve --dataset synthetic:products:0.2:1 --trainers $t 2>&1 | grep -v level=INFO
done
