// Package cudaext owns gnnloader's access to the GPU: the CUDA driver API loaded
// at run time with dlopen (no toolkit at build time), NVML for device facts,
// and the CUDA kernels with their build stamp.
package cudaext
