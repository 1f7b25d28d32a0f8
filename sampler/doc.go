// Package sampler owns uniform neighbour sampling without replacement over a
// CSR graph: per-hop unique nodes in hop order (seeds first), per-hop sampled
// edges in local ids, and the address-order permutation the gather needs. It
// also owns epochs: per-epoch shuffles from (seed, epoch), the split of seeds
// across ranks, and batch numbering that makes batch i of epoch e on rank r
// the same bytes whatever the number of goroutines.
package sampler
