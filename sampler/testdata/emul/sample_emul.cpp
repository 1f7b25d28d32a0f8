// cudaext/kernels/sample.cu's whole batch run on the CPU (cuda_emul.h),
// launched in the order sampler/gpu.go enqueues it, several batches in a row
// on one sampler's working memory, for fanouts below and above the degrees,
// every neighbour (-1), more than 32 draws and a repeated seed. It writes
// its graph, each case's fanouts and each batch's key, seeds and hash (of
// n_id, edge_index, edge ids and counts) to FILE, and a line per batch to
// stdout; sampler's TestKernelsEmulatedMatchCPU samples the same batches
// with the CPU sampler and compares the hashes. MODE: kernel (the table
// emptied by gnn_reset_find and gnn_reset) or memset (emptied whole).
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

struct Sampler {
	std::vector<int> fanouts;
	int64_t maxBatch, nodeCap = 0, edgeCap = 0, maxFront = 0, maxHop = 0, scanBlocks = 0, mask = 0;
	std::vector<int64_t> frontierCap, hopEdgeCap;
	std::vector<int64_t> keys, slot, nbr, blockSums;
	std::vector<int32_t> localid, firstpos, dst, cnt, off, flag, newid, ent;
	SampleArgs args{};
	unsigned sms = 2;
	unsigned grid(int64_t n) const { return (unsigned)std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, 8 * sms)); }
};

static int64_t table_entries(int64_t nodes) {
	int64_t n = 1024;
	while (n < 2 * nodes) n *= 2;
	return n;
}

static void clear_table(Sampler &s) {
	std::fill(s.keys.begin(), s.keys.end(), -1);
	std::fill(s.localid.begin(), s.localid.end(), -1);
	std::fill(s.firstpos.begin(), s.firstpos.end(), NOT_SEEN);
}

static void scan(Sampler &s, int32_t *a, int32_t *out, int nAt, int64_t capN, int totalAt) {
	const int64_t nb = std::max<int64_t>((capN + SCAN_BLOCK - 1) / SCAN_BLOCK, 1);
	emul_launch((unsigned)nb, 256, true, gnn_scan_block, (const int32_t *)a, (const SampleArgs *)&s.args, nAt, out, s.blockSums.data());
	emul_launch((unsigned)nb, 256, true, gnn_scan_sum_add, (const SampleArgs *)&s.args, nAt, (const int64_t *)s.blockSums.data(), out,
	            totalAt);
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
	const uint64_t batches = 4;
	if (dump) {
		put(N);
		put(E);
		for (auto x : indptr) put(x);
		for (auto x : indices) put(x);
		put((int64_t)cases.size());
	}
	for (const auto &fan : cases) {
		if (dump) {
			put((int64_t)fan.size());
			for (int f : fan) put(f);
			put((int64_t)batches);
		}
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
		const int64_t entries = table_entries(s.nodeCap);
		s.mask = entries - 1;
		s.scanBlocks = (std::max(s.maxFront, s.maxHop) + SCAN_BLOCK - 1) / SCAN_BLOCK;
		s.keys.assign(entries, 0);
		s.localid.assign(entries, 0);
		s.firstpos.assign(entries, 0);
		clear_table(s);
		s.slot.assign(std::max<int64_t>(s.nodeCap, 2), 0);
		s.nbr.assign(std::max<int64_t>(s.edgeCap, 2), 0);
		s.dst.assign(std::max<int64_t>(s.edgeCap, 2), 0);
		s.cnt.assign(std::max<int64_t>(s.maxFront, 2), 0);
		s.off.assign(std::max<int64_t>(s.maxFront, 2), 0);
		s.flag.assign(std::max<int64_t>(s.maxHop, 2), 0);
		s.newid.assign(std::max<int64_t>(s.maxHop, 2), 0);
		s.ent.assign(std::max<int64_t>(s.maxHop, 2), 0);
		s.blockSums.assign(std::max<int64_t>(s.scanBlocks, 2), 0);
		std::vector<int64_t> nid(s.nodeCap), ei(2 * std::max<int64_t>(s.edgeCap, 1)), eid(std::max<int64_t>(s.edgeCap, 1)),
			counts(2 * H + 4);
		const int scratch = 2 * H + 3;
		for (uint64_t key = 0; key < batches; key++) {
			int64_t n = key % 2 ? s.maxBatch / 2 + 1 : s.maxBatch;
			std::vector<int64_t> seeds(n);
			for (auto &x : seeds) x = (int64_t)(rnd() % N);
			if (n > 3) seeds[n - 1] = seeds[0]; // a repeated seed keeps its place
			std::fill(nid.begin(), nid.end(), -9);
			std::fill(ei.begin(), ei.end(), -9);
			std::fill(eid.begin(), eid.end(), -9);
			const uint64_t bkey = key * 7919 + 3;
			emul_launch(s.grid(n), 256, false, gnn_seeds, (const int64_t *)seeds.data(), n, bkey, nid.data(), ei.data(), eid.data(),
			            counts.data(), s.keys.data(), s.mask, s.firstpos.data(), &s.args);
			const SampleArgs *a = &s.args;
			emul_launch(s.grid(s.maxBatch), 256, false, gnn_seed_ids, a, (const int64_t *)s.keys.data(), s.mask, s.localid.data(),
			            (const int32_t *)s.firstpos.data());
			for (int h = 0; h < H; h++) {
				const int hop = h + 1, edgesAt = 3 + H + h, k = fan[h];
				const int64_t fc = s.frontierCap[h], ec = s.hopEdgeCap[h];
				emul_launch(s.grid(fc), 256, false, gnn_degrees, (const int64_t *)indptr.data(), a, hop, k, s.cnt.data());
				scan(s, s.cnt.data(), s.off.data(), 2 + h, fc, edgesAt);
				emul_launch(s.grid(fc), 256, false, gnn_draw32, (const int64_t *)indptr.data(), (const int32_t *)indices.data(), a, hop, k,
				            (const int32_t *)s.off.data(), s.nbr.data(), s.dst.data());
				emul_launch(s.grid(ec), 256, false, gnn_first, a, hop, H, (const int64_t *)s.nbr.data(), s.keys.data(), s.mask,
				            (const int32_t *)s.localid.data(), s.firstpos.data(), s.ent.data());
				emul_launch(s.grid(ec), 256, false, gnn_flag_first, a, hop, H, (const int32_t *)s.ent.data(),
				            (const int32_t *)s.localid.data(), (const int32_t *)s.firstpos.data(), s.flag.data());
				scan(s, s.flag.data(), s.newid.data(), edgesAt, ec, scratch);
				emul_launch(s.grid(ec), 256, false, gnn_assign, a, hop, H, (const int64_t *)s.nbr.data(), (const int32_t *)s.flag.data(),
				            (const int32_t *)s.newid.data(), (const int32_t *)s.ent.data(), s.localid.data());
				emul_launch(s.grid(ec), 256, false, gnn_resolve, a, hop, H, (const int32_t *)s.ent.data(),
				            (const int32_t *)s.localid.data());
				emul_launch(1, 1, false, gnn_end_hop, a, hop, H, scratch);
			}
			emul_launch(s.grid(s.edgeCap), 256, false, gnn_pack, a, (const int32_t *)s.dst.data());
			if (memsetReset) {
				clear_table(s);
			} else {
				emul_launch(s.grid(s.nodeCap), 256, false, gnn_reset_find, a, (const int64_t *)s.keys.data(), s.mask, s.slot.data());
				emul_launch(s.grid(s.nodeCap), 256, false, gnn_reset, a, (const int64_t *)s.slot.data(), s.keys.data(), s.localid.data(),
				            s.firstpos.data());
			}
			// The table must be empty again for the next batch.
			int64_t dirty = 0;
			for (int64_t i = 0; i < entries; i++) dirty += s.keys[i] != -1 || s.localid[i] != -1 || s.firstpos[i] != NOT_SEEN;
			const int64_t nodes = counts[0], edges = counts[1];
			uint64_t h = 1469598103934665603ull;
			auto mix = [&](uint64_t x) { h = (h ^ x) * 1099511628211ull; };
			for (int64_t i = 0; i < nodes; i++) mix((uint64_t)nid[i]);
			for (int64_t i = 0; i < 2 * edges; i++) mix((uint64_t)ei[i]);
			for (int64_t i = 0; i < edges; i++) mix((uint64_t)eid[i]);
			for (auto c : counts) mix((uint64_t)c);
			if (dump) {
				put((int64_t)bkey);
				put(n);
				for (auto x : seeds) put(x);
				put((int64_t)h);
			}
			printf("fanouts");
			for (int f : fan) printf(" %d", f);
			printf(" batch %llu: %lld seeds, %lld nodes, %lld edges, hash %016llx, table entries left %lld\n", (unsigned long long)key,
			       (long long)n, (long long)nodes, (long long)edges, (unsigned long long)h, (long long)dirty);
		}
	}
	if (dump) fclose(dump);
	return 0;
}
