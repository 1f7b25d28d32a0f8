package ipc

import (
	"encoding/binary"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PeerGroups returns the supplementary group ids of the process at the other
// end of uc, as the kernel recorded them at connect time (SO_PEERGROUPS,
// Linux 4.13 and later). SO_PEERCRED carries only the primary group.
func PeerGroups(uc *net.UnixConn) ([]int, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var groups []int
	var serr error
	err = rc.Control(func(fd uintptr) {
		buf := make([]byte, 4*64)
		for {
			n := uint32(len(buf))
			_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_PEERGROUPS,
				uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
			if e == unix.ERANGE && int(n) > len(buf) {
				buf = make([]byte, n) // n is the size the kernel needs
				continue
			}
			if e != 0 {
				serr = e
				return
			}
			for i := 0; i+4 <= int(n); i += 4 {
				groups = append(groups, int(binary.NativeEndian.Uint32(buf[i:])))
			}
			return
		}
	})
	if err != nil {
		return nil, err
	}
	return groups, serr
}
