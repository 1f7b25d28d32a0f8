#!/usr/bin/env bash
# The main job on a fresh machine, no GPU needed: installs what it needs,
# builds loaderd, imports Cora, starts loaderd, trains a 2-layer GraphSAGE
# through it (and the exact full-neighbourhood reference), prints accuracy,
# and stops loaderd.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH=/usr/local/go/bin:$PATH
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"

go build -o bin/loaderd ./cmd/loaderd
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT
bin/loaderd import npz testdata/cora.npz --undirected --out "$work/cora"
bin/loaderd verify "$work/cora"
bin/loaderd serve --dataset "$work/cora" --socket "$work/loaderd.sock" 2>"$work/loaderd.log" &
pid=$!
for _ in $(seq 100); do [ -S "$work/loaderd.sock" ] && break; sleep 0.1; done
/usr/bin/python3 examples/train_sage.py --socket "$work/loaderd.sock" --reference "$@"
