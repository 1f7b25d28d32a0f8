//go:build cgo && !nocuda

// The function-pointer table behind cu.h. Every symbol is resolved when the
// library is opened; a missing one is reported by name and nothing is kept.
#include <dlfcn.h>
#include <stdio.h>
#include "cu.h"

static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDriverGetVersion)(int *);
static CUresult (*p_cuGetErrorName)(CUresult, const char **);
static CUresult (*p_cuGetErrorString)(CUresult, const char **);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetAttribute)(int *, int, CUdevice);
static CUresult (*p_cuDeviceGetName)(char *, int, CUdevice);
static CUresult (*p_cuDeviceGetPCIBusId)(char *, int, CUdevice);
static CUresult (*p_cuDeviceTotalMem)(size_t *, CUdevice);
static CUresult (*p_cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuCtxGetCurrent)(CUcontext *);
static CUresult (*p_cuCtxSynchronize)(void);
static CUresult (*p_cuCtxEnablePeerAccess)(CUcontext, unsigned int);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned int);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuStreamQuery)(CUstream);
static CUresult (*p_cuStreamDestroy)(CUstream);
static CUresult (*p_cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
// Optional (older drivers name it without _v2; NULL: not supported).
static CUresult (*p_cuStreamWriteValue32)(CUstream, CUdeviceptr, uint32_t, unsigned int);
// Optional too (graphs: NULL where the driver lacks them).
static CUresult (*p_cuStreamBeginCapture)(CUstream, int);
static CUresult (*p_cuStreamEndCapture)(CUstream, CUgraph *);
static CUresult (*p_cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
static CUresult (*p_cuGraphLaunch)(CUgraphExec, CUstream);
static CUresult (*p_cuGraphDestroy)(CUgraph);
static CUresult (*p_cuGraphExecDestroy)(CUgraphExec);
static CUresult (*p_cuEventCreate)(CUevent *, unsigned int);
static CUresult (*p_cuEventRecord)(CUevent, CUstream);
static CUresult (*p_cuEventSynchronize)(CUevent);
static CUresult (*p_cuEventQuery)(CUevent);
static CUresult (*p_cuEventElapsedTime)(float *, CUevent, CUevent);
static CUresult (*p_cuEventDestroy)(CUevent);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemGetInfo)(size_t *, size_t *);
static CUresult (*p_cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
static CUresult (*p_cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
static CUresult (*p_cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
static CUresult (*p_cuMemHostRegister)(void *, size_t, unsigned int);
static CUresult (*p_cuMemHostUnregister)(void *);
static CUresult (*p_cuMemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned int);
static CUresult (*p_cuModuleLoadData)(CUmodule *, const void *);
static CUresult (*p_cuModuleUnload)(CUmodule);
static CUresult (*p_cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int,
                                    unsigned int, unsigned int, unsigned int,
                                    unsigned int, CUstream, void **, void **);
static CUresult (*p_cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
static CUresult (*p_cuIpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
static CUresult (*p_cuIpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle, unsigned int);
static CUresult (*p_cuIpcCloseMemHandle)(CUdeviceptr);
static CUresult (*p_cuIpcGetEventHandle)(CUipcEventHandle *, CUevent);
static CUresult (*p_cuIpcOpenEventHandle)(CUevent *, CUipcEventHandle);

// The symbols, with the versioned entry points where the driver has them
// (the unversioned names keep the old ABI).
#define SYM(ptr, name) {(void **)&ptr, name}
static const struct { void **ptr; const char *name; } syms[] = {
	SYM(p_cuInit, "cuInit"),
	SYM(p_cuDriverGetVersion, "cuDriverGetVersion"),
	SYM(p_cuGetErrorName, "cuGetErrorName"),
	SYM(p_cuGetErrorString, "cuGetErrorString"),
	SYM(p_cuDeviceGetCount, "cuDeviceGetCount"),
	SYM(p_cuDeviceGet, "cuDeviceGet"),
	SYM(p_cuDeviceGetAttribute, "cuDeviceGetAttribute"),
	SYM(p_cuDeviceGetName, "cuDeviceGetName"),
	SYM(p_cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId"),
	SYM(p_cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
	SYM(p_cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer"),
	SYM(p_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
	SYM(p_cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
	SYM(p_cuCtxSetCurrent, "cuCtxSetCurrent"),
	SYM(p_cuCtxGetCurrent, "cuCtxGetCurrent"),
	SYM(p_cuCtxSynchronize, "cuCtxSynchronize"),
	SYM(p_cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess"),
	SYM(p_cuStreamCreate, "cuStreamCreate"),
	SYM(p_cuStreamSynchronize, "cuStreamSynchronize"),
	SYM(p_cuStreamQuery, "cuStreamQuery"),
	SYM(p_cuStreamDestroy, "cuStreamDestroy_v2"),
	SYM(p_cuStreamWaitEvent, "cuStreamWaitEvent"),
	SYM(p_cuEventCreate, "cuEventCreate"),
	SYM(p_cuEventRecord, "cuEventRecord"),
	SYM(p_cuEventSynchronize, "cuEventSynchronize"),
	SYM(p_cuEventQuery, "cuEventQuery"),
	SYM(p_cuEventElapsedTime, "cuEventElapsedTime"),
	SYM(p_cuEventDestroy, "cuEventDestroy_v2"),
	SYM(p_cuMemAlloc, "cuMemAlloc_v2"),
	SYM(p_cuMemFree, "cuMemFree_v2"),
	SYM(p_cuMemGetInfo, "cuMemGetInfo_v2"),
	SYM(p_cuMemsetD8Async, "cuMemsetD8Async"),
	SYM(p_cuMemsetD32Async, "cuMemsetD32Async"),
	SYM(p_cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
	SYM(p_cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
	SYM(p_cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
	SYM(p_cuMemcpyPeerAsync, "cuMemcpyPeerAsync"),
	SYM(p_cuMemHostRegister, "cuMemHostRegister_v2"),
	SYM(p_cuMemHostUnregister, "cuMemHostUnregister"),
	SYM(p_cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
	SYM(p_cuModuleLoadData, "cuModuleLoadData"),
	SYM(p_cuModuleUnload, "cuModuleUnload"),
	SYM(p_cuModuleGetFunction, "cuModuleGetFunction"),
	SYM(p_cuLaunchKernel, "cuLaunchKernel"),
	SYM(p_cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
	SYM(p_cuIpcGetMemHandle, "cuIpcGetMemHandle"),
	SYM(p_cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2"),
	SYM(p_cuIpcCloseMemHandle, "cuIpcCloseMemHandle"),
	SYM(p_cuIpcGetEventHandle, "cuIpcGetEventHandle"),
	SYM(p_cuIpcOpenEventHandle, "cuIpcOpenEventHandle"),
};

// The optional graph entry points (NULL where the driver lacks any of them).
static const struct { void **ptr; const char *name; } graph_syms[] = {
	SYM(p_cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
	SYM(p_cuStreamEndCapture, "cuStreamEndCapture"),
	SYM(p_cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
	SYM(p_cuGraphLaunch, "cuGraphLaunch"),
	SYM(p_cuGraphDestroy, "cuGraphDestroy"),
	SYM(p_cuGraphExecDestroy, "cuGraphExecDestroy"),
};

// CALL calls a resolved driver entry point, or says the driver is not
// loaded: a call before Init, or after Init failed to load the library, is
// an error, not a jump to a null pointer.
#define GNN_NOT_INITIALIZED 3 /* CUDA_ERROR_NOT_INITIALIZED (codeNotInitialized in Go) */
#define GNN_NOT_SUPPORTED 801 /* CUDA_ERROR_NOT_SUPPORTED */
#define CALL(p, ...) ((p) != NULL ? (p)(__VA_ARGS__) : GNN_NOT_INITIALIZED)
// OPTIONAL calls an optional entry point: not supported where the driver is
// loaded without it, not initialised where no driver is loaded.
#define OPTIONAL(p, ...) ((p) != NULL ? (p)(__VA_ARGS__) : p_cuStreamWaitEvent != NULL ? GNN_NOT_SUPPORTED : GNN_NOT_INITIALIZED)

int gnn_cu_load(const char *path, char *err, size_t errlen) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "dlopen %s: %s", path, e ? e : "unknown error");
		return 1;
	}
	void *found[sizeof syms / sizeof syms[0]];
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		dlerror();
		found[i] = dlsym(h, syms[i].name);
		if (found[i] == NULL) {
			snprintf(err, errlen, "%s has no symbol %s", path, syms[i].name);
			dlclose(h);
			return 2;
		}
	}
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) *syms[i].ptr = found[i];
	p_cuStreamWriteValue32 = dlsym(h, "cuStreamWriteValue32_v2");
	if (p_cuStreamWriteValue32 == NULL) p_cuStreamWriteValue32 = dlsym(h, "cuStreamWriteValue32");
	// Graphs, all or none.
	void *g[sizeof graph_syms / sizeof graph_syms[0]];
	int all = 1;
	for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) all = all && (g[i] = dlsym(h, graph_syms[i].name)) != NULL;
	for (size_t i = 0; all && i < sizeof g / sizeof g[0]; i++) *graph_syms[i].ptr = g[i];
	return 0;
}

CUresult gnn_cuInit(unsigned int f) { return CALL(p_cuInit, f); }
CUresult gnn_cuDriverGetVersion(int *v) { return CALL(p_cuDriverGetVersion, v); }
CUresult gnn_cuGetErrorName(CUresult e, const char **s) { return CALL(p_cuGetErrorName, e, s); }
CUresult gnn_cuGetErrorString(CUresult e, const char **s) { return CALL(p_cuGetErrorString, e, s); }
CUresult gnn_cuDeviceGetCount(int *n) { return CALL(p_cuDeviceGetCount, n); }
CUresult gnn_cuDeviceGet(CUdevice *d, int o) { return CALL(p_cuDeviceGet, d, o); }
CUresult gnn_cuDeviceGetAttribute(int *v, int a, CUdevice d) { return CALL(p_cuDeviceGetAttribute, v, a, d); }
CUresult gnn_cuDeviceGetName(char *n, int l, CUdevice d) { return CALL(p_cuDeviceGetName, n, l, d); }
CUresult gnn_cuDeviceGetPCIBusId(char *n, int l, CUdevice d) { return CALL(p_cuDeviceGetPCIBusId, n, l, d); }
CUresult gnn_cuDeviceTotalMem(size_t *b, CUdevice d) { return CALL(p_cuDeviceTotalMem, b, d); }
CUresult gnn_cuDeviceCanAccessPeer(int *c, CUdevice d, CUdevice p) { return CALL(p_cuDeviceCanAccessPeer, c, d, p); }
CUresult gnn_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { return CALL(p_cuDevicePrimaryCtxRetain, c, d); }
CUresult gnn_cuDevicePrimaryCtxRelease(CUdevice d) { return CALL(p_cuDevicePrimaryCtxRelease, d); }
CUresult gnn_cuCtxSetCurrent(CUcontext c) { return CALL(p_cuCtxSetCurrent, c); }
CUresult gnn_cuCtxGetCurrent(CUcontext *c) { return CALL(p_cuCtxGetCurrent, c); }
CUresult gnn_cuCtxSynchronize(void) { return p_cuCtxSynchronize != NULL ? p_cuCtxSynchronize() : GNN_NOT_INITIALIZED; }
CUresult gnn_cuCtxEnablePeerAccess(CUcontext p, unsigned int f) { return CALL(p_cuCtxEnablePeerAccess, p, f); }
CUresult gnn_cuStreamCreate(CUstream *s, unsigned int f) { return CALL(p_cuStreamCreate, s, f); }
CUresult gnn_cuStreamSynchronize(CUstream s) { return CALL(p_cuStreamSynchronize, s); }
CUresult gnn_cuStreamQuery(CUstream s) { return CALL(p_cuStreamQuery, s); }
CUresult gnn_cuStreamDestroy(CUstream s) { return CALL(p_cuStreamDestroy, s); }
CUresult gnn_cuStreamWaitEvent(CUstream s, CUevent e, unsigned int f) { return CALL(p_cuStreamWaitEvent, s, e, f); }
CUresult gnn_cuStreamWriteValue32(CUstream s, CUdeviceptr addr, uint32_t v, unsigned int f) {
	return OPTIONAL(p_cuStreamWriteValue32, s, addr, v, f);
}
CUresult gnn_cuStreamBeginCapture(CUstream s, int mode) { return OPTIONAL(p_cuStreamBeginCapture, s, mode); }
CUresult gnn_cuStreamEndCapture(CUstream s, CUgraph *g) { return OPTIONAL(p_cuStreamEndCapture, s, g); }
CUresult gnn_cuGraphInstantiate(CUgraphExec *e, CUgraph g) { return OPTIONAL(p_cuGraphInstantiateWithFlags, e, g, 0); }
CUresult gnn_cuGraphLaunch(CUgraphExec e, CUstream s) { return OPTIONAL(p_cuGraphLaunch, e, s); }
CUresult gnn_cuGraphDestroy(CUgraph g) { return OPTIONAL(p_cuGraphDestroy, g); }
CUresult gnn_cuGraphExecDestroy(CUgraphExec e) { return OPTIONAL(p_cuGraphExecDestroy, e); }
CUresult gnn_cuEventCreate(CUevent *e, unsigned int f) { return CALL(p_cuEventCreate, e, f); }
CUresult gnn_cuEventRecord(CUevent e, CUstream s) { return CALL(p_cuEventRecord, e, s); }
CUresult gnn_cuEventSynchronize(CUevent e) { return CALL(p_cuEventSynchronize, e); }
CUresult gnn_cuEventQuery(CUevent e) { return CALL(p_cuEventQuery, e); }
CUresult gnn_cuEventElapsedTime(float *ms, CUevent a, CUevent b) { return CALL(p_cuEventElapsedTime, ms, a, b); }
CUresult gnn_cuEventDestroy(CUevent e) { return CALL(p_cuEventDestroy, e); }
CUresult gnn_cuMemAlloc(CUdeviceptr *p, size_t n) { return CALL(p_cuMemAlloc, p, n); }
CUresult gnn_cuMemFree(CUdeviceptr p) { return CALL(p_cuMemFree, p); }
CUresult gnn_cuMemGetInfo(size_t *f, size_t *t) { return CALL(p_cuMemGetInfo, f, t); }
CUresult gnn_cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) { return CALL(p_cuMemsetD8Async, p, v, n, s); }
CUresult gnn_cuMemsetD32Async(CUdeviceptr p, unsigned int v, size_t n, CUstream s) { return CALL(p_cuMemsetD32Async, p, v, n, s); }
CUresult gnn_cuMemcpyHtoDAsync(CUdeviceptr d, const void *h, size_t n, CUstream s) { return CALL(p_cuMemcpyHtoDAsync, d, h, n, s); }
CUresult gnn_cuMemcpyDtoHAsync(void *h, CUdeviceptr d, size_t n, CUstream s) { return CALL(p_cuMemcpyDtoHAsync, h, d, n, s); }
CUresult gnn_cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr x, size_t n, CUstream s) { return CALL(p_cuMemcpyDtoDAsync, d, x, n, s); }
CUresult gnn_cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr x, CUcontext xc, size_t n, CUstream s) { return CALL(p_cuMemcpyPeerAsync, d, dc, x, xc, n, s); }
CUresult gnn_cuMemHostRegister(void *p, size_t n, unsigned int f) { return CALL(p_cuMemHostRegister, p, n, f); }
CUresult gnn_cuMemHostUnregister(void *p) { return CALL(p_cuMemHostUnregister, p); }
CUresult gnn_cuMemHostGetDevicePointer(CUdeviceptr *d, void *p, unsigned int f) { return CALL(p_cuMemHostGetDevicePointer, d, p, f); }
CUresult gnn_cuModuleLoadData(CUmodule *m, const void *img) { return CALL(p_cuModuleLoadData, m, img); }
CUresult gnn_cuModuleUnload(CUmodule m) { return CALL(p_cuModuleUnload, m); }
CUresult gnn_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *n) { return CALL(p_cuModuleGetFunction, f, m, n); }
CUresult gnn_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                            unsigned int bx, unsigned int by, unsigned int bz,
                            unsigned int shmem, CUstream s, void **params, void **extra) {
	return CALL(p_cuLaunchKernel, f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}
CUresult gnn_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int b, size_t sh) { return CALL(p_cuOccupancyMaxActiveBlocksPerMultiprocessor, n, f, b, sh); }
CUresult gnn_cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) { return CALL(p_cuIpcGetMemHandle, h, p); }
CUresult gnn_cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle *h, unsigned int f) { return CALL(p_cuIpcOpenMemHandle, p, *h, f); }
CUresult gnn_cuIpcCloseMemHandle(CUdeviceptr p) { return CALL(p_cuIpcCloseMemHandle, p); }
CUresult gnn_cuIpcGetEventHandle(CUipcEventHandle *h, CUevent e) { return CALL(p_cuIpcGetEventHandle, h, e); }
CUresult gnn_cuIpcOpenEventHandle(CUevent *e, CUipcEventHandle *h) { return CALL(p_cuIpcOpenEventHandle, e, *h); }
