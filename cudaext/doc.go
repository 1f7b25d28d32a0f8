// Package cudaext owns gnnloader's access to the GPU: the CUDA driver API loaded
// at run time with dlopen (no toolkit at build time), NVML for device facts
// (Info), and the CUDA kernels with their build stamp (GatherImage,
// CheckKernelStamp; built by scripts/build-kernels.sh).
//
// Init loads libcuda.so.1 once; without it every call returns an error that
// wraps ErrNoDriver, so callers fall back to their CPU path. Driver status codes
// become *Error values that match ErrNoDevice, ErrOutOfMemory and ErrNoDriver.
//
// Builds: the driver and NVML calls need cgo. Each topic's calls come as a
// file pair with mirror-image build lines, X_cuda.go (cgo && !nocuda) and
// X_nocuda.go (!cgo || nocuda), beside X.go for what both builds share. The
// nocuda build (CGO_ENABLED=0, or -tags nocuda to force it) has the same API
// (TestNoCUDAMirrorsCUDA checks it): every call that needs the driver returns
// an error wrapping ErrNoDriver that says the binary was built without CUDA
// (nocuda), and releasing a handle, which cannot exist there, does nothing.
// So the CPU path builds and runs without a C toolchain.
//
// Concurrency: the package functions may be called from any goroutine, but
// most work in the context current on the calling OS thread: use
// (*Context).Do, which locks the goroutine to its thread and sets the context.
// Streams and events may be used from several goroutines; the driver orders
// their work. Memory from MemAlloc, streams, events and modules are owned by
// whoever made them and are released by their Free/Destroy/Unload.
package cudaext
