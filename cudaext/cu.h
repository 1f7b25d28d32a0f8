//go:build cgo && !nocuda

// Our own prototypes for the parts of the CUDA driver API that gnnloader uses.
// No CUDA header is needed at build time: libcuda.so.1 is opened with dlopen
// and every symbol is resolved when it is opened (gnn_cu_load).
#ifndef GNNLOADER_CU_H
#define GNNLOADER_CU_H
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUgraph;
typedef void *CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;
typedef struct { char reserved[64]; } CUipcEventHandle;

// gnn_cu_load opens path and resolves every symbol. It returns 0 on success;
// otherwise it writes a message naming the library or symbol into err.
int gnn_cu_load(const char *path, char *err, size_t errlen);

CUresult gnn_cuInit(unsigned int flags);
CUresult gnn_cuDriverGetVersion(int *v);
CUresult gnn_cuGetErrorName(CUresult e, const char **s);
CUresult gnn_cuGetErrorString(CUresult e, const char **s);
CUresult gnn_cuDeviceGetCount(int *n);
CUresult gnn_cuDeviceGet(CUdevice *d, int ordinal);
CUresult gnn_cuDeviceGetAttribute(int *v, int attr, CUdevice d);
CUresult gnn_cuDeviceGetName(char *name, int len, CUdevice d);
CUresult gnn_cuDeviceGetPCIBusId(char *id, int len, CUdevice d);
CUresult gnn_cuDeviceTotalMem(size_t *bytes, CUdevice d);
CUresult gnn_cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer);
CUresult gnn_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d);
CUresult gnn_cuDevicePrimaryCtxRelease(CUdevice d);
CUresult gnn_cuCtxSetCurrent(CUcontext c);
CUresult gnn_cuCtxGetCurrent(CUcontext *c);
CUresult gnn_cuCtxSynchronize(void);
CUresult gnn_cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags);
CUresult gnn_cuStreamCreate(CUstream *s, unsigned int flags);
CUresult gnn_cuStreamSynchronize(CUstream s);
CUresult gnn_cuStreamQuery(CUstream s);
CUresult gnn_cuStreamDestroy(CUstream s);
CUresult gnn_cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags);
// 801 (CUDA_ERROR_NOT_SUPPORTED) where the driver lacks it.
CUresult gnn_cuStreamWriteValue32(CUstream s, CUdeviceptr addr, uint32_t v, unsigned int flags);
// Stream capture into a graph and graph launches; 801 (CUDA_ERROR_NOT_SUPPORTED)
// where the driver lacks them (capture mode: 0 global, 1 thread-local, 2 relaxed).
CUresult gnn_cuStreamBeginCapture(CUstream s, int mode);
CUresult gnn_cuStreamEndCapture(CUstream s, CUgraph *g);
CUresult gnn_cuGraphInstantiate(CUgraphExec *e, CUgraph g);
CUresult gnn_cuGraphLaunch(CUgraphExec e, CUstream s);
CUresult gnn_cuGraphDestroy(CUgraph g);
CUresult gnn_cuGraphExecDestroy(CUgraphExec e);
CUresult gnn_cuEventCreate(CUevent *e, unsigned int flags);
CUresult gnn_cuEventRecord(CUevent e, CUstream s);
CUresult gnn_cuEventSynchronize(CUevent e);
CUresult gnn_cuEventQuery(CUevent e);
CUresult gnn_cuEventElapsedTime(float *ms, CUevent a, CUevent b);
CUresult gnn_cuEventDestroy(CUevent e);
CUresult gnn_cuMemAlloc(CUdeviceptr *p, size_t n);
CUresult gnn_cuMemFree(CUdeviceptr p);
CUresult gnn_cuMemGetInfo(size_t *free_, size_t *total);
CUresult gnn_cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s);
CUresult gnn_cuMemsetD32Async(CUdeviceptr p, unsigned int v, size_t n, CUstream s);
CUresult gnn_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult gnn_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s);
CUresult gnn_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult gnn_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s);
CUresult gnn_cuMemHostRegister(void *p, size_t n, unsigned int flags);
CUresult gnn_cuMemHostUnregister(void *p);
CUresult gnn_cuMemHostGetDevicePointer(CUdeviceptr *d, void *p, unsigned int flags);
CUresult gnn_cuModuleLoadData(CUmodule *m, const void *image);
CUresult gnn_cuModuleUnload(CUmodule m);
CUresult gnn_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name);
CUresult gnn_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                            unsigned int bx, unsigned int by, unsigned int bz,
                            unsigned int shmem, CUstream s, void **params, void **extra);
CUresult gnn_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int block, size_t shmem);
CUresult gnn_cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p);
CUresult gnn_cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle *h, unsigned int flags);
CUresult gnn_cuIpcCloseMemHandle(CUdeviceptr p);
CUresult gnn_cuIpcGetEventHandle(CUipcEventHandle *h, CUevent e);
CUresult gnn_cuIpcOpenEventHandle(CUevent *e, CUipcEventHandle *h);

#endif
