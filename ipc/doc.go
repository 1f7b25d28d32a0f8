// Package ipc owns the Unix-socket protocol between loaderd and its trainers:
// framing, message types, limits, and peer credentials. docs/protocol.md is its
// specification.
package ipc
