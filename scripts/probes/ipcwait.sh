#!/usr/bin/env bash
# Runs scripts/probes/ipcwait.cu's pairs on a GPU machine: the reader's rate
# with a second process that waits on nothing, on the reader's IPC event, or
# on a device word, each twice, interleaved, under one MPS control daemon
# (then once more each without MPS). Usage: scripts/probes/ipcwait.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-3}
nvcc -O3 -std=c++17 -arch=sm_90 -lcuda -o /tmp/ipcwait scripts/probes/ipcwait.cu
pair() { # pair MODE: one reader and one waiter
	local d
	d=$(mktemp -d)
	/tmp/ipcwait waiter "$d" "$1" > "$d/waiter.txt" 2>&1 &
	local w=$!
	/tmp/ipcwait reader "$d" "$secs" | sed "s/^/$2 $1 /"
	wait $w || { echo "waiter $1 failed:"; cat "$d/waiter.txt"; }
	rm -rf "$d"
}
mps=$(mktemp -d)
mkdir -p "$mps/pipe" "$mps/log"
export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
nvidia-cuda-mps-control -d
for round in 1 2; do
	for mode in none event value; do pair "$mode" mps; done
done
echo quit | nvidia-cuda-mps-control
sleep 1
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
for mode in none event value; do pair "$mode" nomps; done
