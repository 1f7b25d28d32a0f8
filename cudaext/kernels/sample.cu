// gnnloader neighbour sampling on the GPU, from a CSR held in device memory.
// Built by scripts/build-kernels.sh into sample.fatbin; sampler/gpu.go
// launches the kernels. The result is the CPU sampler's (package sampler),
// byte for byte: the same RNG (SplitMix64 streams seeded per (batch key, hop,
// frontier position)), Floyd's algorithm for a fanout below the degree, the
// same edge order (by frontier node, then in drawing order) and the same
// local ids (seeds first, then each hop's new nodes in the order of their
// first appearance in that hop's edges).
//
// Several batches are sampled by one launch of each kernel: batch y of a
// call (a lane) is blockIdx.y, with its own arguments and working memory
// (SampleArgs[y]); a launch's blocks of an idle lane (n < 0) return at once.
//
// The nodes a batch has met are kept in a hash table of its lane's own,
// sized for the batch (a power of two of at least twice its most nodes, so
// its probes stay short and it never fills): an Entry of 16 bytes per slot,
// its key (int64 node id, -1 when empty), the key's local id (-1: none yet)
// and first position (NOT_SEEN: none yet) side by side, so that the random
// accesses of an edge to its neighbour's entry (a probe, the local id, the
// first position, in four kernels) meet one 32-byte sector, not one in each
// of three arrays. An empty entry is all ones, so one memset empties a
// table. Below, localid[v] and firstpos[v] stand for v's entry's fields.
// The table is tens of MB where arrays over the whole graph were hundreds
// (888 MB for papers100M).
//
// One call (up to MAX_LANES batches), on one stream:
//   gnn_set_args     the call's batches' arguments into args (below), the
//                    lanes past them idle
//   then the same work for every call, captured once per width as a CUDA
//   graph (sampler/gpu.go), its kernels reading each lane's batch from args:
//   gnn_seeds        n_id = seeds; the seeds into the table, firstpos[v] =
//                    min position
//   gnn_seed_ids     localid[v] = firstpos[v] for the seeds (their
//                    firstpos stays: nothing reads it once they have ids)
//   per hop h:
//     gnn_degrees    cnt[p] = min(degree, fanout) of frontier node p
//     scan           off = exclusive prefix of cnt (gnn_scan_block, then
//                    gnn_scan_sum_add), its total the hop's edge count
//     gnn_draw       the edges: neighbour id, edge id, target (local id)
//     gnn_first      every neighbour's table entry (ent[e], so the hop's
//                    later kernels need not probe the table again);
//                    firstpos[v] = min edge position, for v not yet numbered
//     gnn_flag_first flag[e] = edge e is v's first appearance
//     scan           new local ids of the flagged edges, the hop's new nodes
//     gnn_assign     localid[v], n_id of the new nodes
//     gnn_resolve    source local id of every edge of the hop
//   gnn_pack         edge_index's targets row after its sources
//   then the table emptied for the next batch: whole, by one memset
//   (sampler/gpu.go, for a table of up to clearWholeBytes), or entry by
//   entry:
//   gnn_reset_find   the table entry of every n_id (into a scratch array:
//                    no entry is emptied while another is still looked up)
//   gnn_reset        those entries emptied: all ones
// Counts (nodes and edges per hop) live in a small device array, `counts`:
//   counts[0] = nodes so far, counts[1] = edges so far,
//   counts[2 + h] = nodes added at hop h (h = 0: the seeds),
//   counts[2 + H + 1 + h] = edges of hop h + 1, for H hops,
//   counts[2 + 2H + 1] = the new nodes of the hop (scratch: the flags' scan).
// Kernels read their sizes from there, so one batch needs no host sync.
#include <stdint.h>

// Entry: a slot of a lane's hash table. Empty: every bit set (key -1,
// localid -1, firstpos NOT_SEEN).
struct __align__(16) Entry {
	int64_t key;       // the node (EMPTY_KEY: none)
	int32_t localid;   // its local id in the batch (-1: none yet)
	uint32_t firstpos; // the least position it was met at in the hop being numbered (NOT_SEEN: none yet)
};

// SampleArgs: one lane's batch and working memory, in device memory (an
// array of a sampler's lanes). gnn_set_args, launched on its own, writes the
// batch's part; the working memory's part is written once (sampler/gpu.go,
// which sizes it: sampleArgsBytes).
struct SampleArgs {
	const int64_t *seeds;
	int64_t n;           // seeds; -1: the lane is idle in this call
	uint64_t key;        // the batch's RNG key
	int64_t *nid;        // out: n_id
	int64_t *edge_index; // out: [2, E]
	int64_t *eid;        // out: edge ids
	int64_t *counts;     // out: the counts (above)
	// The lane's working memory.
	Entry *table;                  // the hash table (mask + 1 entries)
	int64_t *slot;                 // per node: its entry (gnn_reset_find)
	int64_t *nbr;                  // per edge of the batch: the neighbour's id
	int32_t *dst;                  // per edge of the batch: the target's local id
	int32_t *cnt, *off;            // per frontier node
	int32_t *flag, *newid, *ent;   // per edge of a hop
	int64_t *block_sums;           // per scan block
};

#define MAX_LANES 32 // batches a call samples at most (gnn_set_args' arrays)

// LANE: this block's lane; an idle lane's blocks return (all of a block's
// threads alike, so no barrier is left waiting).
#define LANE(args)                                                    \
	const SampleArgs *__restrict__ a = (args) + blockIdx.y;           \
	if (a->n < 0) return;

#define GOLDEN 0x9E3779B97F4A7C15ull
#define SCAN_BLOCK 1024 // elements a block of the scans covers (256 threads x 4)
#define NOT_SEEN 0xffffffffu
#define EMPTY_KEY (-1LL)
#define LOCAL_DRAWS 32 // fanouts up to this keep their drawn positions in registers / local memory
#define LOADS_IN_FLIGHT 8 // neighbour loads a draw issues before it uses them

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

// node_seed is sampler.nodeSeed: Go evaluates hop<<40 ^ pos + golden left
// to right, ((hop<<40) ^ pos) + golden.
__device__ __forceinline__ uint64_t node_seed(uint64_t key, int hop, int64_t pos) {
	return mix64(key ^ mix64((((uint64_t)hop << 40) ^ (uint64_t)pos) + GOLDEN));
}

struct Rng {
	uint64_t s;
	__device__ __forceinline__ uint64_t next() {
		s += GOLDEN;
		return mix64(s);
	}
	// below is sampler.rng.below: Lemire's multiply-and-reject.
	__device__ __forceinline__ uint64_t below(uint64_t n) {
		uint64_t x = next();
		uint64_t hi = __umul64hi(x, n), lo = x * n;
		if (lo < n) {
			const uint64_t t = (0 - n) % n;
			while (lo < t) {
				x = next();
				hi = __umul64hi(x, n);
				lo = x * n;
			}
		}
		return hi;
	}
};

#define GRID_STRIDE(i, n) \
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// table_insert returns v's entry in the table (mask + 1 entries), claiming
// an empty one if v has none: linear probing from v's hash. A key only ever
// goes from empty to a node within a batch, so a stale read is empty, and
// the compare-and-swap then tells.
__device__ __forceinline__ int64_t table_insert(Entry *table, int64_t mask, int64_t v) {
	int64_t h = (int64_t)(mix64((uint64_t)v) & (uint64_t)mask);
	for (;;) {
		const int64_t k = table[h].key;
		if (k == v) return h;
		if (k == EMPTY_KEY) {
			const int64_t old = (int64_t)atomicCAS((unsigned long long *)&table[h].key, (unsigned long long)EMPTY_KEY,
			                                       (unsigned long long)v);
			if (old == EMPTY_KEY || old == v) return h;
		}
		h = (h + 1) & mask;
	}
}

// table_find returns v's entry, -1 when v has none (never, for a node the
// batch inserted in an earlier kernel).
__device__ __forceinline__ int64_t table_find(const Entry *__restrict__ table, int64_t mask, int64_t v) {
	int64_t h = (int64_t)(mix64((uint64_t)v) & (uint64_t)mask);
	for (;;) {
		const int64_t k = table[h].key;
		if (k == v) return h;
		if (k == EMPTY_KEY) return -1;
		h = (h + 1) & mask;
	}
}

// LaneList: a call's batches, one array entry per lane (kernel parameters:
// copied at the launch, so the host's copy may change at once).
struct LaneList {
	uint64_t v[MAX_LANES];
};

// gnn_set_args: lanes [0, used) get the call's batches, lanes [used, lanes)
// are idle. One block of MAX_LANES threads.
extern "C" __global__ void __launch_bounds__(MAX_LANES)
gnn_set_args(SampleArgs *__restrict__ args, int used, int lanes, LaneList seeds, LaneList n, LaneList key,
             LaneList nid, LaneList edge_index, LaneList eid, LaneList counts) {
	const int y = threadIdx.x;
	if (y >= lanes) return;
	SampleArgs *__restrict__ a = args + y;
	if (y >= used) {
		a->n = -1;
		return;
	}
	a->seeds = (const int64_t *)seeds.v[y];
	a->n = (int64_t)n.v[y];
	a->key = key.v[y];
	a->nid = (int64_t *)nid.v[y];
	a->edge_index = (int64_t *)edge_index.v[y];
	a->eid = (int64_t *)eid.v[y];
	a->counts = (int64_t *)counts.v[y];
}

// gnn_seeds: n_id[i] = seeds[i]; the seeds into the table, firstpos[seed] =
// its first position.
extern "C" __global__ void __launch_bounds__(256)
gnn_seeds(const SampleArgs *__restrict__ args, int64_t mask) {
	LANE(args)
	const int64_t *__restrict__ seeds = a->seeds;
	int64_t *__restrict__ nid = a->nid;
	const int64_t n = a->n;
	GRID_STRIDE(i, n) {
		const int64_t v = seeds[i];
		nid[i] = v;
		atomicMin(&a->table[table_insert(a->table, mask, v)].firstpos, (uint32_t)i);
	}
}

// gnn_seed_ids: localid[seed] = its first position. Sets the counts of the
// seeds.
extern "C" __global__ void __launch_bounds__(256)
gnn_seed_ids(const SampleArgs *__restrict__ args, int64_t mask) {
	LANE(args)
	const int64_t *__restrict__ seeds = a->seeds;
	const int64_t n = a->n;
	int64_t *__restrict__ counts = a->counts;
	Entry *__restrict__ table = a->table;
	GRID_STRIDE(i, n) {
		const int64_t t = table_find(table, mask, seeds[i]);
		if (t >= 0 && table[t].firstpos == (uint32_t)i) table[t].localid = (int32_t)i;
	}
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		counts[0] = n; // nodes so far
		counts[1] = 0; // edges so far
		counts[2] = n; // hop 0: the seeds
	}
}

// gnn_degrees: for frontier node p (n_id[lo + p], lo and the frontier size
// from counts), cnt[p] = the edges it samples.
extern "C" __global__ void __launch_bounds__(256)
gnn_degrees(const int64_t *__restrict__ indptr, const SampleArgs *__restrict__ args, int hop, int fanout) {
	LANE(args)
	const int64_t *__restrict__ nid = a->nid;
	const int64_t *__restrict__ counts = a->counts;
	int32_t *__restrict__ cnt = a->cnt;
	const int64_t size = counts[2 + hop - 1]; // the frontier: the nodes added at the hop before
	const int64_t lo = counts[0] - size;
	GRID_STRIDE(p, size) {
		const int64_t v = nid[lo + p];
		int64_t d = indptr[v + 1] - indptr[v];
		if (fanout >= 0 && d > fanout) d = fanout;
		cnt[p] = (int32_t)d;
	}
}

// block_scan: exclusive prefix of v over the block (blockDim.x a multiple of
// 32), *total the block's sum. tmp: 32 words of shared memory.
__device__ __forceinline__ int64_t block_scan(int64_t v, int64_t *tmp, int64_t *total) {
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
	int64_t x = v;
#pragma unroll
	for (int d = 1; d < 32; d <<= 1) {
		int64_t y = __shfl_up_sync(0xffffffffu, x, d);
		if (lane >= d) x += y;
	}
	if (lane == 31) tmp[warp] = x;
	__syncthreads();
	if (warp == 0) {
		int64_t s = lane < warps ? tmp[lane] : 0;
#pragma unroll
		for (int d = 1; d < 32; d <<= 1) {
			int64_t y = __shfl_up_sync(0xffffffffu, s, d);
			if (lane >= d) s += y;
		}
		tmp[lane] = s;
	}
	__syncthreads();
	const int64_t before = warp ? tmp[warp - 1] : 0;
	*total = tmp[warps - 1];
	__syncthreads();
	return before + x - v;
}

// The scan of a lane's int32 array a[0, n) (n = counts[n_at]) into the
// exclusive int32 prefix out[] (which: SCAN_DEGREES, cnt into off, or
// SCAN_FLAGS, flag into newid), in two launches of one block of 256 threads
// per SCAN_BLOCK elements (capacity-sized grids): gnn_scan_block (each block's
// own prefix, its sum into block_sums; blocks past n write a zero sum), then
// gnn_scan_sum_add (each block adds the sums of the blocks before it, which
// it adds up itself: a few hundred int64 at most, from the L2; the last
// block holding elements writes the total into counts[total_at]).
#define SCAN_DEGREES 0
#define SCAN_FLAGS 1

extern "C" __global__ void __launch_bounds__(256)
gnn_scan_block(const SampleArgs *__restrict__ args, int which, int n_at) {
	__shared__ int64_t tmp[32];
	LANE(args)
	const int32_t *__restrict__ in = which == SCAN_DEGREES ? a->cnt : a->flag;
	int32_t *__restrict__ out = which == SCAN_DEGREES ? a->off : a->newid;
	int64_t *__restrict__ block_sums = a->block_sums;
	const int64_t n = a->counts[n_at];
	const int64_t i0 = (int64_t)blockIdx.x * SCAN_BLOCK + (int64_t)threadIdx.x * 4;
	int64_t v[4], s = 0;
#pragma unroll
	for (int k = 0; k < 4; k++) {
		v[k] = i0 + k < n ? in[i0 + k] : 0;
		s += v[k];
	}
	int64_t total;
	int64_t run = block_scan(s, tmp, &total);
#pragma unroll
	for (int k = 0; k < 4; k++) {
		if (i0 + k < n) out[i0 + k] = (int32_t)run;
		run += v[k];
	}
	if (threadIdx.x == 0) block_sums[blockIdx.x] = total;
}

extern "C" __global__ void __launch_bounds__(256)
gnn_scan_sum_add(const SampleArgs *__restrict__ args, int which, int n_at, int total_at) {
	__shared__ int64_t tmp[32];
	LANE(args)
	const int64_t *__restrict__ block_sums = a->block_sums;
	int32_t *__restrict__ out = which == SCAN_DEGREES ? a->off : a->newid;
	int64_t *__restrict__ counts = a->counts;
	const int64_t n = counts[n_at];
	const int64_t b0 = (int64_t)blockIdx.x * SCAN_BLOCK;
	if (b0 >= n && !(n == 0 && blockIdx.x == 0)) return; // the whole block returns: no barrier is left waiting
	int64_t mine = 0;
	for (int64_t b = threadIdx.x; b < blockIdx.x; b += blockDim.x) mine += block_sums[b];
	int64_t before;
	block_scan(mine, tmp, &before); // before: the sum of the blocks before this one
	const int64_t i0 = b0 + (int64_t)threadIdx.x * 4;
#pragma unroll
	for (int k = 0; k < 4; k++)
		if (i0 + k < n) out[i0 + k] += (int32_t)before;
	if (threadIdx.x == 0 && b0 + SCAN_BLOCK >= n) counts[total_at] = before + (n > 0 ? block_sums[blockIdx.x] : 0);
}

// gnn_draw: frontier node p's edges, at positions eb + off[p] ...: the
// sampled neighbour (nbr, global id), the edge id (its CSR position) and the
// target (its local id, lo + p). Every neighbour when the degree is at most
// the fanout, else Floyd's algorithm over row positions; a position already
// drawn is found among the node's positions drawn so far (kept by the thread
// for fanouts up to LOCAL_DRAWS, else read back from its edge ids).
template <typename I>
__device__ __forceinline__ void draw(const int64_t *__restrict__ indptr, const I *__restrict__ indices,
                                     const SampleArgs *__restrict__ a, int hop, int fanout) {
	const int64_t *__restrict__ nid = a->nid;
	const int64_t *__restrict__ counts = a->counts;
	int64_t *__restrict__ eid = a->eid;
	const int32_t *__restrict__ off = a->off;
	int64_t *__restrict__ nbr = a->nbr;
	int32_t *__restrict__ dst = a->dst;
	const uint64_t key = a->key;
	const int64_t size = counts[2 + hop - 1];
	const int64_t lo = counts[0] - size;
	const int64_t eb = counts[1];
	GRID_STRIDE(p, size) {
		const int64_t v = nid[lo + p];
		const int64_t st = indptr[v], d = indptr[v + 1] - st;
		const int64_t e0 = eb + off[p];
		const int32_t target = (int32_t)(lo + p);
		if (fanout < 0 || d <= fanout) {
#pragma unroll 4
			for (int64_t i = 0; i < d; i++) {
				nbr[e0 + i] = (int64_t)indices[st + i];
				eid[e0 + i] = st + i;
				dst[e0 + i] = target;
			}
			continue;
		}
		const int64_t m = fanout;
		Rng r{node_seed(key, hop, p)};
		if (m > LOCAL_DRAWS) {
			for (int64_t i = 0, j = d - m; j < d; i++, j++) {
				int64_t t = (int64_t)r.below((uint64_t)(j + 1));
				for (int64_t q = 0; q < i; q++) {
					if (eid[e0 + q] == st + t) {
						t = j;
						break;
					}
				}
				nbr[e0 + i] = (int64_t)indices[st + t];
				eid[e0 + i] = st + t;
				dst[e0 + i] = target;
			}
			continue;
		}
		// The positions first (the RNG's chain, no memory but pos), then
		// the neighbours LOADS_IN_FLIGHT at a time, their loads issued
		// together rather than each after the draw before it.
		int64_t pos[LOCAL_DRAWS];
		for (int64_t i = 0, j = d - m; j < d; i++, j++) {
			int64_t t = (int64_t)r.below((uint64_t)(j + 1));
			for (int64_t q = 0; q < i; q++) {
				if (pos[q] == t) {
					t = j;
					break;
				}
			}
			pos[i] = t;
		}
		for (int64_t i = 0; i < m; i += LOADS_IN_FLIGHT) {
			int64_t u[LOADS_IN_FLIGHT];
#pragma unroll
			for (int k = 0; k < LOADS_IN_FLIGHT; k++)
				if (i + k < m) u[k] = (int64_t)indices[st + pos[i + k]];
#pragma unroll
			for (int k = 0; k < LOADS_IN_FLIGHT; k++) {
				if (i + k < m) {
					nbr[e0 + i + k] = u[k];
					eid[e0 + i + k] = st + pos[i + k];
					dst[e0 + i + k] = target;
				}
			}
		}
	}
}

extern "C" __global__ void __launch_bounds__(256)
gnn_draw32(const int64_t *__restrict__ indptr, const int32_t *__restrict__ indices,
           const SampleArgs *__restrict__ args, int hop, int fanout) {
	LANE(args)
	draw(indptr, indices, a, hop, fanout);
}

extern "C" __global__ void __launch_bounds__(256)
gnn_draw64(const int64_t *__restrict__ indptr, const int64_t *__restrict__ indices,
           const SampleArgs *__restrict__ args, int hop, int fanout) {
	LANE(args)
	draw(indptr, indices, a, hop, fanout);
}

// gnn_first: every neighbour of the hop into the table, its entry into
// ent[e] (e relative to the hop's first edge; sampler/gpu.go keeps the
// table under 2^31 entries); for each edge e whose neighbour has no local id
// yet, firstpos[v] = the smallest such e.
extern "C" __global__ void __launch_bounds__(256)
gnn_first(const SampleArgs *__restrict__ args, int hop, int hops, int64_t mask) {
	LANE(args)
	const int64_t *__restrict__ counts = a->counts;
	const int64_t *__restrict__ nbr = a->nbr;
	Entry *table = a->table;
	int32_t *__restrict__ ent = a->ent;
	const int64_t eb = counts[1], e = counts[2 + hops + 1 + hop - 1];
	GRID_STRIDE(i, e) {
		const int64_t t = table_insert(table, mask, nbr[eb + i]);
		ent[i] = (int32_t)t;
		if (table[t].localid < 0) atomicMin(&table[t].firstpos, (uint32_t)i);
	}
}

// gnn_flag_first: flag[i] = 1 when edge i of the hop is its neighbour's
// first appearance (a new node), else 0.
extern "C" __global__ void __launch_bounds__(256)
gnn_flag_first(const SampleArgs *__restrict__ args, int hop, int hops) {
	LANE(args)
	const int32_t *__restrict__ ent = a->ent;
	const Entry *__restrict__ table = a->table;
	int32_t *__restrict__ flag = a->flag;
	const int64_t e = a->counts[2 + hops + 1 + hop - 1];
	GRID_STRIDE(i, e) {
		// The entry's local id and first position in one 8-byte load.
		const int2 lf = *(const int2 *)&table[ent[i]].localid;
		flag[i] = (lf.x < 0 && (uint32_t)lf.y == (uint32_t)i) ? 1 : 0;
	}
}

// gnn_assign: the new nodes get local ids counts[0] + rank (rank = the
// flags' exclusive prefix, in newid), in edge order, and their n_id.
extern "C" __global__ void __launch_bounds__(256)
gnn_assign(const SampleArgs *__restrict__ args, int hop, int hops) {
	LANE(args)
	const int64_t *__restrict__ counts = a->counts;
	int64_t *__restrict__ nid = a->nid;
	const int64_t *__restrict__ nbr = a->nbr;
	const int32_t *__restrict__ flag = a->flag;
	const int32_t *__restrict__ newid = a->newid;
	const int32_t *__restrict__ ent = a->ent;
	Entry *__restrict__ table = a->table;
	const int64_t eb = counts[1], e = counts[2 + hops + 1 + hop - 1], base = counts[0];
	GRID_STRIDE(i, e) {
		if (flag[i]) {
			const int64_t v = nbr[eb + i];
			const int64_t l = base + newid[i];
			table[ent[i]].localid = (int32_t)l;
			nid[l] = v;
		}
	}
}

// gnn_resolve: the source local id of every edge of the hop, written as
// int64 into edge_index's first row.
extern "C" __global__ void __launch_bounds__(256)
gnn_resolve(const SampleArgs *__restrict__ args, int hop, int hops) {
	LANE(args)
	const int64_t *__restrict__ counts = a->counts;
	int64_t *__restrict__ src = a->edge_index;
	const int32_t *__restrict__ ent = a->ent;
	const Entry *__restrict__ table = a->table;
	const int64_t eb = counts[1], e = counts[2 + hops + 1 + hop - 1];
	GRID_STRIDE(i, e) src[eb + i] = (int64_t)table[ent[i]].localid;
}

// gnn_end_hop: the hop's new nodes (the flags' total, counts[scan_at]) and
// edges move the running counts on. One thread a lane.
extern "C" __global__ void gnn_end_hop(const SampleArgs *__restrict__ args, int hop, int hops, int scan_at) {
	LANE(args)
	int64_t *__restrict__ counts = a->counts;
	const int64_t added = counts[scan_at];
	counts[2 + hop] = added;
	counts[0] += added;
	counts[1] += counts[2 + hops + 1 + hop - 1];
}

// gnn_pack: edge_index = [src; dst] as a contiguous [2, E] int64 array: the
// sources are in place, the targets (int32 in dst) go after them.
extern "C" __global__ void __launch_bounds__(256)
gnn_pack(const SampleArgs *__restrict__ args) {
	LANE(args)
	const int64_t *__restrict__ counts = a->counts;
	int64_t *__restrict__ edge_index = a->edge_index;
	const int32_t *__restrict__ dst = a->dst;
	const int64_t e = counts[1];
	GRID_STRIDE(i, e) edge_index[e + i] = (int64_t)dst[i];
}

// gnn_reset_find: slot[i] = the table entry of n_id[i] (-1: none). Every
// key the batch put in the table is a node of n_id: the seeds, and each
// hop's neighbours, numbered or new.
extern "C" __global__ void __launch_bounds__(256)
gnn_reset_find(const SampleArgs *__restrict__ args, int64_t mask) {
	LANE(args)
	const int64_t *__restrict__ nid = a->nid;
	const Entry *__restrict__ table = a->table;
	int64_t *__restrict__ slot = a->slot;
	const int64_t n = a->counts[0];
	GRID_STRIDE(i, n) slot[i] = table_find(table, mask, nid[i]);
}

// gnn_reset: the entries gnn_reset_find found back to empty (after it: a
// lookup never meets an entry emptied under it), the only ones the batch
// set.
extern "C" __global__ void __launch_bounds__(256)
gnn_reset(const SampleArgs *__restrict__ args) {
	LANE(args)
	const int64_t *__restrict__ slot = a->slot;
	int4 *__restrict__ table = (int4 *)a->table;
	const int64_t n = a->counts[0];
	GRID_STRIDE(i, n) {
		const int64_t t = slot[i];
		if (t >= 0) table[t] = make_int4(-1, -1, -1, -1); // every bit set: empty
	}
}
