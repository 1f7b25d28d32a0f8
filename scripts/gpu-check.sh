#!/usr/bin/env bash
# The GPU check: one call on the GPU machine, after scripts/gpu-build.sh here:
#   run(command: "scripts/gpu-check.sh", carry: [".gpu"])
# Steps (each logged; a failing step does not stop the others):
#   smi      nvidia-smi summary and topology
#   kernels  rebuild the kernels with nvcc into $OUT/kernels and compare the
#            sources hash with the committed stamp; when the committed fatbin
#            is stale, the tests below use the fresh build (GNNLOADER_KERNELS)
#   tests    every .gpu/bin/*.test with GNNLOADER_REQUIRE_GPU=1 (a skip for a
#            missing GPU is a failure there) and LOADERD=.gpu/bin/loaderd
#            (internal/chaos runs that daemon: there is no Go to build one)
#   python   the Python client's tests against .gpu/bin/loaderd: CPU and CUDA
#            (python/tests/test_loader.py, test_cuda.py, test_cuda_edges.py; the CUDA ones again with
#            GNNLOADER_RECEIVE_THREAD=1, and test_receive_thread.py), GNNLOADER_REQUIRE_GPU=1;
#            where torch_geometric is installed, the PyG drop-in tests too
#   mps      under an MPS control daemon of our own (temp pipe/log dirs): the
#            CUDA end-to-end test, then the gather benchmark (small table) at
#            several CUDA_MPS_ACTIVE_THREAD_PERCENTAGE shares (GPU_CHECK_MPS=0 skips)
#   bench    the gather benchmark, TestBenchGather of internal/bench/gatherbench
#            (GNNLOADER_BENCH_SCALE=small|full, default full; GPU_CHECK_BENCH=0
#            skips it)
#   steps    scripts/gpu-steps/*.sh (papers100M generated at scale 1, pyarrow
#            reading loaderd's files, the sampler and serve benchmarks on the
#            machine's cores; GPU_CHECK_STEPS=0 skips them), then any
#            executable .gpu/steps/*.sh, in name order, with $OUT set
# Output under $OUT (at most 8 files come back): summary.txt, check.log,
# bench.txt, mps.txt, steps.log, kernels.tgz (every fatbin built, its stamp and ptxas log).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
log=$OUT/check.log
summary=$OUT/summary.txt
: > "$log"
: > "$summary"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

note() { echo "$*" | tee -a "$summary"; }
step() { # step NAME CMD...: runs CMD, logging to check.log, and records the result
	local name=$1
	shift
	echo "===== $name: $*" >> "$log"
	local t0=$SECONDS
	"$@" >> "$log" 2>&1
	local rc=$?
	note "$(printf '%-40s %s (%ds)' "$name" "$([ $rc = 0 ] && echo ok || echo "FAIL rc=$rc")" $((SECONDS - t0)))"
	return $rc
}

note "gpu-check $(date -u +%FT%TZ) on $(hostname)"

# smi
step smi bash -c 'nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.mem --format=csv && nvidia-smi topo -m && nvidia-smi -q | sed -n 1,60p'

# kernels: rebuilt for every kernel file; a stale committed fatbin is
# replaced, for this run, by the fresh one (through its environment variable),
# and everything built comes back in one archive, $OUT/kernels.tgz.
if command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
	kdir=$(mktemp -d /tmp/gnnloader-kernels.XXXXXX)/kernels
	if step kernels scripts/build-kernels.sh "$kdir"; then
		for k in gather:GNNLOADER_KERNELS ring:GNNLOADER_RING_KERNELS plan:GNNLOADER_PLAN_KERNELS sample:GNNLOADER_SAMPLE_KERNELS; do
			name=${k%%:*} env=${k#*:}
			fresh=$(sed -n 's/^sources //p' "$kdir/$name.fatbin.sha256" 2> /dev/null)
			committed=$(sed -n 's/^sources //p' "cudaext/kernels/$name.fatbin.sha256" 2> /dev/null)
			if [ -n "$fresh" ] && [ "$fresh" != "$committed" ]; then
				note "kernels: committed $name.fatbin is stale (sources ${committed:-none}, now $fresh): tests use the fresh build; commit it from kernels.tgz"
				export "$env=$kdir/$name.fatbin"
			else
				note "kernels: committed $name stamp matches the sources"
			fi
		done
		tar -C "$(dirname "$kdir")" -czf "$OUT/kernels.tgz" kernels
	fi
else
	note "kernels: no nvcc here, using the committed fatbins"
fi

# tests
shopt -s nullglob
for bin in .gpu/bin/*.test; do
	name=$(basename "$bin" .test)
	dir=$(cat ".gpu/bin/$name.dir" 2> /dev/null || echo .)
	step "test $name" bash -c "cd '$root/$dir' && GNNLOADER_REQUIRE_GPU=1 LOADERD='$root/.gpu/bin/loaderd' '$root/$bin' -test.v -test.count=1 -test.timeout=4m"
done

# python: the client on the CPU and CUDA paths, against the carried daemon
if [ -x .gpu/bin/loaderd ]; then
	step "python client (cpu + cuda)" bash -c "cd '$root/python/tests' && LOADERD='$root/.gpu/bin/loaderd' GNNLOADER_REQUIRE_GPU=1 PYTHONUNBUFFERED=1 python3 -m unittest -v test_loader test_cuda test_cuda_edges"
	# The CUDA path again with each loader receiving on a thread of its own
	# (Loader(receive_thread=True)).
	step "python client on cuda, receive thread" bash -c "cd '$root/python/tests' && LOADERD='$root/.gpu/bin/loaderd' GNNLOADER_REQUIRE_GPU=1 GNNLOADER_RECEIVE_THREAD=1 PYTHONUNBUFFERED=1 python3 -m unittest -v test_cuda test_cuda_edges test_receive_thread"
	# With PyG installed (the GPU machines have it; CI does not), the drop-in
	# tests and the reddit-like example run against real torch_geometric Data.
	if python3 -c 'import torch_geometric' 2> /dev/null; then
		step "python PyG drop-in (torch_geometric installed)" bash -c "cd '$root/python/tests' && LOADERD='$root/.gpu/bin/loaderd' PYTHONUNBUFFERED=1 python3 -m unittest -v test_pyg test_pyg_neighbor_loader test_pyg_parity test_reddit_like test_hetero test_hetero_batch"
	else
		note "python PyG drop-in                      skipped: torch_geometric is not installed"
	fi
	step "loaderd info" "$root/.gpu/bin/loaderd" info
fi

# mps: loaderd and a trainer under an MPS control daemon we start and stop
if [ "${GPU_CHECK_MPS:-1}" != 0 ] && [ -x .gpu/bin/loaderd ] && command -v nvidia-cuda-mps-control > /dev/null; then
	mps=$(mktemp -d /tmp/gnnloader-mps.XXXXXX)
	mkdir -p "$mps/pipe" "$mps/log"
	export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
	if step "mps: start control daemon" nvidia-cuda-mps-control -d; then
		step "mps: cuda end to end under MPS" bash -c "cd '$root/python/tests' && LOADERD='$root/.gpu/bin/loaderd' GNNLOADER_REQUIRE_GPU=1 PYTHONUNBUFFERED=1 python3 -m unittest -v test_cuda.CudaLoaderTest.test_matches_cpu_path test_cuda.CudaLoaderTest.test_slot_reuse_waits_for_release test_cuda.CudaLoaderTest.test_deferred_release_waits_for_its_cover && echo get_server_list | nvidia-cuda-mps-control && '$root/.gpu/bin/loaderd' info"
		for pct in 10 25 50 100; do
			step "mps: bench gather at ${pct}% threads" bash -c "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$pct '$root/.gpu/bin/loaderd' bench gather --rows 16777216 --batch-rows 600000 --reps 5 --sms -1,32 | tee -a '$OUT/mps.txt'"
		done
		echo quit | nvidia-cuda-mps-control
		sleep 1
		cat "$mps"/log/*.log >> "$log" 2> /dev/null
	fi
	unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
	rm -rf "$mps"
fi

# bench
# (internal/bench/gatherbench's TestBenchGather; gpu-build.sh names its
# binary after the package path)
gatherbench=.gpu/bin/internal_bench_gatherbench.test
if [ "${GPU_CHECK_BENCH:-1}" != 0 ] && [ -x "$gatherbench" ]; then
	step "bench gather (${GNNLOADER_BENCH_SCALE:-full})" bash -c "cd '$root/internal/bench/gatherbench' && GNNLOADER_BENCH=1 GNNLOADER_BENCH_OUT='$OUT/bench.txt' '$root/$gatherbench' -test.run '^TestBenchGather\$' -test.v -test.timeout=6m"
fi

# steps: the committed ones (dataset, sampler and serve figures on the GPU
# machine's cores; GPU_CHECK_STEPS=0 skips them, they take about 2 minutes),
# then any local ones in .gpu/steps
steps=(.gpu/steps/*.sh)
[ "${GPU_CHECK_STEPS:-1}" = 0 ] || steps=(scripts/gpu-steps/*.sh "${steps[@]}")
for s in "${steps[@]}"; do
	if [ -x "$s" ]; then
		echo "===== step $s" >> "$OUT/steps.log"
		t0=$SECONDS
		OUT=$OUT "$s" >> "$OUT/steps.log" 2>&1
		rc=$?
		note "$(printf '%-40s %s (%ds)' "step $(basename "$s")" "$([ $rc = 0 ] && echo ok || echo "FAIL rc=$rc")" $((SECONDS - t0)))"
	fi
done

# The failures in brief, then the summary and the benchmark last (the reply shows the tail).
grep -E '^(--- FAIL|FAIL|panic)' "$log" | head -40
[ -f "$OUT/bench.txt" ] && cat "$OUT/bench.txt"
cat "$summary"
! grep -q FAIL "$summary"
