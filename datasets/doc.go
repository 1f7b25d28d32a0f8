// Package datasets owns gnnloader's on-disk dataset format and everything that
// produces it: the synthetic generators and the importers for gnn-benchmark
// .npz files and OGB node-property raw layouts.
//
// A dataset is a directory holding manifest.json and one Arrow IPC file per
// array (CSR indptr and indices, features, labels, split node ids). Open maps
// the files and reads them zero-copy; the slices of an open Dataset alias the
// mappings and are valid until Close. Write builds a dataset in a temporary
// directory and renames it into place, so a failed write leaves nothing behind.
//
// Functions here are safe for concurrent use on distinct values; an open
// Dataset is read-only and may be shared by any number of goroutines.
package datasets
