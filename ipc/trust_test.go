//go:build linux

package ipc

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// squatter listens at a fresh socket path and reports, for the first peer,
// how many bytes it sent before closing (or a read error). listen makes the
// listening socket; it decides the credentials peers see.
func squatter(t *testing.T, listen func(path string) *net.UnixListener) (path string, got <-chan string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "loaderd.sock")
	l := listen(path)
	t.Cleanup(func() { l.Close() })
	out := make(chan string, 1)
	go func() {
		c, err := l.AcceptUnix()
		if err != nil {
			out <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil {
			out <- fmt.Sprintf("%d bytes, then %v", len(b), err)
			return
		}
		out <- fmt.Sprintf("%d bytes", len(b))
	}()
	return path, out
}

func listenPlain(t *testing.T) func(string) *net.UnixListener {
	return func(path string) *net.UnixListener {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// fakeCred makes PeerCred answer uid for the rest of the test.
func fakeCred(t *testing.T, uid int) {
	old := peerCred
	peerCred = func(*net.UnixConn) (int, int, int, error) { return 4321, uid, uid, nil }
	t.Cleanup(func() { peerCred = old })
}

func TestDialRefusesUntrustedDaemon(t *testing.T) {
	t.Setenv(DaemonUIDEnv, "")
	stranger := os.Getuid() + 1000
	fakeCred(t, stranger)
	path, got := squatter(t, listenPlain(t))
	c, err := Dial(path, Limits{})
	if err == nil {
		c.WriteMsg(&Hello{Version: Version, Name: "root trainer"})
		c.Close()
		t.Fatalf("Dial accepted a daemon running as uid %d; it received %s", stranger, <-got)
	}
	var ue *UntrustedDaemonError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUntrustedDaemon) {
		t.Fatalf("Dial: %v (%T), want an *UntrustedDaemonError", err, err)
	}
	if ue.UID != stranger || ue.PID != 4321 || ue.Path != path {
		t.Errorf("error = %+v", ue)
	}
	for _, want := range []string{path, fmt.Sprint(stranger), fmt.Sprintf("%s=%d", DaemonUIDEnv, stranger)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if g := <-got; g != "0 bytes" {
		t.Errorf("the untrusted daemon received %s, want 0 bytes", g)
	}
}

func TestDialTrustsOwnRootAndNamedUIDs(t *testing.T) {
	stranger := os.Getuid() + 1000
	for _, tc := range []struct {
		uid int
		env string
	}{
		{os.Getuid(), ""},
		{0, ""},
		{stranger, fmt.Sprint(stranger)},
		{stranger, fmt.Sprintf("7, %d", stranger)},
	} {
		t.Run(fmt.Sprintf("uid%d_env%q", tc.uid, tc.env), func(t *testing.T) {
			t.Setenv(DaemonUIDEnv, tc.env)
			fakeCred(t, tc.uid)
			path, got := squatter(t, listenPlain(t))
			c, err := Dial(path, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.WriteMsg(&Goodbye{}); err != nil {
				t.Fatal(err)
			}
			c.Close()
			if g := <-got; g == "0 bytes" || strings.Contains(g, "then") {
				t.Errorf("daemon received %s", g)
			}
		})
	}
}

func TestDialBadDaemonUIDEnv(t *testing.T) {
	for _, env := range []string{"x", "-1", "1,,2", "99999999999"} {
		t.Setenv(DaemonUIDEnv, env)
		path, _ := squatter(t, listenPlain(t))
		if _, err := Dial(path, Limits{}); err == nil || !strings.Contains(err.Error(), DaemonUIDEnv) {
			t.Errorf("%s=%q: Dial: %v, want an error naming the variable", DaemonUIDEnv, env, err)
		}
	}
}

// TestDialRefusesOtherUIDForReal needs no injection: run as root, it makes
// its listening socket while its effective uid is nobody's, so the kernel
// records nobody as the daemon (SO_PEERCRED is taken at listen time).
func TestDialRefusesOtherUIDForReal(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to listen as another uid")
	}
	t.Setenv(DaemonUIDEnv, "")
	const nobody = 65534
	asNobody := func(path string) *net.UnixListener {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setresuid(-1, nobody, -1); err != nil {
			unix.Close(fd)
			t.Skipf("cannot take uid %d: %v", nobody, err)
		}
		lerr := unix.Listen(fd, 8)
		if err := unix.Setresuid(-1, 0, -1); err != nil {
			panic(err) // the test binary must not go on as nobody
		}
		if lerr != nil {
			t.Fatal(lerr)
		}
		f := os.NewFile(uintptr(fd), path)
		defer f.Close()
		l, err := net.FileListener(f)
		if err != nil {
			t.Fatal(err)
		}
		return l.(*net.UnixListener)
	}
	path, got := squatter(t, asNobody)
	c, err := Dial(path, Limits{})
	if err == nil {
		c.WriteMsg(&Hello{Version: Version, Name: "root trainer"})
		c.Close()
		t.Fatalf("Dial accepted a daemon running as uid %d; it received %s", nobody, <-got)
	}
	var ue *UntrustedDaemonError
	if !errors.As(err, &ue) || ue.UID != nobody {
		t.Fatalf("Dial: %v, want an *UntrustedDaemonError for uid %d", err, nobody)
	}
	if g := <-got; g != "0 bytes" {
		t.Errorf("the untrusted daemon received %s, want 0 bytes", g)
	}
}
