// Package gather owns the gather engine: copying the feature rows, labels and
// batch structure of sampled batches into trainer slots. It holds one Backend
// interface with a CPU implementation (CPU, CPUBackend: always built) and a CUDA
// one (CUDA: zero-copy kernels reading the pinned table in address order, on its
// own non-blocking stream), tested against each other byte for byte; a sweep
// (PlanSweep, (*CUDA).Sweep) gathers several batches in one sorted pass.
// SweepOnDevice plans that pass on the GPU (the batches' ids sorted and merged
// by kernels, plan.go) and serves rows held in a device-resident hot-row cache
// from it, reading only the misses over PCIe; PlanStats counts lookups, hits
// and rows read. Labels go through the same path from a second table (y).
//
// Ownership: nid, order and the sources of CopyIn may be reused as soon as a
// call returns; a CUDA destination must stay allocated until the work enqueued
// on (*CUDA).Stream has completed (Sync, or an event recorded on the stream).
// The benchmark that measures the CUDA backend against the memcpy ceiling,
// the CPU gather and a naive kernel is internal/bench/gatherbench (docs/gpu.md);
// it times the backend's steps apart through internal/gatherhook, which
// benchhook.go fills.
package gather
