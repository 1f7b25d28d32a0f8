// Package ipc owns the Unix-socket protocol between loaderd and its trainers:
// framing, message types, limits, and peer credentials. docs/protocol.md is its
// specification; python/gnnloader/protocol.py is its Python twin, and both
// are tested against the same frames in testdata/golden.
//
// The pieces:
//   - The message table (table.go): every message's type code, sender and
//     descriptor rule (FDsFor), and its struct, whose ipc tags give its
//     fields in wire order (schema.go documents the tags). The codec
//     (fieldcodec.go) walks the table; BatchReady, sent once per batch, has
//     a hand-written codec checked against it (batchfast.go).
//     python/gnnloader/_schema.py is generated from the table
//     (go generate ./ipc); TestPythonSchema fails when it is stale.
//   - Msg and one struct per message type (Hello ... Goodbye, messages.go,
//     opened.go, seeds.go, ring_msgs.go); Marshal and Unmarshal convert
//     between a Msg and one complete frame.
//   - Limits bounds what a decoder accepts; every length is checked before
//     anything is allocated.
//   - Conn reads and writes frames on a *net.UnixConn and passes file
//     descriptors (the shm slot memfd) with SCM_RIGHTS.
//   - State checks the order of messages on a connection.
//   - PeerCred reads SO_PEERCRED; CheckDaemon is the client's check of the
//     daemon with it, which Dial makes before sending anything (the daemon's
//     uid must be the client's, root's or one in $GNNLOADER_DAEMON_UID).
//
// Errors caused by the peer are *ProtocolError; CodeOf(err) gives the Code
// to send back in an Error message before closing the connection.
//
// Concurrency: a Conn allows one ReadMsg and one WriteMsg at a time to run
// concurrently (calls of the same method are serialised). Messages, State
// and Limits are plain values, not safe for concurrent mutation.
//
// Ownership: Marshal returns a fresh slice; Unmarshal's result shares no
// memory with its input. Descriptors returned by ReadMsg belong to the
// caller; descriptors passed to WriteMsg stay the caller's (the peer gets
// duplicates).
package ipc
