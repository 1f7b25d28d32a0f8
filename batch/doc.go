// Package batch owns what a mini-batch is. A sampling Mode declares the
// batch's Layout — named regions with an element type and a capacity shape,
// each either gathered from a feature table or written as structure — and
// samples batches. A sampled Batch reports its counts, scalars and lists (what
// the BatchReady message carries), the rows to gather into each gathered
// region, and writes its structure regions into host memory: the same writer
// fills a shared-memory slot and the pinned staging of a CUDA slot.
//
// Adding a region to a batch (an edge-id region, an edge-feature region, the
// types of a heterogeneous graph) touches the mode alone: the slot layout,
// the daemon's fill and the trainer's tensors all follow the declaration.
//
// Concurrency: a Mode is safe for concurrent use (many goroutines sample at
// once, each into its own Batch). A Batch is used by one goroutine at a time
// and keeps its capacity from batch to batch.
package batch
