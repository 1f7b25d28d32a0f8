// Package pinned owns the host feature store: the feature table copied once into
// 2 MiB-aligned, huge-page backed memory (Alloc, Load, FromAlloc), registered
// with the CUDA driver once (cuMemHostRegister, portable and device-mapped) and
// shared by every GPU context of the process. Without a GPU it is plain aligned
// memory.
//
// A Store's Rows may be read from any number of goroutines and by GPU kernels
// through DevicePtr; Close (unregister and unmap) must not race with any use.
package pinned
