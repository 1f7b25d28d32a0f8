//go:build !linux

package ipc

import (
	"errors"
	"net"
)

// PeerCred is implemented on Linux only.
func PeerCred(uc *net.UnixConn) (pid, uid, gid int, err error) {
	return 0, 0, 0, errors.New("ipc: PeerCred needs Linux (SO_PEERCRED)")
}
