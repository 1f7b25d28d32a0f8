//go:build unix

package ipc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
)

// DaemonUIDEnv names the environment variable listing, comma-separated, the
// uids whose daemon a client trusts besides its own and root's (e.g.
// GNNLOADER_DAEMON_UID=998 for a loaderd running as a service account).
const DaemonUIDEnv = "GNNLOADER_DAEMON_UID"

// ErrUntrustedDaemon matches (errors.Is) the *UntrustedDaemonError of a
// client that refused the process behind a socket.
var ErrUntrustedDaemon = errors.New("ipc: untrusted daemon")

// UntrustedDaemonError says a client refused the process listening at Path
// because its uid is not one the client trusts. Nothing was sent to it.
type UntrustedDaemonError struct {
	Path    string
	PID     int   // the listening process, as SO_PEERCRED reports it
	UID     int   // its uid
	Trusted []int // the uids that would have been accepted
}

func (e *UntrustedDaemonError) Error() string {
	return fmt.Sprintf("ipc: refusing the daemon at %s: the process listening there (pid %d) runs as uid %d, "+
		"and this client trusts only uids %v (its own, root and $%s); nothing was sent. "+
		"If it is the loaderd you mean, set %s=%d", e.Path, e.PID, e.UID, e.Trusted, DaemonUIDEnv, DaemonUIDEnv, e.UID)
}

// Is reports whether target is ErrUntrustedDaemon.
func (e *UntrustedDaemonError) Is(target error) bool { return target == ErrUntrustedDaemon }

// TrustedDaemonUIDs returns the uids whose daemon a client accepts: its
// own, root's (0) and those listed in $GNNLOADER_DAEMON_UID. A malformed
// variable is an error, never ignored.
func TrustedDaemonUIDs() ([]int, error) {
	uids := []int{os.Getuid(), 0}
	env := os.Getenv(DaemonUIDEnv)
	if strings.TrimSpace(env) == "" {
		return uids, nil
	}
	for _, f := range strings.Split(env, ",") {
		uid, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil || uid == 1<<32-1 {
			return nil, fmt.Errorf("ipc: $%s=%q: %q is not a uid (want comma-separated decimal uids)", DaemonUIDEnv, env, f)
		}
		uids = append(uids, int(uid))
	}
	return uids, nil
}

// peerCred reads the credentials of a socket's peer; tests replace it.
var peerCred = PeerCred

// CheckDaemon reads the credentials of the process behind uc (SO_PEERCRED,
// recorded by the kernel when that process started listening) and returns
// an *UntrustedDaemonError unless its uid is in trusted. A client calls it
// right after connecting, before it sends anything; path is only for the
// message.
func CheckDaemon(uc *net.UnixConn, path string, trusted []int) error {
	pid, uid, _, err := peerCred(uc)
	if err != nil {
		return fmt.Errorf("ipc: reading the credentials of the daemon at %s: %w", path, err)
	}
	if !slices.Contains(trusted, uid) {
		return &UntrustedDaemonError{Path: path, PID: pid, UID: uid, Trusted: slices.Compact(slices.Clone(trusted))}
	}
	return nil
}
