// Package chaos holds the reliability harness of issue 8: it runs a real
// loaderd with several trainer processes for a bounded time while killing
// and restarting trainers and the daemon at random, then checks that every
// seed was delivered exactly once per epoch per rank, that no shared-memory
// segment leaked, and that the daemon's memory stayed flat.
//
// go test ./internal/chaos runs a short version (a few seconds, in CI);
// GNNLOADER_CHAOS=5m go test -run Chaos -v ./internal/chaos runs a long one
// (figures in docs/reliability.md). The trainers are this test binary
// re-executed with GNNLOADER_CHAOS_TRAINER set.
package chaos
