package serve

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// socketAccess says who may connect to a socket the daemon listens on.
type socketAccess struct {
	// Mode is the socket's permission bits for its owner and group (and
	// others: 0 unless set on purpose).
	Mode fs.FileMode
	// UIDs and GIDs get read-write access through POSIX ACL entries on the
	// socket (connecting needs write permission on it). SO_PEERCRED is
	// checked on every connection anyway: the ACL only lets them reach it.
	UIDs, GIDs []int
}

// ownedSocket is a Unix socket the daemon listens on, with the lock that
// makes it the socket's only owner. Close removes the socket file only while
// it is still the one this daemon created (another process may have replaced
// it since), then the lock.
type ownedSocket struct {
	*net.UnixListener
	path     string
	lock     *os.File
	dev, ino uint64
	once     sync.Once
	err      error
}

// lockSuffix names the lock file beside a socket: PATH.lock.
const lockSuffix = ".lock"

// listenSocket creates a Unix socket at path:
//   - its directory if missing (0755: the socket's own mode and ACL guard it);
//   - under an exclusive lock on path.lock, held until Close, so two daemons
//     never serve (or remove) the same socket;
//   - an existing socket file replaced only when it is provably stale: the
//     lock was free and connecting is refused (ECONNREFUSED). Any other
//     answer (a live listener, a full backlog: EAGAIN) leaves it alone, and a
//     file that is not a socket is never replaced;
//   - created with no permissions for anyone else, then opened up to exactly
//     access (mode bits, then ACL entries for the allowed uids and gids).
func listenSocket(path string, access socketAccess, log *slog.Logger) (_ *ownedSocket, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	lock, err := lockFile(path + lockSuffix)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlockFile(lock, path+lockSuffix)
		}
	}()
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("serve: %s exists and is not a socket: not replacing it", path)
		}
		c, derr := net.DialTimeout("unix", path, time.Second)
		switch {
		case derr == nil:
			c.Close()
			return nil, fmt.Errorf("serve: %s: another daemon is listening there", path)
		case errors.Is(derr, syscall.ECONNREFUSED):
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("serve: removing stale socket: %w", err)
			}
			log.Info("removed a stale socket (no daemon listening)", "socket", path)
		default:
			// EAGAIN (a live daemon whose backlog is full), a timeout: it may
			// well be alive, so its socket is not ours to remove.
			return nil, fmt.Errorf("serve: %s: a daemon may be listening there (connecting gave: %v): not replacing it", path, derr)
		}
	}
	old := umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	umask(old)
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // Close removes it only while it is still ours
	s := &ownedSocket{UnixListener: ln, path: path, lock: lock}
	defer func() {
		if err != nil {
			ln.Close()
			os.Remove(path)
		}
	}()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil, err
	}
	s.dev, s.ino = st.Dev, st.Ino
	if err := os.Chmod(path, access.Mode); err != nil {
		return nil, err
	}
	if len(access.UIDs)+len(access.GIDs) > 0 {
		if err := setACL(path, access); err != nil {
			if !errors.Is(err, unix.EOPNOTSUPP) || len(access.UIDs) > 0 || len(access.GIDs) != 1 {
				return nil, fmt.Errorf("serve: granting --allow-uid/--allow-gid access to %s: %w (the socket needs a filesystem with POSIX ACLs, such as tmpfs, ext4 or xfs; without them only a single --allow-gid works)", path, err)
			}
			// No ACLs here: one group can still own the socket.
			if err := os.Chown(path, -1, access.GIDs[0]); err != nil {
				return nil, fmt.Errorf("serve: giving %s to group %d (no POSIX ACLs on this filesystem): %w", path, access.GIDs[0], err)
			}
			if err := os.Chmod(path, access.Mode|0o060); err != nil {
				return nil, err
			}
		}
		if dst, err := os.Stat(filepath.Dir(path)); err == nil && dst.Mode().Perm()&0o011 == 0 {
			log.Warn("the socket's directory is not searchable by other users: allowed uids and gids cannot reach the socket",
				"dir", filepath.Dir(path), "mode", fmt.Sprintf("%#o", dst.Mode().Perm()))
		}
	}
	return s, nil
}

// Close stops listening and removes the socket file if it is still the one
// this daemon created, then releases the lock.
// Later calls do nothing.
func (s *ownedSocket) Close() error {
	s.once.Do(func() {
		s.err = s.UnixListener.Close()
		var st unix.Stat_t
		if unix.Lstat(s.path, &st) == nil && st.Dev == s.dev && st.Ino == s.ino {
			os.Remove(s.path)
		}
		unlockFile(s.lock, s.path+lockSuffix)
	})
	return s.err
}

// lockFile takes an exclusive, non-blocking flock on path (created 0600).
// The lock file is removed by unlockFile while still locked; so that a
// daemon never holds a lock on a file already unlinked by another, the lock
// counts only when path still names the locked file afterwards.
func lockFile(path string) (*os.File, error) {
	for range 10 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("serve: lock file: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				pid := ""
				if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
					pid = fmt.Sprintf(" (pid %s)", string(b))
				}
				return nil, fmt.Errorf("serve: %s: another daemon is serving this socket%s", path[:len(path)-len(lockSuffix)], pid)
			}
			return nil, fmt.Errorf("serve: lock file %s: %w", path, err)
		}
		var held, named unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &named) == nil &&
			held.Dev == named.Dev && held.Ino == named.Ino {
			f.Truncate(0)
			f.WriteAt([]byte(fmt.Sprint(os.Getpid())), 0)
			return f, nil
		}
		f.Close() // unlinked by its previous holder meanwhile: take the new one
	}
	return nil, fmt.Errorf("serve: lock file %s keeps changing under us", path)
}

func unlockFile(f *os.File, path string) {
	os.Remove(path)
	f.Close()
}
