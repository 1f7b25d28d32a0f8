// Package serve owns the daemon's core: trainer sessions wired to the sampler,
// the gather backend, the slot rings and the socket protocol. It is testable
// without the command-line shell in cmd/loaderd.
package serve
