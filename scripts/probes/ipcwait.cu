// ipcwait: does another process's GPU-side wait for a fill slow the fill?
// A probe, not part of loaderd. loaderd's trainers make their stream wait (on
// the GPU) for a slot's "ready" event, an IPC event the daemon records after
// the sweep that fills the slot; under MPS the daemon's read measured 8%
// slower with those waits queued than with trainers that waited on the host
// (docs/benchmarks.md, session 12). This probe separates the cases.
//
// Its "event" pair found no slowdown, but the real client's wait did slow the
// read (session 14: bench-train's loader_nowait against loader_bare). The
// waiter most likely enqueued its wait before the reader recorded the event,
// which makes cuStreamWaitEvent a no-op; the protocol now uses ready words
// (cuStreamWaitValue32 on device memory) instead.
//
// Two processes of this binary under one MPS control daemon:
//   ipcwait reader DIR SECONDS   gathers scattered 512-byte rows of an 8 GiB
//       pinned table with gather.cu's gnn_gather16 (16 SMs x 256 threads)
//       for SECONDS, then records an IPC event and writes 1 into a device
//       word on the same stream (both pending while the reads run), and
//       prints the rate it kept
//   ipcwait waiter DIR MODE      MODE none: a context that waits on nothing;
//       event: its stream waits for the reader's event (cuStreamWaitEvent,
//       what the Python client does); value: its stream waits for the device
//       word (cuStreamWaitValue32 on IPC-mapped device memory)
// scripts/probes/ipcwait.sh runs the pairs.
//
// Build on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 -lcuda -o /tmp/ipcwait scripts/probes/ipcwait.cu
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                                                  \
	do {                                                                                                       \
		cudaError_t e_ = (x);                                                                                  \
		if (e_ != cudaSuccess) {                                                                               \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                 \
			exit(1);                                                                                           \
		}                                                                                                      \
	} while (0)
#define CU(x)                                                                                                  \
	do {                                                                                                       \
		CUresult r_ = (x);                                                                                     \
		if (r_ != CUDA_SUCCESS) {                                                                              \
			const char *s_ = "?";                                                                              \
			cuGetErrorName(r_, &s_);                                                                           \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_);                                     \
			exit(1);                                                                                           \
		}                                                                                                      \
	} while (0)

#include "../../cudaext/kernels/gather.cu"

struct Shared {
	cudaIpcEventHandle_t ev;
	cudaIpcMemHandle_t word;
};

static std::string path(const char *dir, const char *name) { return std::string(dir) + "/" + name; }

static void touch(const std::string &p) {
	FILE *f = fopen(p.c_str(), "w");
	if (f) fclose(f);
}

static void await_file(const std::string &p) {
	while (access(p.c_str(), F_OK) != 0) usleep(1000);
}

static int reader(const char *dir, double seconds) {
	const int64_t rb = 512, nrows = (8ll << 30) / rb, n = 4800000;
	uint8_t *table;
	CK(cudaHostAlloc((void **)&table, nrows * rb, cudaHostAllocMapped));
	for (int64_t i = 0; i < nrows * rb / 8; i++) ((uint64_t *)table)[i] = (uint64_t)i;
	std::vector<uint32_t> rows;
	{
		std::mt19937_64 rng(1);
		std::vector<char> seen(nrows, 0);
		while ((int64_t)rows.size() < n) {
			uint32_t r = (uint32_t)(rng() % nrows);
			if (!seen[r]) seen[r] = 1, rows.push_back(r);
		}
		std::sort(rows.begin(), rows.end());
	}
	uint8_t *dtable, *dst;
	uint32_t *drows, *word;
	CK(cudaHostGetDevicePointer((void **)&dtable, table, 0));
	CK(cudaMalloc(&drows, n * 4));
	CK(cudaMemcpy(drows, rows.data(), n * 4, cudaMemcpyHostToDevice));
	CK(cudaMalloc(&dst, n * rb));
	CK(cudaMalloc(&word, 4096));
	CK(cudaMemset(word, 0, 4096));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cudaEvent_t ipc, e0, e1;
	CK(cudaEventCreateWithFlags(&ipc, cudaEventDisableTiming | cudaEventInterprocess));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	Shared sh;
	CK(cudaIpcGetEventHandle(&sh.ev, ipc));
	CK(cudaIpcGetMemHandle(&sh.word, word));
	FILE *f = fopen(path(dir, "handles").c_str(), "wb");
	fwrite(&sh, sizeof sh, 1, f);
	fclose(f);
	touch(path(dir, "handles.done"));
	await_file(path(dir, "waiter.up"));
	// One pass alone to size the run, then the timed run with the event and
	// the word pending behind it.
	gnn_gather16<<<16, 256, 0, s>>>(dtable, rb, drows, nullptr, n, nullptr, dst, 3);
	CK(cudaEventRecord(e0, s));
	gnn_gather16<<<16, 256, 0, s>>>(dtable, rb, drows, nullptr, n, nullptr, dst, 3);
	CK(cudaEventRecord(e1, s));
	CK(cudaEventSynchronize(e1));
	float one;
	CK(cudaEventElapsedTime(&one, e0, e1));
	int passes = std::max(1, (int)(seconds * 1e3 / one));
	CK(cudaEventRecord(e0, s));
	for (int i = 0; i < passes; i++)
		gnn_gather16<<<16, 256, 0, s>>>(dtable, rb, drows, nullptr, n, nullptr, dst, 3);
	CK(cudaEventRecord(e1, s));
	CK(cudaEventRecord(ipc, s));
	CU(cuStreamWriteValue32((CUstream)s, (CUdeviceptr)word, 1, 0));
	touch(path(dir, "recorded"));
	CK(cudaEventSynchronize(e1));
	float ms;
	CK(cudaEventElapsedTime(&ms, e0, e1));
	printf("reader: %d passes of %lld rows in %.1f ms: %.2f GB/s\n", passes, (long long)n, ms,
	       passes * (double)n * rb / (ms * 1e6));
	CK(cudaStreamSynchronize(s));
	await_file(path(dir, "waiter.done"));
	return 0;
}

static int waiter(const char *dir, const char *mode) {
	CK(cudaFree(nullptr));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	await_file(path(dir, "handles.done"));
	Shared sh;
	FILE *f = fopen(path(dir, "handles").c_str(), "rb");
	if (fread(&sh, sizeof sh, 1, f) != 1) {
		fprintf(stderr, "waiter: short handles file\n");
		return 1;
	}
	fclose(f);
	cudaEvent_t ev;
	uint32_t *word;
	CK(cudaIpcOpenEventHandle(&ev, sh.ev));
	CK(cudaIpcOpenMemHandle((void **)&word, sh.word, cudaIpcMemLazyEnablePeerAccess));
	touch(path(dir, "waiter.up"));
	await_file(path(dir, "recorded"));
	if (strcmp(mode, "event") == 0)
		CK(cudaStreamWaitEvent(s, ev, 0));
	else if (strcmp(mode, "value") == 0)
		CU(cuStreamWaitValue32((CUstream)s, (CUdeviceptr)word, 1, CU_STREAM_WAIT_VALUE_GEQ));
	else if (strcmp(mode, "none") != 0) {
		fprintf(stderr, "waiter: mode none, event or value\n");
		return 1;
	}
	uint32_t got = 0;
	CK(cudaMemcpyAsync(&got, word, 4, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	printf("waiter %s: done (word %u)\n", mode, got);
	touch(path(dir, "waiter.done"));
	return 0;
}

int main(int argc, char **argv) {
	if (argc == 4 && strcmp(argv[1], "reader") == 0) return reader(argv[2], atof(argv[3]));
	if (argc == 4 && strcmp(argv[1], "waiter") == 0) return waiter(argv[2], argv[3]);
	fprintf(stderr, "usage: ipcwait reader DIR SECONDS | ipcwait waiter DIR none|event|value\n");
	return 2;
}
