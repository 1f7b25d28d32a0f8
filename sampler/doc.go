// Package sampler owns uniform neighbour sampling without replacement over a
// CSR graph (datasets.Graph, 32- or 64-bit indices): per-hop unique nodes in
// hop order (seeds first), per-hop sampled edges in local ids, and the
// address-order permutation the gather needs. It also owns epochs: per-epoch
// shuffles from (seed, epoch), the split of seeds across ranks, and batch
// numbering that makes batch i of epoch e on rank r the same bytes whatever
// the number of goroutines.
//
// # Sampling
//
// New(g, Options{Fanouts, Workers}) checks the fanouts (1 to 8 hops, each -1
// for "every neighbour" or >= 1). Sample(seeds, key, out) fills a Batch the
// way PyG's NeighborLoader lays one out:
//
//   - NID: the seeds first, in seed order and kept as given (a repeated seed
//     keeps its place; its later copies map to the first one), then the nodes
//     first reached at hop 1, hop 2, ..., each hop's new nodes in the order
//     of their first appearance in that hop's edges.
//   - Hop h samples from the nodes added at hop h-1 (the seeds for hop 1;
//     a repeated seed samples again, with its own draws).
//     A node whose degree is at most the fanout contributes every neighbour,
//     in row order; otherwise exactly fanout distinct row positions, every
//     fanout-subset equally likely (Floyd's algorithm, in the order it
//     inserts them). Distinctness is by row position: a graph that stores a
//     neighbour twice in one row can yield it twice.
//   - Src, Dst: edge e carries a message from Src[e] (the sampled
//     neighbour) to Dst[e] (the node that sampled it), both local ids into
//     NID. Edges are grouped by hop, then by Dst in frontier order, then in
//     sampling order. NumSampledNodes (hops+1 entries, hop 0 = len(seeds))
//     and NumSampledEdges (hops entries) count them per hop.
//   - Order: the local ids sorted by global id (ascending; repeated seeds by
//     local id), the order in which the gather reads feature rows.
//
// # Determinism
//
// Every random choice of a node comes from a SplitMix64 stream seeded by
// (key, hop, position of the node in its hop's frontier) and from nothing
// else; local ids are assigned by first occurrence in edge order. So the
// same graph, fanouts, seeds and key give the same bytes whatever
// Options.Workers, GOMAXPROCS or the scheduling. TestDifferential checks the
// parallel implementation byte for byte against a deliberately simple
// reference (reference_test.go) that shares only this RNG contract.
//
// # Concurrency and ownership
//
// A Sampler is safe for concurrent use: any number of goroutines may call
// Sample at once, each with its own Batch. One Sample call uses up to
// Options.Workers goroutines (itself plus package-wide helper goroutines,
// started once and idle on a channel when there is no work). The Sampler
// keeps a pool of per-call working memory (hash tables, edge buffers), one
// per concurrent call at its peak, for its lifetime. The graph must not
// change while a Sampler uses it.
//
// A Batch belongs to the caller. Sample resets it and reuses its slices'
// capacity, so a caller that reuses Batches (and a Sampler in steady state)
// allocates nothing per batch. The slices stay valid until the next Sample
// or Reset on that Batch.
//
// # Heterogeneous graphs
//
// NewHetero(h, HeteroOptions{Fanouts, Workers}) samples a datasets.Hetero
// the way PyG's heterogeneous NeighborSampler does (directed, not
// disjoint): fanouts per hop and edge type, one node set per node type
// (the input type's seeds first), each hop's dst frontier drawing from its
// edge types in the dataset's order with the same draws as Sample (every
// neighbour, or Floyd's algorithm) from a stream keyed by (key, hop, edge
// type, position). hetero.go states the rules; TestHeteroDifferential
// checks the parallel implementation against a map-based reference.
//
// # Disjoint and temporal sampling
//
// NewDisjoint(g, DisjointOptions{...}) samples PyG's disjoint subgraphs, one
// per seed, into a DisjointBatch (a Batch and PyG's batch vector), and with
// NodeTime or EdgeTime PyG's temporal sampling (always disjoint): every node
// of a subgraph only reaches neighbours (node times) or edges (edge times)
// no later than its seed's time, drawn uniformly or the most recent ones
// ("last"). Disjoint's documentation has the layout and the rules;
// TestDisjointDifferential checks it byte for byte against a reference
// written the way PyG's sampler works (disjoint_ref_test.go).
//
// # Epochs
//
// NewPlan(seeds, EpochConfig, epoch) reproduces PyTorch's
// DistributedSampler followed by a DataLoader's batching, for one rank:
//
//  1. Order: the seeds as given, or, when Shuffle, a Fisher-Yates
//     permutation driven by a SplitMix64 stream seeded from (Seed, epoch)
//     (not torch.randperm's stream: the same idea, different numbers).
//  2. Size: with DropLast the list is cut to the largest multiple of
//     WorldSize (each rank gets floor(N/WorldSize) seeds); otherwise it is
//     padded by repeating it from the start (cyclically when the padding is
//     longer than the list) to ceil(N/WorldSize)*WorldSize, so every rank
//     gets ceil(N/WorldSize) seeds.
//  3. Split: rank r takes positions r, r+WorldSize, r+2*WorldSize, ...
//  4. Batch: consecutive BatchSize seeds of the rank's list; the last batch
//     is smaller, or dropped when DropLast.
//
// Every rank of an epoch therefore has the same NumBatches. Key(i) is the
// sampling key of batch i: a hash of (Seed, epoch, i*WorldSize+Rank), the
// batch's position in the epoch's global batch order, so no two batches of
// an epoch share a key and batch i of epoch e on rank r is the same bytes on
// any machine, with any number of workers, in any completion order.
// TestPlanMatchesDistributedSampler checks steps 2-4 against a line-by-line
// transcription of PyTorch's code.
//
// # Benchmarks
//
// BenchmarkSample (papers100M-shaped graph from datasets.Generate, scale
// GNNLOADER_BENCH_SCALE, default 0.01) and internal/bench/samplerbench (what
// `loaderd bench sample` prints) report sampled edges/s, batches/s and unique
// nodes per batch for one worker, for all workers inside one batch, and for
// as many batches in flight as workers.
package sampler
