// gnnloader gather kernels. Built by scripts/build-kernels.sh into gather.fatbin
// (sm_80 and sm_90 code plus compute_90 PTX); the Go side (gather/cuda.go)
// loads that image with cuModuleLoadData and launches the extern "C" entry
// points below.
//
// The table lives in pinned host memory mapped into the device (zero-copy), so
// every table read crosses PCIe. Rules the kernels keep:
//   - rows are taken in the order given (ascending address when the caller
//     passes them sorted), consecutive rows on consecutive lane groups, so the
//     reads stream through host memory;
//   - reads are 16 bytes wide. A row whose size is a multiple of 16 is read
//     with 16-byte loads from its start; any other row is read as the aligned
//     16-byte chunks that cover it, the warp's loads starting on the row's
//     first 128-byte line (mode 1: whole 128-byte lines);
//   - grids are persistent: a grid-stride loop over rows, so the caller may
//     cap the grid to a few SMs and leave the rest to training.
// Indices are compact, since they cross PCIe too: row ids uint32 (the Go side
// checks the table has at most 2^32 rows), positions int32.
#include <stdint.h>
#include <type_traits>

#define GNN_WARP 32
#define MAX_PARTS 32
#define PART_SHIFT 26 // a sweep delivery is part << 26 | position
#define SHARED_ROW 0x80000000u // in first[u]: the row's deliveries are in extras

// The destinations of a sweep's parts, passed by value.
struct Bases {
	uint64_t p[MAX_PARTS];
};

// Load 16 bytes from host-mapped memory: read-only, not kept in L1.
__device__ __forceinline__ uint4 ld16(const uint8_t *p) {
	uint4 v;
	asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
	             : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
	             : "l"(p));
	return v;
}

__device__ __forceinline__ void st16(uint8_t *p, uint4 v) {
	*reinterpret_cast<uint4 *>(p) = v;
}

// ---------------------------------------------------------------------------
// Rows whose size is a multiple of 16 (table and dst 16-byte aligned). A group
// of G = 1 << gshift lanes copies one row (G <= 32); each lane moves up to
// UNROLL chunks per step, loads first, then stores.
#define UNROLL 4

// load_chunks reads this lane's chunks c0 + lane + u*G (u < UNROLL) of a row
// of `chunks` 16-byte chunks at src; store_chunks writes them to out.
__device__ __forceinline__ void load_chunks(uint4 (&v)[UNROLL], const uint8_t *src, int64_t c0, int lane, int G,
                                            int64_t chunks) {
#pragma unroll
	for (int u = 0; u < UNROLL; u++) {
		int64_t c = c0 + lane + (int64_t)u * G;
		if (c < chunks) v[u] = ld16(src + (c << 4));
	}
}

__device__ __forceinline__ void store_chunks(const uint4 (&v)[UNROLL], uint8_t *out, int64_t c0, int lane, int G,
                                             int64_t chunks) {
#pragma unroll
	for (int u = 0; u < UNROLL; u++) {
		int64_t c = c0 + lane + (int64_t)u * G;
		if (c < chunks) st16(out + (c << 4), v[u]);
	}
}

// gnn_gather16: for k < n, dst row (pos ? pos[k] : k) = table row rows[k].
// With rows sorted ascending (and pos the permutation), reads go in address
// order. When n_dev is not null the count is *n_dev (written by earlier work
// on the stream, e.g. plan.cu's gnn_scan_blocks) and n is its capacity.
extern "C" __global__ void __launch_bounds__(1024)
gnn_gather16(const uint8_t *__restrict__ table, int64_t row_bytes,
             const uint32_t *__restrict__ rows, const int32_t *__restrict__ pos, int64_t n,
             const uint32_t *__restrict__ n_dev, uint8_t *__restrict__ dst, int gshift) {
	if (n_dev && (int64_t)*n_dev < n) n = *n_dev;
	const int G = 1 << gshift;
	const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const int lane = (int)(tid & (G - 1));
	const int64_t ngroups = ((int64_t)gridDim.x * blockDim.x) >> gshift;
	const int64_t chunks = row_bytes >> 4;
	for (int64_t k = tid >> gshift; k < n; k += ngroups) {
		const uint8_t *src = table + (int64_t)rows[k] * row_bytes;
		uint8_t *out = dst + (pos ? (int64_t)pos[k] : k) * row_bytes;
		for (int64_t c0 = 0; c0 < chunks; c0 += (int64_t)G * UNROLL) {
			uint4 v[UNROLL];
			load_chunks(v, src, c0, lane, G, chunks);
			store_chunks(v, out, c0, lane, G, chunks);
		}
	}
}

// A sweep's deliveries, compact since they cross PCIe too: first[u] is row
// rows[u]'s only delivery (part << PART_SHIFT | position) or, for a row shared
// by several batches, SHARED_ROW | i, where extras[i] is the number of its
// deliveries and extras[i+1 ..] are they.
__device__ __forceinline__ uint8_t *delivery(const Bases &bases, uint32_t e, int64_t row_bytes) {
	return reinterpret_cast<uint8_t *>(bases.p[e >> PART_SHIFT]) + (int64_t)(e & ((1u << PART_SHIFT) - 1)) * row_bytes;
}

// deliveries returns the list of a row's deliveries and sets nd to its
// length: f itself (the row's first[u], in the caller's variable) or its
// list in extras.
__device__ __forceinline__ const uint32_t *deliveries(const uint32_t &f, const uint32_t *extras, uint32_t &nd) {
	if (f & SHARED_ROW) {
		const uint32_t *dl = extras + (f & ~SHARED_ROW);
		nd = dl[0];
		return dl + 1;
	}
	nd = 1;
	return &f;
}

// gnn_sweep16: one pass over sorted unique rows; row rows[u] is read once and
// written to each of its deliveries. When n_dev is not null the count is
// *n_dev (a sweep planned on the GPU) and n is its capacity.
extern "C" __global__ void __launch_bounds__(1024)
gnn_sweep16(const uint8_t *__restrict__ table, int64_t row_bytes,
            const uint32_t *__restrict__ rows, int64_t n, const uint32_t *__restrict__ n_dev,
            const uint32_t *__restrict__ first, const uint32_t *__restrict__ extras, Bases bases, int gshift) {
	if (n_dev && (int64_t)*n_dev < n) n = *n_dev;
	const int G = 1 << gshift;
	const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const int lane = (int)(tid & (G - 1));
	const int64_t ngroups = ((int64_t)gridDim.x * blockDim.x) >> gshift;
	const int64_t chunks = row_bytes >> 4;
	for (int64_t u = tid >> gshift; u < n; u += ngroups) {
		const uint8_t *src = table + (int64_t)rows[u] * row_bytes;
		const uint32_t f = first[u];
		uint32_t nd;
		const uint32_t *dl = deliveries(f, extras, nd);
		for (int64_t c0 = 0; c0 < chunks; c0 += (int64_t)G * UNROLL) {
			uint4 v[UNROLL];
			load_chunks(v, src, c0, lane, G, chunks);
			for (uint32_t d = 0; d < nd; d++)
				store_chunks(v, delivery(bases, dl[d], row_bytes), c0, lane, G, chunks);
		}
	}
}

// ---------------------------------------------------------------------------
// Any row size. One warp per row. The row's bytes [s, e) are read as 16-byte
// chunks of [s & ~127, e) (mode 0: only the chunks that overlap the row, so no
// sector the row does not touch is read; mode 1: every chunk of the 128-byte
// lines the row touches), in pieces of 512 bytes staged in shared memory
// (dynamic: PIECE bytes a warp), then written with W-byte stores (W = the
// largest power of two <= 8 dividing row_bytes and the destination bases).
// The table must be readable up to the next 128-byte boundary past its end
// (pinned memory is: it is rounded up to 2 MiB).
#define PIECE 512

template <int W>
__device__ __forceinline__ void emit(const uint8_t *buf, int64_t lo, int64_t hi, int64_t piece0, int64_t s,
                                     uint8_t *dst, int lane) {
	typedef typename std::conditional<W == 8, uint64_t,
	        typename std::conditional<W == 4, uint32_t,
	        typename std::conditional<W == 2, uint16_t, uint8_t>::type>::type>::type T;
	for (int64_t a = lo + (int64_t)lane * W; a < hi; a += GNN_WARP * W)
		*reinterpret_cast<T *>(dst + (a - s)) = *reinterpret_cast<const T *>(buf + (a - piece0));
}

// copy_row_any writes the row to dst0 or, when dst0 is null (a sweep), to
// the destinations of deliveries dl[0 .. nd).
__device__ __forceinline__ void copy_row_any(const uint8_t *__restrict__ table, int64_t row, int64_t row_bytes,
                                             uint8_t *buf, int lane, int wshift, int mode, uint8_t *dst0,
                                             const uint32_t *dl, uint32_t nd, const Bases *bases) {
	const int64_t s = row * row_bytes, e = s + row_bytes;
	const int64_t a0 = s & ~(int64_t)127;
	const int64_t first = mode ? a0 : (s & ~(int64_t)15);
	const int64_t end = mode ? ((e + 127) & ~(int64_t)127) : e;
	for (int64_t p0 = a0; p0 < e; p0 += PIECE) {
		const int64_t c = p0 + (int64_t)lane * 16;
		if (c >= first && c < end) *reinterpret_cast<uint4 *>(buf + lane * 16) = ld16(table + c);
		__syncwarp();
		const int64_t lo = p0 > s ? p0 : s, hi = (p0 + PIECE) < e ? (p0 + PIECE) : e;
		for (uint32_t j = 0; j < (dst0 ? 1 : nd); j++) {
			uint8_t *out = dst0 ? dst0 : delivery(*bases, dl[j], row_bytes);
			switch (wshift) {
			case 3: emit<8>(buf, lo, hi, p0, s, out, lane); break;
			case 2: emit<4>(buf, lo, hi, p0, s, out, lane); break;
			case 1: emit<2>(buf, lo, hi, p0, s, out, lane); break;
			default: emit<1>(buf, lo, hi, p0, s, out, lane); break;
			}
		}
		__syncwarp();
	}
}

extern "C" __global__ void __launch_bounds__(1024)
gnn_gather_any(const uint8_t *__restrict__ table, int64_t row_bytes,
               const uint32_t *__restrict__ rows, const int32_t *__restrict__ pos, int64_t n,
               const uint32_t *__restrict__ n_dev, uint8_t *__restrict__ dst, int wshift, int mode) {
	if (n_dev && (int64_t)*n_dev < n) n = *n_dev;
	extern __shared__ __align__(16) uint8_t sbuf[];
	const int warp = threadIdx.x / GNN_WARP, lane = threadIdx.x % GNN_WARP;
	const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x / GNN_WARP);
	for (int64_t k = (int64_t)blockIdx.x * (blockDim.x / GNN_WARP) + warp; k < n; k += nwarps) {
		uint8_t *out = dst + (pos ? (int64_t)pos[k] : k) * row_bytes;
		copy_row_any(table, rows[k], row_bytes, sbuf + warp * PIECE, lane, wshift, mode, out, nullptr, 0, nullptr);
	}
}

extern "C" __global__ void __launch_bounds__(1024)
gnn_sweep_any(const uint8_t *__restrict__ table, int64_t row_bytes,
              const uint32_t *__restrict__ rows, int64_t n, const uint32_t *__restrict__ n_dev,
              const uint32_t *__restrict__ first, const uint32_t *__restrict__ extras, Bases bases, int wshift,
              int mode) {
	extern __shared__ __align__(16) uint8_t sbuf[];
	if (n_dev && (int64_t)*n_dev < n) n = *n_dev;
	const int warp = threadIdx.x / GNN_WARP, lane = threadIdx.x % GNN_WARP;
	const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x / GNN_WARP);
	for (int64_t u = (int64_t)blockIdx.x * (blockDim.x / GNN_WARP) + warp; u < n; u += nwarps) {
		const uint32_t f = first[u];
		uint32_t nd;
		const uint32_t *dl = deliveries(f, extras, nd);
		copy_row_any(table, rows[u], row_bytes, sbuf + warp * PIECE, lane, wshift, mode, nullptr, dl, nd, &bases);
	}
}
