// Ring all-reduce kernels for gnnloader (ring/): one persistent kernel per GPU
// and operation, all GPUs of the ring in one process (loaderd).
//
// The buffer of n elements is split into R chunks (R = ranks) of `chunk`
// elements (the last ones shorter or empty). Each chunk is cut into pieces of
// `piece` elements; block b of every rank owns pieces b, b+G, b+2G, ... of every
// chunk (one "round" per G pieces). For each round a block runs the ring's
// 2(R-1) steps on its pieces, pulling from the previous rank:
//   reduce-scatter step s (0..R-2): chunk c = (rank-1-s) mod R,
//       own[c] = dtype(float(src[c]) + float(own[c]))   (divided by R at the last
//       step for an average), src = the previous rank's buffer;
//   all-gather step t (0..R-2): chunk c = (rank-t) mod R, own[c] = src[c].
// So chunk c is reduced in the fixed order x_c, +x_{c+1}, ..., +x_{c-1}, rounded
// to the dtype after every addition; every rank ends with the same bytes.
//
// Ranks synchronise through 64-bit flags, one per block: flag = base+1 once the
// block has entered (its rank's input is ready), base+2+k after its k-th step.
// Step k waits for the previous rank's flag >= base+1+k; at the end a block
// waits until the next rank has finished (it reads our buffer until then), so
// a completed kernel means the buffer is free again. `base` grows by 2^32 per
// operation, so stale flags from earlier operations are always smaller.
//
// (That is the pull variant, gnn_ring_*; the push variant, gnn_ringp_*, is below.)
// src may be the previous rank's device buffer (peer access) or a mapped
// pinned host mirror that the previous rank writes through (`mirror` != 0 on
// that rank): the path for GPUs without peer access. Flags may live in mapped
// host memory for the same reason.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define RING_THREADS 512
#define RING_UNROLL 4

struct F32 {
	typedef float T;
	static __device__ __forceinline__ float load(T v) { return v; }
	static __device__ __forceinline__ T store(float v) { return v; }
};
struct F16 {
	typedef __half T;
	static __device__ __forceinline__ float load(T v) { return __half2float(v); }
	static __device__ __forceinline__ T store(float v) { return __float2half_rn(v); }
};
struct BF16 {
	typedef __nv_bfloat16 T;
	static __device__ __forceinline__ float load(T v) { return __bfloat162float(v); }
	static __device__ __forceinline__ T store(float v) { return __float2bfloat16_rn(v); }
};

static __device__ __forceinline__ unsigned long long ld_acquire(const unsigned long long *p) {
	unsigned long long v;
	asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

static __device__ __forceinline__ void st_release(unsigned long long *p, unsigned long long v) {
	asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

static __device__ __forceinline__ unsigned long long globaltimer() {
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// wait_flag: thread 0 spins until *f >= want (10 s at most: then the kernel
// traps, so a broken ring fails instead of hanging the GPU); then the block.
static __device__ __forceinline__ void wait_flag(const unsigned long long *f, unsigned long long want) {
	if (threadIdx.x == 0) {
		if (ld_acquire(f) < want) {
			unsigned long long t0 = globaltimer();
			while (ld_acquire(f) < want) {
				if (globaltimer() - t0 > 10000000000ull) {
					__trap();
				}
			}
		}
	}
	__syncthreads();
}

static __device__ __forceinline__ void set_flag(unsigned long long *f, unsigned long long v) {
	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence_system();
		st_release(f, v);
	}
}

// One step over elements [lo, hi): out = a (mode 0), dtype(float(a) + float(b))
// (mode 1), or that sum divided by `div` (mode 2); out is written to d1 and,
// when d2 != 0, to d2. Every load bypasses L1 (ld.global.cg): within one kernel
// the same addresses are written by another GPU between two reads.
template <typename D>
static __device__ __forceinline__ void step_range(const typename D::T *a, const typename D::T *b, typename D::T *d1,
                                                  typename D::T *d2, long long lo, long long hi, int mode, float div) {
	typedef typename D::T T;
	const int per = 16 / sizeof(T); // elements per 16-byte vector
	// lo is a multiple of `per` (chunks and pieces are); hi may not be.
	long long nvec = (hi - lo) / per;
	const int4 *a4 = reinterpret_cast<const int4 *>(a + lo);
	const int4 *b4 = reinterpret_cast<const int4 *>(b + lo);
	int4 *o4 = reinterpret_cast<int4 *>(d1 + lo);
	int4 *m4 = d2 ? reinterpret_cast<int4 *>(d2 + lo) : nullptr;
	const long long stride = (long long)RING_THREADS * RING_UNROLL;
	for (long long base = 0; base < nvec; base += stride) {
		int4 x4[RING_UNROLL], y4[RING_UNROLL];
#pragma unroll
		for (int u = 0; u < RING_UNROLL; u++) {
			long long i = base + u * RING_THREADS + threadIdx.x;
			if (i < nvec) {
				x4[u] = __ldcg(a4 + i);
				if (mode != 0) {
					y4[u] = __ldcg(b4 + i);
				}
			}
		}
#pragma unroll
		for (int u = 0; u < RING_UNROLL; u++) {
			long long i = base + u * RING_THREADS + threadIdx.x;
			if (i < nvec) {
				int4 r = x4[u];
				if (mode != 0) {
					const T *x = reinterpret_cast<const T *>(&x4[u]);
					const T *y = reinterpret_cast<const T *>(&y4[u]);
					T *z = reinterpret_cast<T *>(&r);
#pragma unroll
					for (int k = 0; k < per; k++) {
						float v = D::load(x[k]) + D::load(y[k]);
						if (mode == 2) {
							v = v / div;
						}
						z[k] = D::store(v);
					}
				}
				o4[i] = r;
				if (m4) {
					m4[i] = r;
				}
			}
		}
	}
	// The tail (fewer than `per` elements at the very end of the buffer).
	long long t = lo + nvec * per + threadIdx.x;
	if (t < hi) {
		T r = __ldcg(a + t);
		if (mode != 0) {
			float v = D::load(r) + D::load(__ldcg(b + t));
			if (mode == 2) {
				v = v / div;
			}
			r = D::store(v);
		}
		d1[t] = r;
		if (d2) {
			d2[t] = r;
		}
	}
}

template <typename D>
static __device__ void ring_body(typename D::T *own, const typename D::T *src, typename D::T *mirror,
                                 unsigned long long *myflags, const unsigned long long *prevflags,
                                 const unsigned long long *nextflags, long long n, long long chunk, long long piece,
                                 int rank, int ranks, unsigned long long base, int avg, int rounds) {
	const int b = blockIdx.x, G = gridDim.x;
	const int S = 2 * (ranks - 1);
	if (mirror) {
		// The next rank reads our original chunk `rank` at its step 0: put
		// our pieces of it in the mirror first.
		for (int r = 0; r < rounds; r++) {
			long long lo = (long long)rank * chunk + ((long long)r * G + b) * piece;
			long long cend = min(n, (long long)(rank + 1) * chunk);
			long long hi = min(lo + piece, cend);
			if (lo < hi) {
				for (long long i = lo + threadIdx.x; i < hi; i += RING_THREADS) {
					mirror[i] = own[i];
				}
			}
		}
	}
	set_flag(&myflags[b], base + 1);
	for (int r = 0; r < rounds; r++) {
		for (int s = 0; s < S; s++) {
			int k = r * S + s;
			int c;
			int mode;
			if (s < ranks - 1) {
				c = ((rank - 1 - s) % ranks + ranks) % ranks;
				mode = (s == ranks - 2 && avg) ? 2 : 1;
			} else {
				c = ((rank - (s - (ranks - 1))) % ranks + ranks) % ranks;
				mode = 0;
			}
			wait_flag(&prevflags[b], base + 1 + k);
			long long lo = (long long)c * chunk + ((long long)r * G + b) * piece;
			long long cend = min(n, (long long)(c + 1) * chunk);
			long long hi = min(lo + piece, cend);
			if (lo < hi) {
				step_range<D>(src, own, own, mirror, lo, hi, mode, (float)ranks);
			}
			set_flag(&myflags[b], base + 2 + k);
		}
	}
	// The next rank reads our buffer until its last step.
	wait_flag(&nextflags[b], base + 1 + (unsigned long long)rounds * S);
}

#define RING_KERNEL(name, D)                                                                                         \
	extern "C" __global__ void __launch_bounds__(RING_THREADS)                                                         \
	    name(D::T *own, const D::T *src, D::T *mirror, unsigned long long *myflags,                                   \
	         const unsigned long long *prevflags, const unsigned long long *nextflags, long long n, long long chunk,   \
	         long long piece, int rank, int ranks, unsigned long long base, int avg, int rounds) {                    \
		ring_body<D>(own, src, mirror, myflags, prevflags, nextflags, n, chunk, piece, rank, ranks, base, avg,     \
		             rounds);                                                                                      \
	}

RING_KERNEL(gnn_ring_f32, F32)
RING_KERNEL(gnn_ring_f16, F16)
RING_KERNEL(gnn_ring_bf16, BF16)

// The push variant (every neighbour reachable with peer access): all reads are
// local and the NVLink traffic is stores. Per round a block runs 2(R-1) steps:
//   step 0: copy own[rank] into the next rank's staging (its input for chunk rank);
//   steps 1..R-1 (reduce-scatter): chunk c = (rank-s) mod R,
//       v = dtype(float(stage[c]) + float(own[c])), to the next rank's staging,
//       or, at step R-1 (v divided by R for an average), to own[c] and the
//       next rank's own[c] (the first all-gather hop);
//   steps R..2R-3 (all-gather): chunk c = (rank-(s-R)) mod R, own[c] to the
//       next rank's own[c].
// The additions are the pull ring's, in the same order. Step k waits for the
// previous rank's step k-1 (it wrote what step k reads); at the end a block
// waits for the previous rank (the last of our data has arrived) and the next
// one (it no longer reads the staging we wrote).
template <typename D>
static __device__ void ring_push_body(typename D::T *own, typename D::T *nextown, const typename D::T *stage,
                                      typename D::T *nextstage, unsigned long long *myflags,
                                      const unsigned long long *prevflags, const unsigned long long *nextflags,
                                      long long n, long long chunk, long long piece, int rank, int ranks,
                                      unsigned long long base, int avg, int rounds) {
	const int b = blockIdx.x, G = gridDim.x;
	const int S = 2 * (ranks - 1);
	set_flag(&myflags[b], base + 1);
	for (int r = 0; r < rounds; r++) {
		for (int s = 0; s < S; s++) {
			int k = r * S + s;
			int c;
			if (s == 0) {
				c = rank;
			} else if (s < ranks) {
				c = ((rank - s) % ranks + ranks) % ranks;
			} else {
				c = ((rank - (s - ranks)) % ranks + ranks) % ranks;
			}
			if (s > 0) {
				wait_flag(&prevflags[b], base + 1 + k);
			}
			long long lo = (long long)c * chunk + ((long long)r * G + b) * piece;
			long long cend = min(n, (long long)(c + 1) * chunk);
			long long hi = min(lo + piece, cend);
			if (lo < hi) {
				if (s == 0) {
					step_range<D>(own, nullptr, nextstage, nullptr, lo, hi, 0, 1.f);
				} else if (s < ranks - 1) {
					step_range<D>(stage, own, nextstage, nullptr, lo, hi, 1, 1.f);
				} else if (s == ranks - 1) {
					step_range<D>(stage, own, own, nextown, lo, hi, avg ? 2 : 1, (float)ranks);
				} else {
					step_range<D>(own, nullptr, nextown, nullptr, lo, hi, 0, 1.f);
				}
			}
			__threadfence_system(); // every thread: its remote stores before the flag
			set_flag(&myflags[b], base + 2 + k);
		}
	}
	unsigned long long fin = base + 1 + (unsigned long long)rounds * S;
	wait_flag(&prevflags[b], fin);
	wait_flag(&nextflags[b], fin);
}

#define RING_PUSH_KERNEL(name, D)                                                                                    \
	extern "C" __global__ void __launch_bounds__(RING_THREADS)                                                         \
	    name(D::T *own, D::T *nextown, const D::T *stage, D::T *nextstage, unsigned long long *myflags,               \
	         const unsigned long long *prevflags, const unsigned long long *nextflags, long long n, long long chunk,   \
	         long long piece, int rank, int ranks, unsigned long long base, int avg, int rounds) {                    \
		ring_push_body<D>(own, nextown, stage, nextstage, myflags, prevflags, nextflags, n, chunk, piece, rank,     \
		                  ranks, base, avg, rounds);                                                               \
	}

RING_PUSH_KERNEL(gnn_ringp_f32, F32)
RING_PUSH_KERNEL(gnn_ringp_f16, F16)
RING_PUSH_KERNEL(gnn_ringp_bf16, BF16)
