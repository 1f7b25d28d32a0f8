//go:build !linux

package ipc

import (
	"errors"
	"net"
)

// PeerGroups is implemented on Linux only.
func PeerGroups(uc *net.UnixConn) ([]int, error) {
	return nil, errors.New("ipc: PeerGroups needs Linux (SO_PEERGROUPS)")
}
