// Package datasets owns gnnloader's on-disk dataset format and everything that
// produces it: the synthetic generators and the importers for gnn-benchmark
// .npz files and OGB node-property, link-property and heterogeneous raw
// layouts.
//
// A dataset is a directory holding manifest.json, its checksum
// manifest.json.xxh64, and one Arrow IPC file per array (CSR indptr and
// indices, features, labels, split node ids; optionally per-edge arrays in
// CSR order, node and edge times, and link splits). The manifest records
// every file's size and xxhash64-tree checksum. A heterogeneous dataset
// (format_version 2, Hetero) has one CSR per edge type and features,
// labels and splits per node type; Open returns one only with
// OpenOptions.AllowHetero. docs/datasets.md describes the format; row v of
// a CSR lists the nodes v aggregates from (EdgeDirection).
//
// Open reads each file once into private anonymous memory (in parallel
// chunks, each hashed as it is read, so a checksum covers exactly the bytes
// served) and checks it: the manifest's checksum and bounds (every count
// must fit the size of the file that holds it), each Arrow file's structure
// before arrow-go parses it (arrowcheck.go), and the ranges of every id. An
// open Dataset does not depend on its files: truncating or overwriting them
// changes nothing it serves. Its slices are valid until Close. The feature
// rows start on a 2 MiB boundary and may be read into the caller's memory
// (OpenOptions.AllocFeatures: the GPU path reads them straight into pinned
// memory); that memory is the caller's once Open succeeds. Verify checks a
// dataset without keeping its feature table in memory.
//
// Malformed input is an error naming the file and what is wrong, never a
// panic: the only recover is at the arrow-go boundary (readColumn), as a
// last line of defence behind the structure check. A manifest without a
// checksum (a dataset written before it existed) opens with a warning in
// Manifest.Warnings.
//
// Write builds a dataset in a temporary directory and renames it into place,
// so a failed write leaves nothing behind; it hashes each file as it writes
// it. With Overwrite it replaces only a dataset directory, in one atomic
// rename exchange, and never deletes the only copy of a dataset
// (overwrite.go).
//
// Functions here are safe for concurrent use on distinct values; an open
// Dataset is read-only and may be shared by any number of goroutines.
package datasets
