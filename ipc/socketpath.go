//go:build unix

package ipc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// SocketEnv names the environment variable that gives the socket path to
// loaderd and to its clients when none is given explicitly.
const SocketEnv = "GNNLOADER_SOCKET"

// SocketName is the file name of the socket in the default directories.
const SocketName = "loaderd.sock"

// DefaultSocketPath returns the socket path loaderd listens on, and clients
// connect to, when none is given. The first that applies:
//
//  1. $GNNLOADER_SOCKET, if set and not empty;
//  2. $XDG_RUNTIME_DIR/gnnloader/loaderd.sock, if XDG_RUNTIME_DIR is set
//     (a per-user directory, 0700, that the session manager creates);
//  3. /run/gnnloader/loaderd.sock for root;
//  4. /tmp/gnnloader-UID/loaderd.sock for any other uid: a directory of
//     that user's alone, created 0700 by the daemon and checked by both
//     sides (PrepareSocketDir, CheckSocketDir).
//
// Only in cases 2-4 was the directory chosen by this rule; callers prepare
// or check it then (see DefaultSocketDir). python/gnnloader/trust.py
// default_socket_path is the twin; TestDefaultSocketPathTwin compares them.
func DefaultSocketPath() string {
	return defaultSocketPath(os.Getenv, os.Getuid())
}

// DefaultSocketDir returns the directory rule 2-4 of DefaultSocketPath chose,
// or "" when $GNNLOADER_SOCKET gives the path (the user's choice, used as
// it is).
func DefaultSocketDir() string {
	if os.Getenv(SocketEnv) != "" {
		return ""
	}
	return filepath.Dir(DefaultSocketPath())
}

func defaultSocketPath(getenv func(string) string, uid int) string {
	if p := getenv(SocketEnv); p != "" {
		return p
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "gnnloader", SocketName)
	}
	if uid == 0 {
		return filepath.Join("/run/gnnloader", SocketName)
	}
	return filepath.Join("/tmp", "gnnloader-"+strconv.Itoa(uid), SocketName)
}

// ErrUnsafeSocketDir matches (errors.Is) the error of CheckSocketDir and
// PrepareSocketDir for a directory someone else could have planted a socket
// in.
var ErrUnsafeSocketDir = errors.New("ipc: unsafe socket directory")

// CheckSocketDir checks that dir, a directory DefaultSocketPath chose, is
// safe to find a socket in: a real directory (not a symbolic link), owned by
// this process's uid or by root, and writable by neither its group nor
// others. A missing directory is reported as fs.ErrNotExist.
func CheckSocketDir(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	unsafe := func(why string) error {
		return fmt.Errorf("%w %s: %s; remove it, or give a socket path explicitly (--socket, $%s)",
			ErrUnsafeSocketDir, dir, why, SocketEnv)
	}
	if !st.IsDir() {
		return unsafe(fmt.Sprintf("it is not a directory (%s)", st.Mode().Type()))
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return unsafe("its owner cannot be read")
	}
	if uid := int(sys.Uid); uid != os.Getuid() && uid != 0 {
		return unsafe(fmt.Sprintf("it belongs to uid %d, not to uid %d or root", uid, os.Getuid()))
	}
	if st.Mode().Perm()&0o022 != 0 {
		return unsafe(fmt.Sprintf("its group or others may write to it (mode %#o)", st.Mode().Perm()))
	}
	return nil
}

// PrepareSocketDir creates dir, a directory DefaultSocketPath chose, if it
// is missing (0755 for root, whose /run/gnnloader other users allowed with
// --allow-uid/--allow-gid must traverse; 0700 for anyone else), and then
// checks it with CheckSocketDir. The daemon calls it before listening on a
// default path.
func PrepareSocketDir(dir string) error {
	mode := fs.FileMode(0o700)
	if os.Getuid() == 0 {
		mode = 0o755
	}
	if err := os.Mkdir(dir, mode); err == nil {
		if err := os.Chmod(dir, mode); err != nil { // the umask may have narrowed it
			return err
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("ipc: creating the socket directory: %w", err)
	}
	return CheckSocketDir(dir)
}
