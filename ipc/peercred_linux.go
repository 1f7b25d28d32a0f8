package ipc

import (
	"net"

	"golang.org/x/sys/unix"
)

// PeerCred returns the credentials of the process at the other end of uc,
// as the kernel recorded them at connect time (SO_PEERCRED).
func PeerCred(uc *net.UnixConn) (pid, uid, gid int, err error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := rc.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, 0, err
	}
	if serr != nil {
		return 0, 0, 0, serr
	}
	return int(cred.Pid), int(cred.Uid), int(cred.Gid), nil
}
