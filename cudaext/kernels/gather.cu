// gnnloader gather kernels. Built by scripts/build-kernels.sh into gather.fatbin
// (sm_80 and sm_90 code plus compute_90 PTX); the Go side loads that image
// with cuModuleLoadData and launches the extern "C" entry points below.
//
// The table lives in pinned host memory mapped into the device (zero-copy), so
// every table read crosses PCIe. Rules the kernels keep:
//   - rows are taken in the order given (ascending address when the caller
//     passes the sorting permutation), consecutive rows on consecutive lane
//     groups, so the reads stream through host memory;
//   - reads are 16 bytes wide; a row whose size is not a multiple of 16 is read
//     as the aligned 16-byte chunks that cover it, starting at its 128-byte line,
//     so no row costs a partial or extra line beyond the ones it touches;
//   - grids are persistent-style: a grid-stride loop over rows, so the caller
//     may cap the grid to a few SMs and leave the rest to training.
// Arguments: table is the device address of row 0; row_bytes the row size;
// dst rows are row_bytes apart. Row ids are int64; positions int32.
#include <stdint.h>
#include <type_traits>

#define GNN_WARP 32

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
// Aligned rows (row_bytes % 16 == 0, table and dst 16-byte aligned).
// A group of G = 1 << gshift lanes copies one row; G <= 32. Each lane moves up
// to UNROLL chunks per step, loads first, then stores.
#define UNROLL 4

__device__ __forceinline__ void copy_row16(const uint8_t *__restrict__ src, uint8_t *__restrict__ dst,
                                           int64_t row_bytes, int lane, int G) {
	const int64_t chunks = row_bytes >> 4;
	for (int64_t c0 = 0; c0 < chunks; c0 += (int64_t)G * UNROLL) {
		uint4 v[UNROLL];
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			int64_t c = c0 + lane + (int64_t)u * G;
			if (c < chunks) v[u] = ld16(src + (c << 4));
		}
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			int64_t c = c0 + lane + (int64_t)u * G;
			if (c < chunks) st16(dst + (c << 4), v[u]);
		}
	}
}

// gnn_gather16: dst row order[k] (or k when order is NULL) = table row nid[that].
// With order the sorting permutation, rows are read in ascending address order.
extern "C" __global__ void __launch_bounds__(1024)
gnn_gather16(const uint8_t *__restrict__ table, int64_t row_bytes,
             const int64_t *__restrict__ nid, const int32_t *__restrict__ order, int64_t n,
             uint8_t *__restrict__ dst, int gshift) {
	const int G = 1 << gshift;
	const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const int lane = (int)(tid & (G - 1));
	const int64_t ngroups = ((int64_t)gridDim.x * blockDim.x) >> gshift;
	for (int64_t k = tid >> gshift; k < n; k += ngroups) {
		const int64_t pos = order ? (int64_t)order[k] : k;
		const int64_t row = nid[pos];
		copy_row16(table + row * row_bytes, dst + pos * row_bytes, row_bytes, lane, G);
	}
}

// gnn_sweep16: one pass over sorted unique rows; row u is read once and
// written to every destination address dsts[offs[u]] .. dsts[offs[u+1]-1].
extern "C" __global__ void __launch_bounds__(1024)
gnn_sweep16(const uint8_t *__restrict__ table, int64_t row_bytes,
            const int64_t *__restrict__ rows, int64_t n, const int64_t *__restrict__ offs,
            const uint64_t *__restrict__ dsts, int gshift) {
	const int G = 1 << gshift;
	const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const int lane = (int)(tid & (G - 1));
	const int64_t ngroups = ((int64_t)gridDim.x * blockDim.x) >> gshift;
	const int64_t chunks = row_bytes >> 4;
	for (int64_t u = tid >> gshift; u < n; u += ngroups) {
		const uint8_t *src = table + rows[u] * row_bytes;
		const int64_t d0 = offs[u], d1 = offs[u + 1];
		for (int64_t c0 = 0; c0 < chunks; c0 += (int64_t)G * UNROLL) {
			uint4 v[UNROLL];
#pragma unroll
			for (int q = 0; q < UNROLL; q++) {
				int64_t c = c0 + lane + (int64_t)q * G;
				if (c < chunks) v[q] = ld16(src + (c << 4));
			}
			for (int64_t d = d0; d < d1; d++) {
				uint8_t *out = reinterpret_cast<uint8_t *>(dsts[d]);
#pragma unroll
				for (int q = 0; q < UNROLL; q++) {
					int64_t c = c0 + lane + (int64_t)q * G;
					if (c < chunks) st16(out + (c << 4), v[q]);
				}
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Any row size. One warp per row. The row's bytes [s, e) are read as the
// 16-byte chunks of [s & ~127, e) that overlap it (so reads start on the row's
// first 128-byte line and never read a sector the row does not touch), in
// pieces of 512 bytes staged in shared memory (dynamic: PIECE bytes a warp), then written with W-byte stores
// (W = the largest power of two <= 8 dividing row_bytes and the dst bases).
// The table must be readable up to the next 16-byte boundary past its end
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

__device__ __forceinline__ void copy_row_any(const uint8_t *__restrict__ table, int64_t row, int64_t row_bytes,
                                             uint8_t *buf, int lane, int wshift,
                                             uint8_t *const *dsts, int ndst) {
	const int64_t s = row * row_bytes, e = s + row_bytes;
	const int64_t a0 = s & ~(int64_t)127;
	const int64_t first = s & ~(int64_t)15; // first chunk that overlaps the row
	for (int64_t p0 = a0; p0 < e; p0 += PIECE) {
		const int64_t c = p0 + (int64_t)lane * 16;
		if (c >= first && c < e) *reinterpret_cast<uint4 *>(buf + lane * 16) = ld16(table + c);
		__syncwarp();
		const int64_t lo = p0 > s ? p0 : s, hi = (p0 + PIECE) < e ? (p0 + PIECE) : e;
		for (int d = 0; d < ndst; d++) {
			switch (wshift) {
			case 3: emit<8>(buf, lo, hi, p0, s, dsts[d], lane); break;
			case 2: emit<4>(buf, lo, hi, p0, s, dsts[d], lane); break;
			case 1: emit<2>(buf, lo, hi, p0, s, dsts[d], lane); break;
			default: emit<1>(buf, lo, hi, p0, s, dsts[d], lane); break;
			}
		}
		__syncwarp();
	}
}

extern "C" __global__ void __launch_bounds__(1024)
gnn_gather_any(const uint8_t *__restrict__ table, int64_t row_bytes,
               const int64_t *__restrict__ nid, const int32_t *__restrict__ order, int64_t n,
               uint8_t *__restrict__ dst, int wshift) {
	extern __shared__ __align__(16) uint8_t sbuf[]; // PIECE bytes per warp
	const int warp = threadIdx.x / GNN_WARP, lane = threadIdx.x % GNN_WARP;
	const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x / GNN_WARP);
	for (int64_t k = (int64_t)blockIdx.x * (blockDim.x / GNN_WARP) + warp; k < n; k += nwarps) {
		const int64_t pos = order ? (int64_t)order[k] : k;
		uint8_t *out = dst + pos * row_bytes;
		copy_row_any(table, nid[pos], row_bytes, sbuf + warp * PIECE, lane, wshift, &out, 1);
	}
}

extern "C" __global__ void __launch_bounds__(1024)
gnn_sweep_any(const uint8_t *__restrict__ table, int64_t row_bytes,
              const int64_t *__restrict__ rows, int64_t n, const int64_t *__restrict__ offs,
              const uint64_t *__restrict__ dsts, int wshift) {
	extern __shared__ __align__(16) uint8_t sbuf[]; // PIECE bytes per warp
	const int warp = threadIdx.x / GNN_WARP, lane = threadIdx.x % GNN_WARP;
	const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x / GNN_WARP);
	for (int64_t u = (int64_t)blockIdx.x * (blockDim.x / GNN_WARP) + warp; u < n; u += nwarps) {
		const int64_t d0 = offs[u], d1 = offs[u + 1];
		// Destinations in batches of 8 per read of the row; a row with more
		// destinations than that is read again for each further 8.
		for (int64_t d = d0; d < d1; d += 8) {
			uint8_t *outs[8];
			const int m = (int)((d1 - d) < 8 ? (d1 - d) : 8);
#pragma unroll
			for (int j = 0; j < 8; j++) outs[j] = j < m ? reinterpret_cast<uint8_t *>(dsts[d + j]) : nullptr;
			copy_row_any(table, rows[u], row_bytes, sbuf + warp * PIECE, lane, wshift, outs, m);
		}
	}
}
