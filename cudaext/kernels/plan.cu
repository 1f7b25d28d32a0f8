// gnnloader sweep-planning kernels: the GPU plans a sweep over several
// batches itself, from the batches' node ids already in their slots, so the
// CPU neither sorts nor merges them. Built by scripts/build-kernels.sh into
// plan.fatbin; gather/plan.go launches them, in this order, on the trainer's
// fill stream. The kernels that visit ids take every batch of the sweep in
// one launch (Parts, by value: up to MAX_PARTS batches walked as one range),
// not one launch a batch: a sweep of 16 batches is a dozen launches, not 80.
//
//   gnn_mark        set bit id of a bitmap over the table's rows for every id
//                   of the batches (rows held in a device cache are skipped)
//   gnn_word_counts per block of 1024 bitmap words, the number of set bits
//   gnn_scan_blocks exclusive prefix of the block counts (one block), and the
//                   number of distinct rows
//   gnn_compact     the distinct rows in ascending order (rows[]), and per
//                   bitmap word the rank of its first set bit (word_base[]):
//                   rank(id) = word_base[id>>5] + popc(word & below(id))
//   gnn_count_deliveries  per id not in the cache, one more
//                   delivery of its row: cnt[rank(id)]++
//   gnn_place_deliveries  per distinct row: a row with one delivery keeps it
//                   in first[rank]; a shared row gets a list in extras
//                   (first[rank] = SHARED_ROW | offset, extras[offset] = its
//                   count), cnt[rank] reset to 0 as the list's cursor
//   gnn_deliver     per id not in the cache, its delivery
//                   (part << PART_SHIFT | position) into first[] or its list
//   (gather.cu's gnn_sweep16 / gnn_sweep_any then read rows[] once each from
//   pinned host memory, in address order, straight to every delivery)
//   gnn_assemble    per id, its row from the cache into the
//                   batch's x, and its label into y
//   gnn_unmark      clear the bitmap words the sweep set
//
// Every kernel is a grid-stride loop; counts a kernel cannot know from its
// launch (how many distinct rows) are read from device memory.
#include <stdint.h>

#define WORDS_PER_BLOCK 1024 // bitmap words one block of gnn_word_counts / gnn_compact covers
#define SCAN_THREADS 1024

// count returns a part's number of ids: *n_dev when given (a batch sampled
// on the GPU: its node count, written by earlier work on the stream), else n.
__device__ __forceinline__ int64_t count(int64_t n, const int64_t *n_dev) {
	if (!n_dev) return n;
	int64_t c = *n_dev;
	return c < 0 ? 0 : (c < n ? c : n);
}

__device__ __forceinline__ uint32_t below_mask(uint32_t bit) { return bit ? (0xffffffffu >> (32 - bit)) : 0u; }

#define MAX_PARTS 32 // gather.MaxSweepParts (gather.cu MAX_PARTS)

// Parts is one value per batch of a sweep (its ids, its count, where its
// count is on the device, its x, its y), passed by value.
struct Parts {
	uint64_t p[MAX_PARTS];
};

// pick is a.p[k] read with constant indices only: indexing a kernel
// parameter with a variable makes every thread copy the whole array to its
// stack first (ptxas reported 384-640 bytes of stack a thread).
__device__ __forceinline__ uint64_t pick(const Parts &a, int k) {
	uint64_t v = 0;
#pragma unroll
	for (int i = 0; i < MAX_PARTS; i++)
		if (i == k) v = a.p[i];
	return v;
}

// PartTable is a sweep's parts as a block sees them, in shared memory: part
// j's ids are the sweep's flat indices [start[j], start[j+1]).
struct PartTable {
	int64_t start[MAX_PARTS + 1];
	const int64_t *ids[MAX_PARTS];
};

// part_table fills t (the counts from n and n_dev, as count). Every thread
// of the block calls it; blockDim.x >= np.
__device__ __forceinline__ void part_table(const Parts &ids, const Parts &n, const Parts &n_dev, int np, PartTable &t) {
	const int k = (int)threadIdx.x;
	if (k < np) {
		t.ids[k] = reinterpret_cast<const int64_t *>(pick(ids, k));
		t.start[k + 1] = count((int64_t)pick(n, k), reinterpret_cast<const int64_t *>(pick(n_dev, k)));
	}
	__syncthreads();
	if (k == 0) {
		t.start[0] = 0;
		for (int j = 0; j < np; j++) t.start[j + 1] += t.start[j];
	}
	__syncthreads();
}

// part_of returns the part of flat index i < t.start[np], searching on from
// part j (a thread's indices only grow, so each call moves j a little).
__device__ __forceinline__ int part_of(const PartTable &t, int np, int64_t i, int j) {
	while (j < np - 1 && i >= t.start[j + 1]) j++;
	return j;
}

// id_at is the id at flat index i, in part j.
__device__ __forceinline__ int64_t id_at(const PartTable &t, int j, int64_t i) { return t.ids[j][i - t.start[j]]; }

// Statistics the kernels keep in device memory (uint64 each): ids looked up,
// ids found in the cache, distinct rows read over PCIe.
#define STAT_LOOKUPS 0
#define STAT_HITS 1
#define STAT_READ 2

// gnn_mark: bitmap bit of every id of the batches (cached rows skipped);
// the lookups and cache hits are added to stats.
extern "C" __global__ void __launch_bounds__(1024)
gnn_mark(Parts ids, Parts n, Parts n_dev, int np, uint32_t *__restrict__ bitmap,
         const int32_t *__restrict__ cache_slot, unsigned long long *__restrict__ stats) {
	__shared__ PartTable t;
	__shared__ unsigned int hits, looked;
	if (threadIdx.x == 0) hits = looked = 0;
	part_table(ids, n, n_dev, np, t);
	const int64_t total = t.start[np];
	const int64_t stride = (int64_t)gridDim.x * blockDim.x;
	unsigned int h = 0, l = 0;
	int j = 0;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
		j = part_of(t, np, i, j);
		const int64_t id = id_at(t, j, i);
		l++;
		if (cache_slot && cache_slot[id] >= 0) {
			h++;
			continue;
		}
		const uint32_t bit = 1u << (id & 31);
		uint32_t *w = bitmap + (id >> 5);
		if (!(*w & bit)) atomicOr(w, bit);
	}
	if (l) atomicAdd(&looked, l);
	if (h) atomicAdd(&hits, h);
	__syncthreads();
	if (threadIdx.x == 0 && stats) {
		if (looked) atomicAdd(&stats[STAT_LOOKUPS], (unsigned long long)looked);
		if (hits) atomicAdd(&stats[STAT_HITS], (unsigned long long)hits);
	}
}

// gnn_unmark: clears the words of every id of the batches.
extern "C" __global__ void __launch_bounds__(1024)
gnn_unmark(Parts ids, Parts n, Parts n_dev, int np, uint32_t *__restrict__ bitmap) {
	__shared__ PartTable t;
	part_table(ids, n, n_dev, np, t);
	const int64_t total = t.start[np];
	const int64_t stride = (int64_t)gridDim.x * blockDim.x;
	int j = 0;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
		j = part_of(t, np, i, j);
		bitmap[id_at(t, j, i) >> 5] = 0;
	}
}

// block_scan returns the exclusive prefix of v over the block (blockDim.x a
// multiple of 32, at most 1024) and sets *total to the block's sum. tmp holds
// 32 words of shared memory. Every thread of the block must call it.
__device__ __forceinline__ uint32_t block_scan(uint32_t v, uint32_t *tmp, uint32_t *total) {
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
	uint32_t x = v; // inclusive scan within the warp
#pragma unroll
	for (int d = 1; d < 32; d <<= 1) {
		uint32_t y = __shfl_up_sync(0xffffffffu, x, d);
		if (lane >= d) x += y;
	}
	if (lane == 31) tmp[warp] = x;
	__syncthreads();
	if (warp == 0) {
		uint32_t s = lane < warps ? tmp[lane] : 0;
#pragma unroll
		for (int d = 1; d < 32; d <<= 1) {
			uint32_t y = __shfl_up_sync(0xffffffffu, s, d);
			if (lane >= d) s += y;
		}
		tmp[lane] = s; // inclusive prefix of the warp sums
	}
	__syncthreads();
	const uint32_t before = warp ? tmp[warp - 1] : 0;
	*total = tmp[warps - 1];
	__syncthreads(); // tmp may be reused by the caller's next scan
	return before + x - v;
}

// gnn_word_counts: block b counts the set bits of words
// [b*WORDS_PER_BLOCK, (b+1)*WORDS_PER_BLOCK) into block_sums[b]. Launched
// with blockDim.x = WORDS_PER_BLOCK / 4 (each thread four words) and one
// block per WORDS_PER_BLOCK words (no grid stride).
extern "C" __global__ void __launch_bounds__(256)
gnn_word_counts(const uint32_t *__restrict__ bitmap, int64_t words, uint32_t *__restrict__ block_sums) {
	__shared__ uint32_t tmp[32];
	const int64_t w0 = (int64_t)blockIdx.x * WORDS_PER_BLOCK + (int64_t)threadIdx.x * 4;
	uint32_t c = 0;
#pragma unroll
	for (int k = 0; k < 4; k++)
		if (w0 + k < words) c += __popc(bitmap[w0 + k]);
	uint32_t total;
	block_scan(c, tmp, &total);
	if (threadIdx.x == 0) block_sums[blockIdx.x] = total;
}

// gnn_scan_blocks: one block of SCAN_THREADS threads turns block_sums[0, nb)
// into their exclusive prefix, in place, and writes the sum to *unique (and
// adds it to the rows read over PCIe in stats).
extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
gnn_scan_blocks(uint32_t *__restrict__ block_sums, int64_t nb, uint32_t *__restrict__ unique,
                unsigned long long *__restrict__ stats) {
	__shared__ uint32_t tmp[32];
	const int64_t per = (nb + SCAN_THREADS - 1) / SCAN_THREADS;
	const int64_t lo = (int64_t)threadIdx.x * per, hi = lo + per < nb ? lo + per : nb;
	uint32_t mine = 0;
	for (int64_t i = lo; i < hi; i++) mine += block_sums[i];
	uint32_t total;
	uint32_t run = block_scan(mine, tmp, &total);
	for (int64_t i = lo; i < hi; i++) {
		const uint32_t v = block_sums[i];
		block_sums[i] = run;
		run += v;
	}
	if (threadIdx.x == 0) {
		*unique = total;
		if (stats) atomicAdd(&stats[STAT_READ], (unsigned long long)total);
	}
}

// gnn_compact: block b (same shape as gnn_word_counts) writes, for its words,
// word_base[w] (the rank of the word's first set bit) and the row ids of the
// set bits to rows[rank], in ascending order.
extern "C" __global__ void __launch_bounds__(256)
gnn_compact(const uint32_t *__restrict__ bitmap, int64_t words, const uint32_t *__restrict__ block_base,
            uint32_t *__restrict__ word_base, uint32_t *__restrict__ rows) {
	__shared__ uint32_t tmp[32];
	const int64_t w0 = (int64_t)blockIdx.x * WORDS_PER_BLOCK + (int64_t)threadIdx.x * 4;
	uint32_t v[4], c = 0;
#pragma unroll
	for (int k = 0; k < 4; k++) {
		v[k] = w0 + k < words ? bitmap[w0 + k] : 0u;
		c += __popc(v[k]);
	}
	uint32_t total;
	uint32_t r = block_base[blockIdx.x] + block_scan(c, tmp, &total);
#pragma unroll
	for (int k = 0; k < 4; k++) {
		if (w0 + k >= words) break;
		word_base[w0 + k] = r;
		uint32_t bits = v[k];
		while (bits) {
			const int b = __ffs(bits) - 1;
			rows[r++] = (uint32_t)((w0 + k) * 32 + b);
			bits &= bits - 1;
		}
	}
}

// copy_row moves row_bytes from src to dst with the widest loads both allow,
// G lanes (lane = this thread's place among them) sharing the row.
__device__ __forceinline__ void copy_row(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src, int64_t row_bytes,
                                         int lane, int G) {
	if (((row_bytes | (int64_t)src | (int64_t)dst) & 15) == 0) {
		for (int64_t c = (int64_t)lane * 16; c < row_bytes; c += (int64_t)G * 16)
			*reinterpret_cast<uint4 *>(dst + c) = *reinterpret_cast<const uint4 *>(src + c);
	} else if (((row_bytes | (int64_t)src | (int64_t)dst) & 7) == 0) {
		for (int64_t c = (int64_t)lane * 8; c < row_bytes; c += (int64_t)G * 8)
			*reinterpret_cast<uint64_t *>(dst + c) = *reinterpret_cast<const uint64_t *>(src + c);
	} else if (((row_bytes | (int64_t)src | (int64_t)dst) & 3) == 0) {
		for (int64_t c = (int64_t)lane * 4; c < row_bytes; c += (int64_t)G * 4)
			*reinterpret_cast<uint32_t *>(dst + c) = *reinterpret_cast<const uint32_t *>(src + c);
	} else if (((row_bytes | (int64_t)src | (int64_t)dst) & 1) == 0) {
		for (int64_t c = (int64_t)lane * 2; c < row_bytes; c += (int64_t)G * 2)
			*reinterpret_cast<uint16_t *>(dst + c) = *reinterpret_cast<const uint16_t *>(src + c);
	} else {
		for (int64_t c = lane; c < row_bytes; c += G) dst[c] = src[c];
	}
}

// rank_of is the rank of marked row id among the sweep's distinct rows.
__device__ __forceinline__ uint32_t rank_of(const uint32_t *__restrict__ bitmap, const uint32_t *__restrict__ word_base,
                                            int64_t id) {
	return word_base[id >> 5] + __popc(bitmap[id >> 5] & below_mask((uint32_t)(id & 31)));
}

#define PART_SHIFT 26          // gather.cu: a sweep delivery is part << 26 | position
#define SHARED_ROW 0x80000000u // gather.cu: in first[u], the row's deliveries are in extras

// gnn_count_deliveries: cnt[rank(id)]++ for every id of the batches that
// the cache does not hold (cnt zeroed before).
extern "C" __global__ void __launch_bounds__(1024)
gnn_count_deliveries(Parts ids, Parts n, Parts n_dev, int np, const uint32_t *__restrict__ bitmap,
                     const uint32_t *__restrict__ word_base, const int32_t *__restrict__ cache_slot,
                     uint32_t *__restrict__ cnt) {
	__shared__ PartTable t;
	part_table(ids, n, n_dev, np, t);
	const int64_t total = t.start[np];
	const int64_t stride = (int64_t)gridDim.x * blockDim.x;
	int j = 0;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
		j = part_of(t, np, i, j);
		const int64_t id = id_at(t, j, i);
		if (cache_slot && cache_slot[id] >= 0) continue;
		atomicAdd(&cnt[rank_of(bitmap, word_base, id)], 1u);
	}
}

// gnn_place_deliveries: for each distinct row r < *unique with cnt[r]
// deliveries: one, first[r] = 0 until gnn_deliver writes it; several, a list
// of cnt[r] + 1 words of extras at an offset taken from *cursor (one atomic
// a warp), first[r] = SHARED_ROW | offset, extras[offset] = cnt[r], and
// cnt[r] = 0 (the list's cursor for gnn_deliver).
extern "C" __global__ void __launch_bounds__(256)
gnn_place_deliveries(const uint32_t *__restrict__ unique, uint32_t *__restrict__ cnt, uint32_t *__restrict__ first,
                     uint32_t *__restrict__ extras, uint32_t *__restrict__ cursor) {
	const int64_t n = *unique;
	const int lane = threadIdx.x & 31;
	const int64_t stride = (int64_t)gridDim.x * blockDim.x;
	// (i - lane) is the warp's first row: the loop runs the same number of
	// times on every lane, so the shuffles see the whole warp.
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i - lane < n; i += stride) {
		const uint32_t c = i < n ? cnt[i] : 0;
		const uint32_t need = c > 1 ? c + 1 : 0;
		uint32_t x = need; // inclusive prefix over the warp
#pragma unroll
		for (int d = 1; d < 32; d <<= 1) {
			const uint32_t y = __shfl_up_sync(0xffffffffu, x, d);
			if (lane >= d) x += y;
		}
		const uint32_t total = __shfl_sync(0xffffffffu, x, 31);
		uint32_t base = 0;
		if (lane == 0 && total) base = atomicAdd(cursor, total);
		base = __shfl_sync(0xffffffffu, base, 0);
		if (i < n) {
			if (need) {
				const uint32_t off = base + x - need;
				first[i] = SHARED_ROW | off;
				extras[off] = c;
				cnt[i] = 0;
			} else {
				first[i] = 0;
			}
		}
	}
}

// gnn_deliver: for every id of the batches (position p of part j) that the
// cache does not hold, its delivery j << PART_SHIFT | p: into first[rank]
// when the row has only that one, else into the next word of its list.
extern "C" __global__ void __launch_bounds__(1024)
gnn_deliver(Parts ids, Parts n, Parts n_dev, int np, const uint32_t *__restrict__ bitmap,
            const uint32_t *__restrict__ word_base, const int32_t *__restrict__ cache_slot,
            uint32_t *__restrict__ cnt, uint32_t *__restrict__ first, uint32_t *__restrict__ extras) {
	__shared__ PartTable t;
	part_table(ids, n, n_dev, np, t);
	const int64_t total = t.start[np];
	const int64_t stride = (int64_t)gridDim.x * blockDim.x;
	int j = 0;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
		j = part_of(t, np, i, j);
		const int64_t id = id_at(t, j, i);
		if (cache_slot && cache_slot[id] >= 0) continue;
		const uint32_t r = rank_of(bitmap, word_base, id);
		const uint32_t d = (uint32_t)j << PART_SHIFT | (uint32_t)(i - t.start[j]);
		const uint32_t f = first[r];
		if (f & SHARED_ROW) {
			extras[(f & ~SHARED_ROW) + 1 + atomicAdd(&cnt[r], 1u)] = d;
		} else {
			first[r] = d;
		}
	}
}

// gnn_assemble: for every id of the batches (position p of part j), x_j[p]
// = its row from the cache (cache_slot[id] >= 0) or, when staging is not
// null, from the staging table (rank(id)); y_j[p] = labels[id] widened to
// int64 (when y_j and labels are not null; x_j may be null too). G = 1 <<
// gshift lanes move one row.
extern "C" __global__ void __launch_bounds__(1024)
gnn_assemble(Parts ids, Parts n, Parts n_dev, Parts xs, Parts ys, int np, const uint32_t *__restrict__ bitmap,
             const uint32_t *__restrict__ word_base, const uint8_t *__restrict__ staging,
             const int32_t *__restrict__ cache_slot, const uint8_t *__restrict__ cache, int64_t row_bytes,
             const int32_t *__restrict__ labels, int gshift) {
	__shared__ PartTable t;
	__shared__ uint8_t *xj[MAX_PARTS];
	__shared__ int64_t *yj[MAX_PARTS];
	if ((int)threadIdx.x < np) {
		xj[threadIdx.x] = reinterpret_cast<uint8_t *>(pick(xs, threadIdx.x));
		yj[threadIdx.x] = reinterpret_cast<int64_t *>(pick(ys, threadIdx.x));
	}
	part_table(ids, n, n_dev, np, t); // (its barrier covers xj and yj too)
	const int64_t total = t.start[np];
	const int G = 1 << gshift;
	const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const int lane = (int)(tid & (G - 1));
	const int64_t ngroups = ((int64_t)gridDim.x * blockDim.x) >> gshift;
	int j = 0;
	for (int64_t q = tid >> gshift; q < total; q += ngroups) {
		j = part_of(t, np, q, j);
		uint8_t *x = xj[j];
		int64_t *y = yj[j];
		if (!x && !(y && labels)) continue;
		const int64_t p = q - t.start[j];
		const int64_t id = t.ids[j][p];
		if (x) {
			const int32_t s = cache_slot ? cache_slot[id] : -1;
			const uint8_t *src;
			if (s >= 0) {
				src = cache + (int64_t)s * row_bytes;
			} else if (staging) {
				src = staging + (int64_t)rank_of(bitmap, word_base, id) * row_bytes;
			} else {
				src = nullptr; // delivered by the sweep
			}
			if (src) copy_row(x + p * row_bytes, src, row_bytes, lane, G);
		}
		if (y && labels && lane == 0) y[p] = (int64_t)labels[id];
	}
}

// gnn_labels: y[p] = labels[ids[p]] for one batch (the labels of a batch
// whose features are not assembled here).
extern "C" __global__ void __launch_bounds__(1024)
gnn_labels(const int64_t *__restrict__ ids, int64_t n, const int32_t *__restrict__ labels, int64_t *__restrict__ y) {
	const int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = (int64_t)labels[ids[i]];
}
