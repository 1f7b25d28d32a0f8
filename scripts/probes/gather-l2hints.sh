#!/usr/bin/env bash
# Experiment (issue 15, not the committed kernels): gather.cu with L2
# eviction hints, the host-row loads marked L2::evict_first and the slot
# stores st.global.cs (streaming), so that a sweep's gigabytes of rows pass
# through L2 without evicting the training kernels' working set beside them.
# Builds the variant fatbin with the committed nvcc flags into OUT (on a GPU
# machine: nvcc is there); a daemon then loads it in place of the embedded
# one with GNNLOADER_KERNELS=OUT. Adopt it into gather.cu only if measured
# better (bench-train: train_busy and loaderd against the default).
#   scripts/probes/gather-l2hints.sh OUT.fatbin [--source-only]
set -euo pipefail
out=${1:?usage: gather-l2hints.sh OUT.fatbin [--source-only]}
out=$(realpath -m "$out")
cd "$(dirname "$0")/../../cudaext/kernels"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# L2 eviction priority on a 16-byte load needs an access policy operand on
# sm_80/sm_90 (a bare .L2::evict_first is only for 256-bit loads):
# createpolicy.fractional.L2::evict_first, then ld...L2::cache_hint.
perl -0pe 's/asm volatile\("ld\.global\.nc\.L1::no_allocate\.v4\.u32 \{%0,%1,%2,%3\}, \[%4\];"\n(\s*): "=r"\(v\.x\), "=r"\(v\.y\), "=r"\(v\.z\), "=r"\(v\.w\)\n\s*: "l"\(p\)\);/uint64_t pol;\n\tasm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));\n\tasm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"\n$1: "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)\n$1: "l"(p), "l"(pol));/' gather.cu |
	sed -e 's/^\t\*reinterpret_cast<uint4 \*>(p) = v;$/\tasm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");/' \
	> "$tmp/gather.cu"
if ! grep -q 'L2::cache_hint' "$tmp/gather.cu" || ! grep -q 'st\.global\.cs' "$tmp/gather.cu"; then
	echo "gather-l2hints: gather.cu changed, the substitutions did not apply" >&2
	exit 1
fi
if [ "${2:-}" = --source-only ]; then
	cp "$tmp/gather.cu" "$out"
	exit 0
fi
shopt -s nullglob
for h in *.cuh; do cp "$h" "$tmp/"; done
read -r -a flags < nvcc.flags
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$NVCC" "${flags[@]}" -o "$out" "$tmp/gather.cu"
echo "built $out"
