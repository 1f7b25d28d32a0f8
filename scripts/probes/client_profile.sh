#!/usr/bin/env bash
# The Python client's host time a batch on a GPU machine (an experiment aid):
# starts .gpu/bin/loaderd on a small synthetic papers100M, then iterates
# epochs with a CUDA Loader of 64 slots under cProfile, touching nothing
# (scripts/probes/client_profile.py), once for each gnnloader package
# directory given (default: python/). Usage:
#   scripts/probes/client_profile.sh [PYTHON_DIR ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
dirs=("$@")
[ ${#dirs[@]} -eq 0 ] && dirs=(python)
work=$(mktemp -d)
.gpu/bin/loaderd serve --dataset synthetic:papers100M:0.05:0 --socket "$work/s.sock" > "$work/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 600); do [ -S "$work/s.sock" ] && break; sleep 0.1; done
for d in "${dirs[@]}"; do
	echo "== client from $d"
	python3 scripts/probes/client_profile.py "$work/s.sock" "$d"
done
