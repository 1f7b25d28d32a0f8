#!/usr/bin/env bash
# Issue 15 experiment for one device call (about 5-6 minutes; GPU machine,
# with .gpu/bin/loaderd carried): what of the daemon's GPU work slows the
# training steps beside it, and whether L2 eviction hints on the gather
# (scripts/probes/gather-l2hints.sh) take part of it away. Under MPS, 32
# slots, synthetic papers100M:
#   main  (whole epochs) pcie, loader, train_only, train_slots, train_busy, loaderd
#   l2    the gather kernels with L2 hints (GNNLOADER_KERNELS), phases of
#         PHASE_BATCHES: train_only, train_busy, loader, loaderd
#   base  the default again, same phases (the phases' spread)
#   l2b   L2 hints again
# (MAIN_VARIANTS and PHASE_VARIANTS override the two lists.)
# Compare train_busy's and loaderd's steps within the call only.
# Output under $OUT, as scripts/bench-train.sh leaves it.
set -euo pipefail
cd "$(dirname "$0")/../.."
fat=${TMPDIR:-/tmp}/gnnloader-gather-l2hints.fatbin
scripts/probes/gather-l2hints.sh "$fat"
v=${PHASE_VARIANTS:-train_only,train_busy,loader,loaderd}
export BUDGET_S=${BUDGET_S:-540} PHASE_BATCHES=${PHASE_BATCHES:-600}
MPS_ALL=1 SLOTS=0 NO_SLOTS2=1 NO_ALLSMS=1 CACHE= \
	MAIN_VARIANTS=${MAIN_VARIANTS:-pcie,loader,train_only,train_slots,train_busy,loaderd} \
	EXTRA="l2:variants=$v GNNLOADER_KERNELS=$fat;base:variants=$v;l2b:variants=$v GNNLOADER_KERNELS=$fat" \
	scripts/bench-train.sh 1 0
