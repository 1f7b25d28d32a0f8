package serve

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/ipc"
)

// peerEnv makes the test binary a peer that connects to the socket it names,
// says Hello and prints what the daemon answers (TestAllowedPeersReachTheSocket
// runs it as other users).
const peerEnv = "GNNLOADER_TEST_PEER"

func TestMain(m *testing.M) {
	if sock := os.Getenv(peerEnv); sock != "" {
		os.Exit(runPeer(sock))
	}
	os.Exit(m.Run())
}

func runPeer(sock string) int {
	uc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	c := ipc.NewConn(uc, ipc.DefaultLimits)
	defer c.Close()
	uc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.WriteMsg(&ipc.Hello{Version: ipc.Version, Name: "peer"}); err != nil {
		fmt.Println("hello:", err)
		return 1
	}
	m, _, err := c.ReadMsg()
	switch m := m.(type) {
	case *ipc.Welcome:
		fmt.Println("welcome")
		return 0
	case *ipc.Error:
		fmt.Println("error:", m.Message)
	default:
		fmt.Println("read:", m, err)
	}
	return 1
}

// --allow-uid used to be unusable (the socket stayed 0600, so no other uid
// could even connect) and --allow-gid ignored supplementary groups. Real
// processes of other users connect here.
func TestAllowedPeersReachTheSocket(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: it runs peers as other uids and gids")
	}
	dir, err := os.MkdirTemp("", "gnnloader-acl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // searchable by the peers
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "peer.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := OpenSource("synthetic:cora:0.1:1", true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	const allowedUID, allowedGID, strangerID = 61001, 62002, 63003
	srv := New(src, Config{Socket: filepath.Join(dir, "loaderd.sock"), AllowUIDs: []int{allowedUID}, AllowGIDs: []int{allowedGID}}, nil)
	serveStarted(t, srv)

	for _, c := range []struct {
		name   string
		cred   syscall.Credential
		answer string
	}{
		{"allowed uid", syscall.Credential{Uid: allowedUID, Gid: strangerID}, "welcome"},
		{"allowed gid as primary group", syscall.Credential{Uid: strangerID, Gid: allowedGID}, "welcome"},
		{"allowed gid as supplementary group", syscall.Credential{Uid: strangerID, Gid: strangerID, Groups: []uint32{strangerID + 1, allowedGID}}, "welcome"},
		{"stranger", syscall.Credential{Uid: strangerID, Gid: strangerID}, "permission denied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), peerEnv+"="+srv.cfg.Socket)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &c.cred}
			out, _ := cmd.CombinedOutput()
			if !strings.Contains(string(out), c.answer) {
				t.Fatalf("peer printed %q, want %q", out, c.answer)
			}
		})
	}
}

// serveStarted listens and serves srv until the test ends.
func serveStarted(t *testing.T, srv *Server) {
	t.Helper()
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return st.Ino
}

// rawListener listens on path with a backlog of 0 and fills it, the way a
// live daemon looks while it is too busy to accept: connecting gives EAGAIN.
func rawListener(t *testing.T, path string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		c, err := net.DialTimeout("unix", path, 100*time.Millisecond)
		if err != nil {
			if i == 0 {
				t.Fatalf("the first connection failed: %v", err)
			}
			return
		}
		t.Cleanup(func() { c.Close() })
	}
}

// A second daemon started while the first one's backlog was full used to
// take the EAGAIN of its liveness check for a dead daemon, unlink the live
// socket and put its own in its place.
func TestLiveSocketWithAFullBacklogIsNotReplaced(t *testing.T) {
	src, err := OpenSource("synthetic:cora:0.1:1", true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(t.TempDir(), "busy.sock")
	rawListener(t, path) // a daemon of a version without the lock file
	ino := inode(t, path)
	srv := New(src, Config{Socket: path}, nil)
	err = srv.Listen()
	if err == nil {
		srv.ln.Close()
		t.Fatal("Listen replaced a live socket whose backlog is full")
	}
	if !strings.Contains(err.Error(), "may be listening") {
		t.Fatalf("error %q does not say why", err)
	}
	if inode(t, path) != ino {
		t.Fatal("the live socket was replaced")
	}
}

// Two daemons on one socket path: the second is refused by the first's lock
// whatever state its socket is in, and a daemon removes the socket on exit
// only while it is still its own.
func TestSocketLockAndOwnership(t *testing.T) {
	src, err := OpenSource("synthetic:cora:0.1:1", true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(t.TempDir(), "s.sock")
	first := New(src, Config{Socket: path}, nil)
	if err := first.Listen(); err != nil {
		t.Fatal(err)
	}
	ino := inode(t, path)
	second := New(src, Config{Socket: path}, nil)
	if err := second.Listen(); err == nil || !strings.Contains(err.Error(), "another daemon is serving this socket") {
		t.Fatalf("second daemon: %v", err)
	}
	if b, _ := os.ReadFile(path + lockSuffix); !bytes.Equal(b, []byte(fmt.Sprint(os.Getpid()))) {
		t.Fatalf("lock file holds %q, want the first daemon's pid", b)
	}
	if inode(t, path) != ino {
		t.Fatal("the second daemon touched the first one's socket")
	}
	// Someone replaces the first daemon's socket; the first then exits and
	// must leave the new socket alone.
	os.Remove(path)
	other, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	other.SetUnlinkOnClose(false)
	defer other.Close()
	otherIno := inode(t, path)
	first.ln.Close()
	if _, err := os.Lstat(path); err != nil || inode(t, path) != otherIno {
		t.Fatalf("the exiting daemon removed a socket that was no longer its own: %v", err)
	}
	if _, err := os.Lstat(path + lockSuffix); !os.IsNotExist(err) {
		t.Fatalf("lock file left behind: %v", err)
	}
	// With its lock released and the path a live socket, a new daemon
	// refuses it; once that listener is gone, the stale file is replaced.
	third := New(src, Config{Socket: path}, nil)
	if err := third.Listen(); err == nil || !strings.Contains(err.Error(), "another daemon is listening") {
		t.Fatalf("third daemon: %v", err)
	}
	other.Close()
	if err := third.Listen(); err != nil {
		t.Fatal(err)
	}
	third.ln.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}
