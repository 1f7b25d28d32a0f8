// Package pingpong owns the slot rings of each trainer: the buffers a batch is
// gathered into, their lifecycle (free, filling, ready, held by the trainer),
// and the synchronisation that keeps a slot from being refilled before the
// trainer released it (CPU-side for shared-memory slots, GPU-side events for
// CUDA slots).
package pingpong
