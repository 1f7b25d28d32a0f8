// Enough of CUDA for g++ to run a kernel file on the CPU: sample_emul.cpp
// runs cudaext/kernels/sample.cu's whole batch this way (sampler's
// TestKernelsEmulatedMatchCPU), so that the kernels' logic is checked where
// there is no nvcc and no GPU. A launch runs its blocks one after the other;
// a block's threads run one after the other on the calling thread, or, for a
// kernel whose threads work together (__syncthreads, __shfl_up_sync), each
// on a thread of a pool with real barriers. Atomics are atomic; memory is
// host memory. This checks a kernel's logic, not its speed or the GPU's
// memory model.
#pragma once
#include <stdint.h>

#include <atomic>
#include <barrier>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(x)
#define __shared__ static
#define __align__(n) alignas(n)

struct alignas(8) int2 {
	int x, y;
};
struct alignas(16) int4 {
	int x, y, z, w;
};
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

struct dim3s {
	unsigned x, y, z;
};
inline thread_local dim3s threadIdx, blockIdx;
inline dim3s blockDim, gridDim;

inline unsigned long long atomicCAS(unsigned long long *a, unsigned long long compare, unsigned long long val) {
	std::atomic_ref<unsigned long long> r(*a);
	r.compare_exchange_strong(compare, val); // compare: the old value either way
	return compare;
}
inline int atomicMin(int *a, int v) {
	std::atomic_ref<int> r(*a);
	int old = r.load();
	while (v < old && !r.compare_exchange_weak(old, v)) {
	}
	return old;
}
inline unsigned atomicMin(unsigned *a, unsigned v) {
	std::atomic_ref<unsigned> r(*a);
	unsigned old = r.load();
	while (v < old && !r.compare_exchange_weak(old, v)) {
	}
	return old;
}
inline uint64_t __umul64hi(uint64_t a, uint64_t b) { return (uint64_t)(((unsigned __int128)a * b) >> 64); }

// A cooperative block's barrier, and a barrier and exchange per warp for the
// shuffles (every lane of a warp calls them together, as CUDA requires).
inline std::barrier<> *emulBlockBarrier;
inline std::vector<std::unique_ptr<std::barrier<>>> emulWarpBarriers;
inline int64_t emulWarpValues[32][32];

inline void __syncthreads() { emulBlockBarrier->arrive_and_wait(); }
inline int64_t __shfl_up_sync(unsigned, int64_t v, int d) {
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	emulWarpValues[w][lane] = v;
	emulWarpBarriers[w]->arrive_and_wait();
	const int64_t r = lane >= d ? emulWarpValues[w][lane - d] : v;
	emulWarpBarriers[w]->arrive_and_wait();
	return r;
}

// The pool that runs a cooperative block's threads: one OS thread per CUDA
// thread of the largest block so far, made once (a launch making its
// threads anew cost most of the emulation's time).
struct EmulPool {
	std::vector<std::thread> threads;
	std::unique_ptr<std::barrier<>> start, done;
	std::function<void(unsigned)> body;
	unsigned active = 0;
	bool quit = false;
	void resize(unsigned n) { // grows only: a smaller block leaves the rest idle
		if (n <= threads.size()) return;
		stop();
		start.reset(new std::barrier<>((std::ptrdiff_t)n + 1));
		done.reset(new std::barrier<>((std::ptrdiff_t)n + 1));
		quit = false;
		for (unsigned t = 0; t < n; t++)
			threads.emplace_back([this, t] {
				for (;;) {
					start->arrive_and_wait();
					if (quit) return;
					if (t < active) body(t);
					done->arrive_and_wait();
				}
			});
	}
	void run(unsigned n, std::function<void(unsigned)> f) { // the pool's first n threads run f(threadIdx)
		resize(n);
		body = std::move(f);
		active = n;
		start->arrive_and_wait();
		done->arrive_and_wait();
	}
	void stop() {
		if (threads.empty()) return;
		quit = true;
		start->arrive_and_wait();
		for (auto &t : threads) t.join();
		threads.clear();
	}
	~EmulPool() { stop(); }
};
inline EmulPool emulPool;

// emul_launch runs f over grid x gridY blocks of block threads (blockIdx.y
// the slower index); coop: a thread each.
template <typename F, typename... A>
void emul_launch2(unsigned grid, unsigned gridY, unsigned block, bool coop, F f, A... a) {
	gridDim = {grid, gridY, 1};
	blockDim = {block, 1, 1};
	for (unsigned y = 0; y < gridY; y++) {
		for (unsigned b = 0; b < grid; b++) {
			if (!coop) {
				blockIdx = {b, y, 0};
				for (unsigned t = 0; t < block; t++) {
					threadIdx = {t, 0, 0};
					f(a...);
				}
				continue;
			}
			std::barrier<> bar((std::ptrdiff_t)block);
			emulBlockBarrier = &bar;
			emulWarpBarriers.clear();
			for (unsigned w = 0; w < (block + 31) / 32; w++) emulWarpBarriers.emplace_back(new std::barrier<>(32));
			const dim3s gd = gridDim, bd = blockDim;
			emulPool.run(block, [=](unsigned t) {
				gridDim = gd;
				blockDim = bd;
				blockIdx = {b, y, 0};
				threadIdx = {t, 0, 0};
				f(a...);
			});
		}
	}
}

template <typename F, typename... A>
void emul_launch(unsigned grid, unsigned block, bool coop, F f, A... a) {
	emul_launch2(grid, 1, block, coop, f, a...);
}
