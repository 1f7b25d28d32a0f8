#!/usr/bin/env bash
# Issue 15 probe for one device call (about 2 minutes; GPU machine, nvcc
# there): does a copy-engine transfer slow training steps less than the
# zero-copy gather kernel moving the same bytes? bench_train.py's GraphSAGE
# step (scripts/probes/interference_train.py, a synthetic papers100M-shaped
# batch) is timed alone and beside a second process looping over an 8 GiB
# pinned table (scripts/probes/zcread.cu loop mode): cudaMemcpyAsync of
# 307 MB (the copy engines, no SMs), or gnn_gather16 on 600,000 sorted
# random 512-byte rows on N SMs (loaderd's gather), or those rows by
# cudaMemcpyBatchAsync, or gathered by the CPU into pinned staging and
# copied. Under one MPS control daemon (as bench-train.sh's MPS_ALL). Writes
# $OUT/interference.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp}/interference.txt
zc=${TMPDIR:-/tmp}/zcread
nvcc -O3 -std=c++17 -arch=sm_90 -Xcompiler -fopenmp -lgomp -lcuda -o "$zc" scripts/probes/zcread.cu || exit 1
py=${PYTHON:-python3}
nvidia-smi --query-gpu=name,clocks.max.sm,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader | tee "$out"
# the rates alone, every method (ld16 on several grids)
"$zc" 512 600000 5 nobulk 8h 2>&1 | grep -v '^ld16.*x\(128\|512\)' | tee -a "$out"

beside() { # beside LABEL BG|none
	local bg=$2 pid=""
	if [ "$bg" != none ]; then
		"$zc" 512 600000 120 "loop-$bg" 8h > /tmp/bg.log 2>&1 &
		pid=$!
		for _ in $(seq 600); do grep -q looping /tmp/bg.log && break; sleep 0.1; done
		sleep 1
	fi
	"$py" scripts/probes/interference_train.py --label "$1" 2>&1 | tail -1 | tee -a "$out"
	if [ -n "$pid" ]; then
		kill -TERM "$pid"
		wait "$pid"
		grep '^loop' /tmp/bg.log | sed 's/^/    /' | tee -a "$out"
	fi
}

mps=$(mktemp -d /tmp/interf-mps.XXXXXX)
mkdir -p "$mps/pipe" "$mps/log"
export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
if nvidia-cuda-mps-control -d; then
	echo "== under MPS" | tee -a "$out"
	beside "MPS alone" none
	for bg in ${BESIDE:-memcpy ld16:16 ld16:8 batch cpu ld16:16}; do
		beside "MPS beside $bg" "$bg"
	done
	beside "MPS alone again" none
	echo quit | nvidia-cuda-mps-control
	sleep 2
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
