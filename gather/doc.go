// Package gather owns the gather engine: copying the feature rows, labels and
// batch structure of sampled batches into trainer slots. It holds one Backend
// interface with a CPU implementation (always built) and a CUDA one.
package gather
