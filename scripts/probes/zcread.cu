// zcread: how fast can a GPU read scattered rows of pinned host memory?
// A probe, not part of loaderd: it measures the ways a gather could read
// rows across PCIe, side by side in one process, against the copy engine's
// contiguous memcpy (the "PCIe bound" of docs/benchmarks.md).
//
// Build and run on the GPU machine (nvcc is only there):
//   nvcc -O3 -std=c++17 -arch=sm_90 -Xcompiler -fopenmp -lgomp -lcuda -o /tmp/zcread scripts/probes/zcread.cu
//   /tmp/zcread 512 600000 5 nobulk 16h 56h 56n
// (row bytes, rows a batch, repetitions, whether to run the bulk-copy
// kernels, then the tables: GiB and kind, see alloc_table)
// Prints one line per method and grid: GB/s of row bytes delivered into
// device memory (median of reps, CUDA events), and checks every method's
// output against the table.
//
// Methods:
//   ld16      gather.cu's gnn_gather16 itself (16-byte loads, 8 lanes a row,
//             4 chunks a lane for 512-byte rows)
//   bulk      cp.async.bulk (the Hopper bulk copy engine, 1-D, no tensor map)
//             from host memory into shared memory, completing on an mbarrier,
//             two sets of K rows in flight a warp; the warp stores the rows
//   bulk-st   the same, stored with cp.async.bulk shared -> global
//   seq       the same over consecutive rows (no scatter): the zero-copy ceiling
//   memcpy    cudaMemcpyAsync of the same number of bytes, contiguous
//
//   batch     cudaMemcpyBatchAsync: one copy a row (the driver's batched
//             memcpy; whether copy engines or SMs carry it is the question)
//   batch-ov  the same with cudaMemcpyFlagPreferOverlapWithCompute
//   cpu       OpenMP threads copy the rows into pinned staging, then one
//             cudaMemcpyAsync (the copy engines); the CPU time is printed too
//
// Loop mode (scripts/probes/interference.sh): `zcread 512 600000 SECONDS
// loop-ld16:SMS[:THREADS]|loop-seq:SMS[:THREADS]|loop-memcpy|loop-batch|loop-cpu TABLE` sets the table up, prints "looping",
// then repeats one method back to back for SECONDS or until SIGTERM (work
// for another process to run beside) and prints the rate it kept.
// ZCREAD_SKIP=batch,cpu leaves those methods out.
// Tables: GiB then a kind (alloc_table): c cudaHostAlloc, h/n mmap advised
// for huge pages or not then cudaHostRegister (loaderd's way), v/V
// cuMemCreate on the host. What it showed on an H100: docs/benchmarks.md,
// "What bounds a zero-copy read".
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <omp.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <random>
#include <vector>

#define CK(x)                                                                                                  \
	do {                                                                                                       \
		cudaError_t e_ = (x);                                                                                  \
		if (e_ != cudaSuccess) {                                                                               \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                 \
			exit(1);                                                                                           \
		}                                                                                                      \
	} while (0)

// The gather's own kernels (gnn_gather16 is what the "ld16" and "seq" rows
// run), compiled into the probe so it measures exactly what loaderd launches.
#include "../../cudaext/kernels/gather.cu"

__device__ __forceinline__ uint32_t saddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint64_t *bar) {
	asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(saddr(bar)));
}

__device__ __forceinline__ void mbar_expect(uint64_t *bar, uint32_t bytes) {
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
	asm volatile(
	    "{\n"
	    ".reg .pred p;\n"
	    "WAIT_%=:\n"
	    "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
	    "@!p bra WAIT_%=;\n"
	    "}\n" ::"r"(saddr(bar)),
	    "r"(parity)
	    : "memory");
}

__device__ __forceinline__ void bulk_load(void *sdst, const void *gsrc, uint32_t bytes, uint64_t *bar) {
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
	                 saddr(sdst)),
	             "l"(gsrc), "r"(bytes), "r"(saddr(bar))
	             : "memory");
}

__device__ __forceinline__ void bulk_store(void *gdst, const void *ssrc, uint32_t bytes) {
	asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gdst), "r"(saddr(ssrc)), "r"(bytes)
	             : "memory");
}

// Each warp owns 2 sets of K row slots (rb bytes each) and a barrier a set.
// Lane 0 issues the next set's K bulk loads before the warp consumes the
// current set. STORE_BULK: lane 0 stores each row with a bulk store (and
// waits for the set's stores to have read shared memory before reusing it).
template <int K, bool STORE_BULK>
__global__ void k_bulk(const uint8_t *__restrict__ table, int64_t rb, const uint32_t *__restrict__ rows, int64_t n,
                       uint8_t *__restrict__ dst) {
	extern __shared__ __align__(128) uint8_t smem[];
	__shared__ uint64_t bars[32][2];
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int nw = blockDim.x / 32;
	uint8_t *slots = smem + (int64_t)warp * 2 * K * rb;
	if (lane == 0) {
		mbar_init(&bars[warp][0]);
		mbar_init(&bars[warp][1]);
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	__syncwarp();
	const int64_t gw = (int64_t)blockIdx.x * nw + warp, tw = (int64_t)gridDim.x * nw;
	// Sets this warp handles: base = (gw + i*tw) * K.
	auto issue = [&](int64_t base, int s) {
		if (lane == 0 && base < n) {
			int cnt = n - base < K ? (int)(n - base) : K;
			// the warp's generic reads of these slots (two sets ago) before the async writes
			asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
			mbar_expect(&bars[warp][s], (uint32_t)(cnt * rb));
			for (int j = 0; j < cnt; j++)
				bulk_load(slots + (int64_t)(s * K + j) * rb, table + (int64_t)rows[base + j] * rb, (uint32_t)rb,
				          &bars[warp][s]);
		}
	};
	uint32_t parity[2] = {0, 0};
	int s = 0;
	issue(gw * K, 0);
	for (int64_t base = gw * K; base < n; base += tw * K, s ^= 1) {
		if (STORE_BULK && lane == 0) // the other set's stores must have read its slots
			asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
		__syncwarp();
		issue(base + tw * K, s ^ 1);
		mbar_wait(&bars[warp][s], parity[s]);
		parity[s] ^= 1;
		int cnt = n - base < K ? (int)(n - base) : K;
		if (STORE_BULK) {
			if (lane == 0) {
				for (int j = 0; j < cnt; j++)
					bulk_store(dst + (base + j) * rb, slots + (int64_t)(s * K + j) * rb, (uint32_t)rb);
				asm volatile("cp.async.bulk.commit_group;" ::: "memory");
			}
		} else {
			const int64_t chunks = rb >> 4;
			for (int j = 0; j < cnt; j++) {
				const uint8_t *src = slots + (int64_t)(s * K + j) * rb;
				uint8_t *out = dst + (base + j) * rb;
				for (int64_t c = lane; c < chunks; c += 32)
					*reinterpret_cast<uint4 *>(out + (c << 4)) = *reinterpret_cast<const uint4 *>(src + (c << 4));
			}
		}
		__syncwarp();
	}
	if (STORE_BULK && lane == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

static float median(std::vector<float> v) {
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

struct Ctx {
	uint8_t *table;  // host, mapped
	uint8_t *dtable; // its device address
	int64_t nrows, rb, n;
	uint32_t *drows, *dseq;
	std::vector<uint32_t> rows;
	uint8_t *dst;
	int reps;
	cudaEvent_t e0, e1;
};

template <class F>
static float time_it(Ctx &c, F launch) {
	std::vector<float> ms;
	for (int r = 0; r <= c.reps; r++) {
		CK(cudaEventRecord(c.e0));
		launch();
		CK(cudaEventRecord(c.e1));
		CK(cudaEventSynchronize(c.e1));
		CK(cudaGetLastError());
		float t;
		CK(cudaEventElapsedTime(&t, c.e0, c.e1));
		if (r > 0) ms.push_back(t); // the first is a warm-up
	}
	return median(ms);
}

// check compares the device output with the table's rows (seq: rows 0..n).
static bool check(Ctx &c, bool seq) {
	std::vector<uint8_t> out(c.n * c.rb);
	CK(cudaMemcpy(out.data(), c.dst, out.size(), cudaMemcpyDeviceToHost));
	for (int64_t k = 0; k < c.n; k++) {
		int64_t r = seq ? k : c.rows[k];
		if (memcmp(out.data() + k * c.rb, c.table + r * c.rb, c.rb) != 0) {
			fprintf(stderr, "mismatch at row %lld (table row %lld)\n", (long long)k, (long long)r);
			return false;
		}
	}
	return true;
}

static void report(Ctx &c, const char *name, const char *grid, float ms, bool ok) {
	double gbs = (double)c.n * c.rb / (ms * 1e-3) / 1e9;
	printf("%-10s %-14s %8.3f ms %7.2f GB/s %s\n", name, grid, ms, gbs, ok ? "ok" : "WRONG");
	fflush(stdout);
}

// alloc_table maps the table: kind 'c' cudaHostAlloc(Mapped); 'h' anonymous
// mmap on a 2 MiB boundary advised MADV_HUGEPAGE, then cuMemHostRegister
// (what loaderd does); 'n' the same advised MADV_NOHUGEPAGE.
#define CKD(x)                                                                                                 \
	do {                                                                                                       \
		CUresult r_ = (x);                                                                                     \
		if (r_ != CUDA_SUCCESS) {                                                                              \
			const char *s_ = "?";                                                                              \
			cuGetErrorString(r_, &s_);                                                                         \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_);                                    \
			exit(1);                                                                                           \
		}                                                                                                      \
	} while (0)

// 'v' (and 'V', reserved on a 1 GiB boundary): cuMemCreate of pinned host
// memory (CU_MEM_LOCATION_TYPE_HOST_NUMA, node 0) mapped with cuMemMap at one
// address for the device and the CPU: the driver maps it in allocation-
// granularity pieces instead of the 4 KiB pages of a registered range.
static uint8_t *alloc_vmm(size_t &bytes, size_t align) {
	CUmemAllocationProp prop = {};
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop.location.id = 0;
	size_t gran = 0;
	CKD(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	bytes = (bytes + gran - 1) / gran * gran;
	CUmemGenericAllocationHandle h;
	CKD(cuMemCreate(&h, bytes, &prop, 0));
	CUdeviceptr p;
	CKD(cuMemAddressReserve(&p, bytes, align > gran ? align : gran, 0, 0));
	CKD(cuMemMap(p, bytes, 0, h, 0));
	CUmemAccessDesc acc[2] = {};
	acc[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc[0].location.id = 0;
	acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	acc[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	acc[1].location.id = 0;
	acc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CKD(cuMemSetAccess(p, bytes, acc, 2));
	printf("vmm host allocation: granularity %zu bytes, %zu bytes at %#llx\n", gran, bytes, (unsigned long long)p);
	return (uint8_t *)p;
}

// skipped reports whether ZCREAD_SKIP (comma-separated: batch, cpu) names
// a method: the slow ones take seconds a table.
static bool skipped(const char *method) {
	const char *s = getenv("ZCREAD_SKIP");
	return s && strstr(s, method) != nullptr;
}

static uint8_t *alloc_table(char kind, size_t bytes) {
	if (kind == 'v' || kind == 'V') return alloc_vmm(bytes, kind == 'V' ? (1ull << 30) : 0);
	if (kind == 'c') {
		uint8_t *t;
		CK(cudaHostAlloc((void **)&t, bytes, cudaHostAllocMapped));
		return t;
	}
	const size_t huge = 2u << 20;
	uint8_t *raw = (uint8_t *)mmap(nullptr, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	uint8_t *t = (uint8_t *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
	if (madvise(t, bytes, kind == 'h' ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0) perror("madvise");
	return t;
}

static void fill(uint8_t *t, size_t bytes) {
	uint64_t *w = (uint64_t *)t;
	int64_t nw = bytes / 8;
#pragma omp parallel for schedule(static)
	for (int64_t i = 0; i < nw; i++) w[i] = (uint64_t)i * 0x9E3779B97F4A7C15ull;
}

static long anon_huge_kb() {
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	if (!f) return -1;
	char line[256];
	long kb = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
	fclose(f);
	return kb;
}

// CEPaths are the copy-engine ways to move the rows: one batched memcpy of
// a copy a row, and a CPU gather into pinned staging plus one memcpy.
struct CEPaths {
	std::vector<const void *> srcs, dsts;
	std::vector<size_t> sizes;
	uint8_t *staging = nullptr;
	double cpu_ms = 0;  // the last cpu_gather's wall time
	cudaStream_t s = 0; // the batched memcpy refuses the legacy stream
};

static void ce_setup(Ctx &c, CEPaths &e) {
	for (int64_t k = 0; k < c.n; k++) {
		e.srcs.push_back(c.table + (int64_t)c.rows[k] * c.rb);
		e.dsts.push_back(c.dst + k * c.rb);
		e.sizes.push_back(c.rb);
	}
	CK(cudaHostAlloc((void **)&e.staging, c.n * c.rb, cudaHostAllocDefault));
	CK(cudaStreamCreate(&e.s)); // blocking: ordered with the legacy stream's events
}

static cudaError_t batch_copy_err(CEPaths &e, unsigned flags) {
	cudaMemcpyAttributes a = {};
	a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
	a.flags = flags;
	size_t idx = 0;
#if CUDART_VERSION >= 13000
	return cudaMemcpyBatchAsync((const void **)e.dsts.data(), (const void **)e.srcs.data(), e.sizes.data(), e.sizes.size(),
	                            &a, &idx, 1, e.s);
#else
	size_t fail = 0;
	return cudaMemcpyBatchAsync((void **)e.dsts.data(), (void **)e.srcs.data(), e.sizes.data(), e.sizes.size(), &a, &idx,
	                            1, &fail, e.s);
#endif
}

static void batch_copy(CEPaths &e, unsigned flags) { CK(batch_copy_err(e, flags)); }

// gather_rows copies rows [lo, hi) into the staging, prefetching the row
// pf ahead (0: none).
static void gather_rows(Ctx &c, CEPaths &e, int64_t lo, int64_t hi, int pf) {
#pragma omp parallel for schedule(static, 256)
	for (int64_t k = lo; k < hi; k++) {
		if (pf && k + pf < hi) {
			const uint8_t *q = c.table + (int64_t)c.rows[k + pf] * c.rb;
			for (int64_t b = 0; b < c.rb; b += 64) __builtin_prefetch(q + b);
		}
		memcpy(e.staging + k * c.rb, c.table + (int64_t)c.rows[k] * c.rb, c.rb);
	}
}

// cpu_gather gathers every row then copies them in one memcpy (chunk 0), or
// copies each chunk of rows as soon as it is gathered, the copy engines
// carrying chunk i while the CPU gathers chunk i+1.
static void cpu_gather(Ctx &c, CEPaths &e, int pf = 0, int64_t chunk = 0) {
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!chunk) {
		gather_rows(c, e, 0, c.n, pf);
		CK(cudaMemcpyAsync(c.dst, e.staging, c.n * c.rb, cudaMemcpyHostToDevice));
	} else {
		for (int64_t lo = 0; lo < c.n; lo += chunk) {
			int64_t hi = std::min(c.n, lo + chunk);
			gather_rows(c, e, lo, hi, pf);
			CK(cudaMemcpyAsync(c.dst + lo * c.rb, e.staging + lo * c.rb, (hi - lo) * c.rb, cudaMemcpyHostToDevice));
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	e.cpu_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
}

static volatile sig_atomic_t stop_loop = 0;
static void on_term(int) { stop_loop = 1; }

// run_table measures one table: argument like "16h" (GiB, kind).
static void run_table(const char *spec, int64_t rb, int64_t n, int reps, bool bulk, const cudaDeviceProp &p,
                      const char *loop) {
	double gib = atof(spec);
	char kind = spec[strlen(spec) - 1];
	Ctx c;
	c.rb = rb;
	c.n = n;
	c.reps = reps;
	c.nrows = (int64_t)(gib * (1ll << 30)) / c.rb;
	size_t bytes = (size_t)c.nrows * c.rb;
	c.table = alloc_table(kind, bytes);
	fill(c.table, bytes);
	bool vmm = kind == 'v' || kind == 'V';
	if (kind != 'c' && !vmm) CK(cudaHostRegister(c.table, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
	if (vmm)
		c.dtable = c.table; // one address for both
	else
		CK(cudaHostGetDevicePointer((void **)&c.dtable, c.table, 0));
	printf("\n== table %s: %.1f GiB, %lld rows of %lld B, batch %lld rows; AnonHugePages %ld MB\n", spec, gib,
	       (long long)c.nrows, (long long)c.rb, (long long)c.n, anon_huge_kb() / 1024);
	std::mt19937_64 rng(1);
	{ // n sorted unique rows
		std::vector<char> seen(c.nrows, 0);
		while ((int64_t)c.rows.size() < c.n) {
			uint32_t r = (uint32_t)(rng() % c.nrows);
			if (!seen[r]) seen[r] = 1, c.rows.push_back(r);
		}
		std::sort(c.rows.begin(), c.rows.end());
	}
	std::vector<uint32_t> seq(c.n);
	for (int64_t i = 0; i < c.n; i++) seq[i] = (uint32_t)i;
	CK(cudaMalloc(&c.drows, c.n * 4));
	CK(cudaMalloc(&c.dseq, c.n * 4));
	CK(cudaMemcpy(c.drows, c.rows.data(), c.n * 4, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(c.dseq, seq.data(), c.n * 4, cudaMemcpyHostToDevice));
	CK(cudaMalloc(&c.dst, c.n * c.rb));
	CK(cudaEventCreate(&c.e0));
	CK(cudaEventCreate(&c.e1));

	const int gshift = rb >= 512 ? 3 : 5; // gather.cu: 8 lanes for 512-byte rows
	CEPaths ce;
	ce_setup(c, ce);
	if (loop) {
		const char *colon = strchr(loop, ':');
		int sms = atoi(colon ? colon + 1 : "16");
		int threads = colon && strchr(colon + 1, ':') ? atoi(strchr(colon + 1, ':') + 1) : 256;
		bool memcpy_ = strncmp(loop, "loop-memcpy", 11) == 0, batch_ = strcmp(loop, "loop-batch") == 0,
		     cpu_ = strcmp(loop, "loop-cpu") == 0, seq_ = strncmp(loop, "loop-seq", 8) == 0;
		signal(SIGTERM, on_term); // ends the loop cleanly: no client of MPS killed with work in flight
		printf("looping %s for at most %d s\n", loop, reps);
		fflush(stdout);
		CK(cudaEventRecord(c.e0));
		long launches = 0;
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			for (int i = 0; i < 4; i++, launches++) {
				if (memcpy_)
					CK(cudaMemcpyAsync(c.dst, c.table, c.n * c.rb, cudaMemcpyDefault));
				else if (batch_)
					batch_copy(ce, 0);
				else if (cpu_) {
					cpu_gather(c, ce, 16, 32768);
					CK(cudaStreamSynchronize(0)); // the staging is reused
				} else
					gnn_gather16<<<sms, threads>>>(c.dtable, c.rb, seq_ ? c.dseq : c.drows, nullptr, c.n, nullptr,
					                               c.dst, gshift);
			}
			CK(cudaDeviceSynchronize());
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (stop_loop || t.tv_sec - t0.tv_sec >= reps) break;
		}
		CK(cudaEventRecord(c.e1));
		CK(cudaEventSynchronize(c.e1));
		float total;
		CK(cudaEventElapsedTime(&total, c.e0, c.e1));
		printf("loop %s: %ld launches in %.1f s, %.1f GB/s\n", loop, launches, total / 1e3,
		       launches * (double)c.n * c.rb / (total * 1e6));
		return;
	}
	float ms = time_it(c, [&] { CK(cudaMemcpyAsync(c.dst, c.table, c.n * c.rb, cudaMemcpyDefault)); });
	report(c, "memcpy", "copy engine", ms, check(c, true));
	CK(cudaMemset(c.dst, 0, c.n * c.rb));
	cudaError_t be = skipped("batch") ? cudaSuccess : batch_copy_err(ce, 0);
	if (skipped("batch")) {
	} else if (be != cudaSuccess) {
		printf("batch      cudaMemcpyBatchAsync: %s\n", cudaGetErrorString(be));
		cudaGetLastError();
	} else {
		CK(cudaDeviceSynchronize());
		struct timespec h0, h1;
		clock_gettime(CLOCK_MONOTONIC, &h0);
		batch_copy(ce, 0);
		clock_gettime(CLOCK_MONOTONIC, &h1);
		CK(cudaDeviceSynchronize());
		printf("batch      host time of one call: %.3f ms\n", (h1.tv_sec - h0.tv_sec) * 1e3 + (h1.tv_nsec - h0.tv_nsec) / 1e6);
		ms = time_it(c, [&] { batch_copy(ce, 0); });
		report(c, "batch", "a copy a row", ms, check(c, false));
		CK(cudaMemset(c.dst, 0, c.n * c.rb));
		ms = time_it(c, [&] { batch_copy(ce, cudaMemcpyFlagPreferOverlapWithCompute); });
		report(c, "batch-ov", "a copy a row", ms, check(c, false));
	}
	CK(cudaMemset(c.dst, 0, c.n * c.rb));
	for (int pf : {0, 4, 16}) {
		if (skipped("cpu")) break;
		for (int64_t chunk : {(int64_t)0, (int64_t)32768}) {
			char nm[32];
			snprintf(nm, sizeof nm, "cpu pf%d", pf);
			ms = time_it(c, [&] { cpu_gather(c, ce, pf, chunk); });
			report(c, nm, chunk ? "chunks of 32K" : "omp + memcpy", ms, check(c, false));
			printf("%-10s gather alone   %8.3f ms %7.2f GB/s (%d threads)\n", nm, ce.cpu_ms,
			       (double)c.n * c.rb / (ce.cpu_ms * 1e6), omp_get_max_threads());
			CK(cudaMemset(c.dst, 0, c.n * c.rb));
		}
	}
	char grid[64];
	for (int sms : {4, 8, 12, 16, 24, 32, p.multiProcessorCount}) {
		for (int threads : {128, 256, 512}) {
			if (threads != 256 && sms != 16 && sms != 8) continue;
			snprintf(grid, sizeof grid, "%dSMx%d", sms, threads);
			ms = time_it(c, [&] {
				gnn_gather16<<<sms, threads>>>(c.dtable, c.rb, c.drows, nullptr, c.n, nullptr, c.dst, gshift);
			});
			report(c, "ld16", grid, ms, check(c, false));
		}
		snprintf(grid, sizeof grid, "%dSMx256", sms);
		ms = time_it(c, [&] { gnn_gather16<<<sms, 256>>>(c.dtable, c.rb, c.dseq, nullptr, c.n, nullptr, c.dst, gshift); });
		report(c, "seq", grid, ms, check(c, true));
	}
	if (bulk) {
		for (int sms : {8, 16}) {
#define BULK(KK, ST, NAME)                                                                                     \
	{                                                                                                          \
		size_t sh = (size_t)4 * 2 * KK * c.rb;                                                                 \
		CK(cudaFuncSetAttribute(k_bulk<KK, ST>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh));        \
		snprintf(grid, sizeof grid, "%dSMx128", sms);                                                          \
		char nm[32];                                                                                           \
		snprintf(nm, sizeof nm, "%s/K%d", NAME, KK);                                                           \
		ms = time_it(c, [&] { k_bulk<KK, ST><<<sms, 128, sh>>>(c.dtable, c.rb, c.drows, c.n, c.dst); });       \
		report(c, nm, grid, ms, check(c, false));                                                              \
	}
			BULK(4, false, "bulk");
			BULK(8, true, "bulk-st");
		}
	}
	CK(cudaFree(c.drows));
	CK(cudaFree(c.dseq));
	CK(cudaFree(c.dst));
	if (kind == 'c') {
		CK(cudaFreeHost(c.table));
	} else if (vmm) {
		// the probe exits soon: the mapping and its handle are left to process exit
	} else {
		CK(cudaHostUnregister(c.table));
		munmap(c.table, bytes); // the aligned part (the probe exits soon; the head is leaked)
	}
}

int main(int argc, char **argv) {
	// zcread [row_bytes] [batch_rows] [reps] [bulk|nobulk] TABLE... (TABLE: GiB and kind, e.g. 16h 56n 16c)
	if (argc < 6) {
		fprintf(stderr, "usage: zcread row_bytes batch_rows reps bulk|nobulk TABLE...\n");
		return 2;
	}
	int64_t rb = atoll(argv[1]), n = atoll(argv[2]);
	int reps = atoi(argv[3]);
	bool bulk = strcmp(argv[4], "bulk") == 0;
	const char *loop = strncmp(argv[4], "loop-", 5) == 0 ? argv[4] : nullptr;
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0));
	CK(cudaFree(0)); // the primary context, current for the driver calls
	printf("device %s, %d SMs\n", p.name, p.multiProcessorCount);
	for (int i = 5; i < argc; i++) run_table(argv[i], rb, n, reps, bulk, p, loop);
	return 0;
}
