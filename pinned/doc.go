// Package pinned owns the host feature store: the feature table copied once into
// 2 MiB-aligned, huge-page backed memory, registered with the CUDA driver once
// and shared by every GPU context of the process.
package pinned
