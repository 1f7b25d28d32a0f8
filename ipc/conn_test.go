//go:build linux

package ipc

import (
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// socketpair returns two connected *net.UnixConn, closed at the end of the test.
func socketpair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

func memfd(t *testing.T, data []byte) int {
	t.Helper()
	fd, err := unix.MemfdCreate("ipc-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fd, data); err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestConnRoundTrip(t *testing.T) {
	a, b := socketpair(t)
	ca, cb := NewConn(a, Limits{}), NewConn(b, Limits{})
	for name, m := range goldens() {
		var fds []int
		if FDsFor(m) == 1 {
			fds = []int{memfd(t, []byte("slot memory "+name))}
		}
		if err := ca.WriteMsg(m, fds...); err != nil {
			t.Fatalf("%s: WriteMsg: %v", name, err)
		}
		CloseFDs(fds)
		got, rfds, err := cb.ReadMsg()
		if err != nil {
			t.Fatalf("%s: ReadMsg: %v", name, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%s: got %#v", name, got)
		}
		if len(rfds) != FDsFor(m) {
			t.Fatalf("%s: %d fds", name, len(rfds))
		}
		for _, fd := range rfds {
			buf := make([]byte, 64)
			n, err := unix.Pread(fd, buf, 0)
			if err != nil || string(buf[:n]) != "slot memory "+name {
				t.Fatalf("%s: memfd reads %q, %v", name, buf[:n], err)
			}
			flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if flags&unix.FD_CLOEXEC == 0 {
				t.Errorf("%s: received fd is not close-on-exec", name)
			}
		}
		CloseFDs(rfds)
	}
	ca.Close()
	if m, fds, err := cb.ReadMsg(); err != io.EOF || m != nil || fds != nil {
		t.Fatalf("after close: %v %v %v, want io.EOF", m, fds, err)
	}
}

// rawSend writes b with fds attached, bypassing WriteMsg's checks.
func rawSend(t *testing.T, c *net.UnixConn, b []byte, fds ...int) {
	t.Helper()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.WriteMsgUnix(b, oob, nil); err != nil {
		t.Fatal(err)
	}
}

// TestConnNoFDLeak sends frames the reader must reject, each with
// descriptors attached, and checks that none stays open in the reader.
func TestConnNoFDLeak(t *testing.T) {
	g := goldens()
	hello := mustMarshal(t, g["hello"])
	shm := mustMarshal(t, g["opened_shm"])
	cases := []struct {
		name  string
		frame []byte
		nfd   int
		close bool // close the writer after sending (truncated frame)
		code  Code
	}{
		{"fd with Hello", hello, 1, false, CodeBadFrame},
		{"two fds with shm Opened", shm, 2, false, CodeBadFrame},
		{"no fd with shm Opened", shm, 0, false, CodeBadFrame},
		{"too many fds", hello, MaxFDs + 1, false, CodeBadFrame},
		{"oversized frame", []byte{0, 0, 0, 0x7f, byte(TypeOpened), 0, 0, 0}, 1, false, CodeLimit},
		{"bad payload", frame(TypeOpened, []byte{1, 2, 3}), 1, false, CodeBadMessage},
		{"unknown type", frame(77, nil), 2, false, CodeBadMessage},
		{"truncated frame", shm[:len(shm)/2], 1, true, CodeBadFrame},
		{"truncated header", shm[:5], 1, true, CodeBadFrame},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := socketpair(t)
			cb := NewConn(b, Limits{})
			var fds []int
			for i := 0; i < c.nfd; i++ {
				fds = append(fds, memfd(t, []byte("x")))
			}
			before := openFDs(t)
			rawSend(t, a, c.frame, fds...)
			CloseFDs(fds)
			if c.close {
				a.Close()
			}
			m, rfds, err := cb.ReadMsg()
			if err == nil || m != nil || rfds != nil {
				t.Fatalf("ReadMsg = %v, %v, %v; want an error and nothing else", m, rfds, err)
			}
			if CodeOf(err) != c.code {
				t.Errorf("error %v, want code %s", err, c.code)
			}
			after := openFDs(t) + c.nfd
			if c.close {
				after++ // the writer's socket
			}
			if after != before {
				t.Fatalf("%d descriptors open before, %d after: leak", before, after)
			}
		})
	}
}

// TestConnOversizedNoAlloc checks that a huge length is refused before the
// payload is allocated.
func TestConnOversizedNoAlloc(t *testing.T) {
	a, b := socketpair(t)
	cb := NewConn(b, Limits{})
	rawSend(t, a, []byte{0xf0, 0xff, 0xff, 0xff, byte(TypeHello), 0, 0, 0})
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, _, err := cb.ReadMsg()
	runtime.ReadMemStats(&m1)
	if CodeOf(err) != CodeLimit {
		t.Fatalf("ReadMsg: %v, want a limit error", err)
	}
	if d := m1.TotalAlloc - m0.TotalAlloc; d > 64<<10 {
		t.Fatalf("allocated %d bytes for a refused frame", d)
	}
}

func TestConnWriteChecks(t *testing.T) {
	a, _ := socketpair(t)
	ca := NewConn(a, Limits{MaxFrame: 64})
	if err := ca.WriteMsg(&Goodbye{}, 0); err == nil {
		t.Error("WriteMsg accepted an fd for Goodbye")
	}
	if err := ca.WriteMsg(goldens()["opened_shm"]); err == nil {
		t.Error("WriteMsg accepted a shm Opened without its fd")
	}
	if err := ca.WriteMsg(&Goodbye{Reason: string(make([]byte, 100))}); CodeOf(err) != CodeLimit {
		t.Errorf("frame over MaxFrame: %v", err)
	}
}

// TestConnLargeFrame sends a frame larger than the socket buffer with an fd,
// so WriteMsg must finish it with plain writes while the reader reads it.
func TestConnLargeFrame(t *testing.T) {
	a, b := socketpair(t)
	lim := Limits{MaxFrame: 4 << 20, MaxList: 1 << 15}
	ca, cb := NewConn(a, lim), NewConn(b, lim)
	o := *goldens()["opened_shm"].(*Opened)
	for i := 0; i < 30000; i++ {
		o.Regions = append(o.Regions, Region{Name: "pad", DType: "uint8", Shape: []uint64{1, 2}})
	}
	fd := memfd(t, []byte("big"))
	defer unix.Close(fd)
	errc := make(chan error, 1)
	go func() { errc <- ca.WriteMsg(&o, fd) }()
	m, fds, err := cb.ReadMsg()
	if err != nil {
		t.Fatal(err)
	}
	defer CloseFDs(fds)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(fds) != 1 || len(m.(*Opened).Regions) != len(o.Regions) {
		t.Fatalf("got %d fds, %d regions", len(fds), len(m.(*Opened).Regions))
	}
}

// TestConnConcurrent reads and writes from several goroutines (run with -race).
func TestConnConcurrent(t *testing.T) {
	a, b := socketpair(t)
	ca, cb := NewConn(a, Limits{}), NewConn(b, Limits{})
	const n = 500
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if err := ca.WriteMsg(&BatchReady{Slot: uint32(i), Lists: [][]uint32{{1, 2}}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if err := cb.WriteMsg(&Release{Slot: uint32(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	read := func(c *Conn, want Type) {
		defer wg.Done()
		for i := 0; i < 2*n; i++ {
			m, _, err := c.ReadMsg()
			if err != nil || m.Type() != want {
				t.Errorf("read %v, %v", m, err)
				return
			}
		}
	}
	wg.Add(2)
	go read(cb, TypeBatchReady)
	go read(ca, TypeRelease)
	wg.Wait()
}

func TestPeerCred(t *testing.T) {
	a, _ := socketpair(t)
	pid, uid, gid, err := PeerCred(a)
	if err != nil {
		t.Fatal(err)
	}
	if pid != os.Getpid() || uid != os.Getuid() || gid != os.Getgid() {
		t.Fatalf("PeerCred = %d %d %d, want %d %d %d", pid, uid, gid, os.Getpid(), os.Getuid(), os.Getgid())
	}
}

func TestDial(t *testing.T) {
	path := t.TempDir() + "/s"
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		sc := NewConn(c, Limits{})
		defer sc.Close()
		if m, _, err := sc.ReadMsg(); err == nil {
			sc.WriteMsg(&Goodbye{Reason: m.(*Hello).Name})
		}
	}()
	c, err := Dial(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteMsg(&Hello{Version: Version, Name: "dialer"}); err != nil {
		t.Fatal(err)
	}
	m, _, err := c.ReadMsg()
	if err != nil || !reflect.DeepEqual(m, &Goodbye{Reason: "dialer"}) {
		t.Fatalf("%v %v", m, err)
	}
	if _, _, err := c.ReadMsg(); !errors.Is(err, io.EOF) {
		t.Fatalf("after Goodbye: %v", err)
	}
}
