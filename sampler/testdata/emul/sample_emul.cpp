// cudaext/kernels/sample.cu's whole call run on the CPU (cuda_emul.h),
// launched in the order sampler/gpu.go enqueues it, on one sampler of 4
// lanes: calls of 4, 3, 1 and 2 batches in turn (each call's batches
// together, one launch of each kernel for them all, at gpu.go's width: 4,
// 4 with the lane the call before used idle, 1 and 2; the idle lanes must
// be marked so), a batch of no seeds among them,
// for fanouts below and above the degrees, every neighbour (-1), more than
// 32 draws and a repeated seed. It writes its graph, each case's fanouts
// and each batch's key, seeds and hash (of n_id, edge_index, edge ids and
// counts) to FILE, and a line per batch to stdout; sampler's
// TestKernelsEmulatedMatchCPU samples the same batches with the CPU sampler
// and compares the hashes. MODE: kernel (the tables emptied by
// gnn_reset_find and gnn_reset) or memset (emptied whole).
//   g++ -O2 -std=c++20 -pthread -w -include cuda_emul.h \
//     -DSAMPLE_CU="\"/abs/path/to/sample.cu\"" sample_emul.cpp -o emul
//   ./emul MODE FILE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>
#include SAMPLE_CU

static uint64_t rng_state = 7;
static uint64_t rnd() {
	rng_state += 0x9E3779B97F4A7C15ull;
	uint64_t z = rng_state;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

#define LANES 4

struct Sampler {
	std::vector<int> fanouts;
	int64_t maxBatch, nodeCap = 0, edgeCap = 0, maxFront = 0, maxHop = 0, scanBlocks = 0, mask = 0, entries = 0;
	std::vector<int64_t> frontierCap, hopEdgeCap;
	// Every lane's working memory, lane after lane (gpu.go's layout).
	std::vector<Entry> table;
	std::vector<int64_t> slot, nbr, blockSums;
	std::vector<int32_t> dst, cnt, off, flag, newid, ent;
	SampleArgs args[LANES]{};
	unsigned sms = 2;
	// gpu.go grid: at most 8 blocks a multiprocessor over the w lanes.
	unsigned grid(int64_t n, int w) const {
		return (unsigned)std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, 8 * (int64_t)sms / w));
	}
	int width(int n) const { // gpu.go width: powers of two below LANES, then LANES
		for (int x = 1; x < LANES; x *= 2)
			if (x >= n) return x;
		return LANES;
	}
};

static int64_t table_entries(int64_t nodes) {
	int64_t n = 1024;
	while (n < 2 * nodes) n *= 2;
	return n;
}

// clear_tables: gpu.go's memset, every bit of the first w lanes' entries set.
static void clear_tables(Sampler &s, int w) { memset(s.table.data(), 0xff, w * s.entries * sizeof(Entry)); }

// empty: an entry as the memset leaves it (key -1, local id -1, first position NOT_SEEN).
static bool empty(const Entry &e) { return e.key == EMPTY_KEY && e.localid == -1 && e.firstpos == NOT_SEEN; }

static void scan(Sampler &s, int w, int which, int nAt, int64_t capN, int totalAt) {
	const int64_t nb = std::max<int64_t>((capN + SCAN_BLOCK - 1) / SCAN_BLOCK, 1);
	const SampleArgs *a = s.args;
	emul_launch2((unsigned)nb, w, 256, true, gnn_scan_block, a, which, nAt);
	emul_launch2((unsigned)nb, w, 256, true, gnn_scan_sum_add, a, which, nAt, totalAt);
}

static FILE *dump;
static void put(int64_t v) { fwrite(&v, 8, 1, dump); }

int main(int argc, char **argv) {
	if (argc != 3 || (std::string(argv[1]) != "kernel" && std::string(argv[1]) != "memset")) {
		fprintf(stderr, "usage: %s kernel|memset FILE\n", argv[0]);
		return 2;
	}
	const bool memsetReset = std::string(argv[1]) == "memset";
	if (!(dump = fopen(argv[2], "wb"))) {
		perror(argv[2]);
		return 1;
	}
	const int64_t N = 5000;
	std::vector<int64_t> indptr(N + 1, 0);
	for (int64_t v = 0; v < N; v++) indptr[v + 1] = indptr[v] + (rnd() % 6 == 0 ? rnd() % 120 : rnd() % 25);
	const int64_t E = indptr[N];
	std::vector<int32_t> indices(E);
	for (auto &x : indices) x = (int32_t)(rnd() % N);
	int64_t maxDeg = 0;
	for (int64_t v = 0; v < N; v++) maxDeg = std::max(maxDeg, indptr[v + 1] - indptr[v]);

	const std::vector<std::vector<int>> cases = {{15, 10, 5}, {-1, 3}, {40, 2}, {1, 1, 1, 1}};
	const std::vector<int> calls = {4, 3, 1, 2}; // batches a call: widths 4, 4 (lane 3 idle after a batch), 1 and 2
	int64_t batches = 0;
	for (int c : calls) batches += c;
	put(N);
	put(E);
	for (auto x : indptr) put(x);
	for (auto x : indices) put(x);
	put((int64_t)cases.size());
	for (const auto &fan : cases) {
		put((int64_t)fan.size());
		for (int f : fan) put(f);
		put(batches);
		Sampler s;
		s.fanouts = fan;
		s.maxBatch = 96;
		const int H = (int)fan.size();
		// Capacities as sampler/gpu.go NewGPU sets them.
		int64_t front = s.maxBatch;
		s.nodeCap = front;
		for (int f : fan) {
			int64_t k = f;
			if (f < 0 || k > maxDeg) k = maxDeg;
			const int64_t e = std::min(front * k, E);
			s.frontierCap.push_back(front);
			s.hopEdgeCap.push_back(e);
			s.maxFront = std::max(s.maxFront, front);
			s.maxHop = std::max(s.maxHop, e);
			s.edgeCap = std::min(s.edgeCap + e, E);
			front = std::min(e, N);
			s.nodeCap = std::min(s.nodeCap + front, N);
		}
		s.entries = table_entries(s.nodeCap);
		s.mask = s.entries - 1;
		s.scanBlocks = std::max<int64_t>((std::max(s.maxFront, s.maxHop) + SCAN_BLOCK - 1) / SCAN_BLOCK, 1);
		const int64_t L = LANES;
		s.table.assign(L * s.entries, Entry{0, 0, 0});
		clear_tables(s, LANES);
		s.slot.assign(L * s.nodeCap, 0);
		s.nbr.assign(L * s.edgeCap, 0);
		s.dst.assign(L * s.edgeCap, 0);
		s.cnt.assign(L * s.maxFront, 0);
		s.off.assign(L * s.maxFront, 0);
		s.flag.assign(L * s.maxHop, 0);
		s.newid.assign(L * s.maxHop, 0);
		s.ent.assign(L * s.maxHop, 0);
		s.blockSums.assign(L * s.scanBlocks, 0);
		for (int y = 0; y < LANES; y++) {
			SampleArgs &a = s.args[y];
			a.n = -1;
			a.table = s.table.data() + y * s.entries;
			a.slot = s.slot.data() + y * s.nodeCap;
			a.nbr = s.nbr.data() + y * s.edgeCap;
			a.dst = s.dst.data() + y * s.edgeCap;
			a.cnt = s.cnt.data() + y * s.maxFront;
			a.off = s.off.data() + y * s.maxFront;
			a.flag = s.flag.data() + y * s.maxHop;
			a.newid = s.newid.data() + y * s.maxHop;
			a.ent = s.ent.data() + y * s.maxHop;
			a.block_sums = s.blockSums.data() + y * s.scanBlocks;
		}
		const int scratch = 2 * H + 3;
		uint64_t key = 0;
		for (int used : calls) {
			// The call's batches, each with outputs of its own.
			std::vector<std::vector<int64_t>> seeds(used), nid(used), ei(used), eid(used), counts(used);
			std::vector<uint64_t> bkeys(used);
			LaneList lseeds{}, ln{}, lkey{}, lnid{}, lei{}, leid{}, lcounts{};
			for (int y = 0; y < used; y++, key++) {
				const int64_t n = key == 6 ? 0 : key % 2 ? s.maxBatch / 2 + 1 : s.maxBatch; // key 6: no seeds
				seeds[y].resize(n);
				for (auto &x : seeds[y]) x = (int64_t)(rnd() % N);
				if (n > 3) seeds[y][n - 1] = seeds[y][0]; // a repeated seed keeps its place
				nid[y].assign(s.nodeCap, -9);
				ei[y].assign(2 * std::max<int64_t>(s.edgeCap, 1), -9);
				eid[y].assign(std::max<int64_t>(s.edgeCap, 1), -9);
				counts[y].assign(2 * H + 4, -9);
				bkeys[y] = key * 7919 + 3;
				lseeds.v[y] = (uint64_t)seeds[y].data();
				ln.v[y] = (uint64_t)n;
				lkey.v[y] = bkeys[y];
				lnid.v[y] = (uint64_t)nid[y].data();
				lei.v[y] = (uint64_t)ei[y].data();
				leid.v[y] = (uint64_t)eid[y].data();
				lcounts.v[y] = (uint64_t)counts[y].data();
			}
			const int w = s.width(used);
			emul_launch(1, MAX_LANES, false, gnn_set_args, s.args, used, w, lseeds, ln, lkey, lnid, lei, leid, lcounts);
			for (int y = used; y < w; y++) {
				if (s.args[y].n != -1) {
					printf("call of %d at width %d: lane %d not idle (n %lld)\n", used, w, y, (long long)s.args[y].n);
					return 3;
				}
			}
			const SampleArgs *a = s.args;
			emul_launch2(s.grid(s.maxBatch, w), w, 256, false, gnn_seeds, a, s.mask);
			emul_launch2(s.grid(s.maxBatch, w), w, 256, false, gnn_seed_ids, a, s.mask);
			for (int h = 0; h < H; h++) {
				const int hop = h + 1, edgesAt = 3 + H + h, k = fan[h];
				const int64_t fc = s.frontierCap[h], ec = s.hopEdgeCap[h];
				emul_launch2(s.grid(fc, w), w, 256, false, gnn_degrees, (const int64_t *)indptr.data(), a, hop, k);
				scan(s, w, SCAN_DEGREES, 2 + h, fc, edgesAt);
				emul_launch2(s.grid(fc, w), w, 256, false, gnn_draw32, (const int64_t *)indptr.data(), (const int32_t *)indices.data(), a, hop,
				             k);
				emul_launch2(s.grid(ec, w), w, 256, false, gnn_first, a, hop, H, s.mask);
				emul_launch2(s.grid(ec, w), w, 256, false, gnn_flag_first, a, hop, H);
				scan(s, w, SCAN_FLAGS, edgesAt, ec, scratch);
				emul_launch2(s.grid(ec, w), w, 256, false, gnn_assign, a, hop, H);
				emul_launch2(s.grid(ec, w), w, 256, false, gnn_resolve, a, hop, H);
				emul_launch2(1, w, 1, false, gnn_end_hop, a, hop, H, scratch);
			}
			emul_launch2(s.grid(s.edgeCap, w), w, 256, false, gnn_pack, a);
			if (memsetReset) {
				clear_tables(s, w);
			} else {
				emul_launch2(s.grid(s.nodeCap, w), w, 256, false, gnn_reset_find, a, s.mask);
				emul_launch2(s.grid(s.nodeCap, w), w, 256, false, gnn_reset, a);
			}
			// Every lane's table must be empty again for the next call.
			int64_t dirty = 0;
			for (int64_t i = 0; i < L * s.entries; i++) dirty += !empty(s.table[i]);
			for (int y = 0; y < used; y++) {
				const int64_t nodes = counts[y][0], edges = counts[y][1];
				uint64_t h = 1469598103934665603ull;
				auto mix = [&](uint64_t x) { h = (h ^ x) * 1099511628211ull; };
				bool sane = nodes >= 0 && nodes <= s.nodeCap && edges >= 0 && edges <= s.edgeCap;
				if (sane) {
					for (int64_t i = 0; i < nodes; i++) mix((uint64_t)nid[y][i]);
					for (int64_t i = 0; i < 2 * edges; i++) mix((uint64_t)ei[y][i]);
					for (int64_t i = 0; i < edges; i++) mix((uint64_t)eid[y][i]);
				}
				for (auto c : counts[y]) mix((uint64_t)c);
				const int64_t n = (int64_t)seeds[y].size();
				put((int64_t)bkeys[y]);
				put(n);
				for (auto x : seeds[y]) put(x);
				put((int64_t)h);
				printf("fanouts");
				for (int f : fan) printf(" %d", f);
				printf(" call of %d (width %d), lane %d: key %llu, %lld seeds, %lld nodes, %lld edges, hash %016llx, table entries left %lld\n",
				       used, w, y, (unsigned long long)bkeys[y], (long long)n, (long long)nodes, (long long)edges, (unsigned long long)h,
				       (long long)dirty);
			}
		}
	}
	fclose(dump);
	return 0;
}
