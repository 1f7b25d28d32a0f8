package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/ipc"
)

// Attacks from docs/reliability.md's table, each against a live daemon that
// must stay up and keep serving a well-behaved trainer.

// stillServes checks that a well-behaved trainer can connect, open and take
// a whole epoch.
func stillServes(t *testing.T, srv *Server) {
	t.Helper()
	c := dial(t, srv)
	c.handshake(openReq())
	c.epoch(srv.src, 0)
	c.send(&ipc.Goodbye{})
}

// A RegisterGrad naming a huge world size right after Hello used to make
// the daemon allocate world_size ints (fatal out of memory at 2^32-1).
func TestHostileGradWorldSize(t *testing.T) {
	srv, _ := testServer(t, Config{MaxTrainers: 8})
	for _, world := range []uint32{1<<32 - 1, 100_000_000, 9} {
		c := dial(t, srv)
		c.hello()
		c.send(&ipc.RegisterGrad{Job: "j", Rank: 0, WorldSize: world, Device: "cpu", Bytes: 64})
		c.expectError(ipc.CodeLimit, "exceeds the 8 trainers")
	}
	stillServes(t, srv)
}

// Gradient buffers count against --memory-budget (two ranks x 512 MiB used
// to be accepted with a 16 MiB budget), and gradient ranks against
// --max-trainers.
func TestGradBuffersCountAgainstBudgetAndTrainers(t *testing.T) {
	srv, _ := testServer(t, Config{MemoryBudget: 16 << 20, MaxTrainers: 2})
	c := dial(t, srv)
	c.hello()
	c.send(&ipc.RegisterGrad{Job: "big", Rank: 0, WorldSize: 2, Device: "cpu", Bytes: 512 << 20})
	c.expectError(ipc.CodeLimit, "gradient buffer exceed the whole memory budget")

	// Two ranks of 6 MiB fit; a third job's rank of 6 MiB does not (busy),
	// and neither does a third rank at all (the trainer limit).
	// Both ranks are registered before either says goodbye: a rank that
	// leaves first ends the job, and the other, its GradRegistered not yet
	// read, would be told so instead.
	var wg sync.WaitGroup
	conns := make([]*ipc.Conn, 2)
	for r := range 2 {
		wg.Go(func() { conns[r], _ = gradClient(t, srv, "fits", r, 2, 6<<20) })
	}
	wg.Wait()
	for _, conn := range conns {
		if conn != nil {
			conn.WriteMsg(&ipc.Goodbye{})
		}
	}
	waitFor(t, func() bool { return srv.BudgetUsed() == 0 })

	a := dial(t, srv)
	a.hello()
	a.send(&ipc.RegisterGrad{Job: "held", Rank: 0, WorldSize: 2, Device: "cpu", Bytes: 6 << 20})
	b := dial(t, srv)
	b.hello()
	b.send(&ipc.RegisterGrad{Job: "held2", Rank: 0, WorldSize: 2, Device: "cpu", Bytes: 6 << 20})
	waitFor(t, func() bool { return srv.BudgetUsed() == 12<<20 })
	d := dial(t, srv)
	d.hello()
	d.send(&ipc.RegisterGrad{Job: "late", Rank: 0, WorldSize: 1, Device: "cpu", Bytes: 6 << 20})
	d.expectError(ipc.CodeBusy, "do not fit the memory budget")
	e := dial(t, srv)
	e.hello()
	e.send(&ipc.RegisterGrad{Job: "late", Rank: 0, WorldSize: 1, Device: "cpu", Bytes: 1 << 20})
	e.expectError(ipc.CodeBusy, "gradient ranks are registered already")
	a.conn.Close()
	b.conn.Close()
	waitFor(t, func() bool { return srv.BudgetUsed() == 0 })
	stillServes(t, srv)
}

// peekingTrainer opens, then runs epochs without ever consuming what the
// daemon sends: it peeks at the socket (MSG_PEEK) to learn each BatchReady
// and releases it, so the daemon keeps writing into a socket nobody reads
// until its send buffer is full. It stops when stop is closed or the
// connection ends, and reports how many batches it released.
func peekingTrainer(t *testing.T, c *client, stop <-chan struct{}) <-chan int {
	released := make(chan int, 1)
	go func() {
		n := 0
		defer func() { released <- n }()
		rc, err := c.conn.UnixConn().SyscallConn()
		if err != nil {
			return
		}
		buf := make([]byte, 4<<20)
		seen := 0 // bytes of frames already handled
		epoch := uint32(0)
		c.conn.WriteMsg(&ipc.StartEpoch{Epoch: epoch})
		for {
			select {
			case <-stop:
				return
			default:
			}
			var k int
			var perr error
			rc.Read(func(fd uintptr) bool {
				k, _, perr = unix.Recvfrom(int(fd), buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
				return true
			})
			if perr != nil && !errors.Is(perr, unix.EAGAIN) || perr == nil && k == 0 {
				return // closed
			}
			progress := false
			for seen+ipc.HeaderSize <= k {
				size := int(binary.LittleEndian.Uint32(buf[seen:])) + 4
				if seen+size > k {
					break
				}
				m, err := ipc.Unmarshal(buf[seen:seen+size], ipc.DefaultLimits)
				seen += size
				progress = true
				if err != nil {
					return
				}
				switch m := m.(type) {
				case *ipc.BatchReady:
					if c.conn.WriteMsg(&ipc.Release{Slot: m.Slot, Epoch: m.Epoch, Index: m.Index}) != nil {
						return
					}
					n++
				case *ipc.EpochEnd:
					epoch++
					if c.conn.WriteMsg(&ipc.StartEpoch{Epoch: epoch}) != nil {
						return
					}
				default:
					return // Goodbye or Error: the daemon is done with us
				}
			}
			if !progress {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	return released
}

// A trainer that stops reading used to block the epoch goroutine inside a
// write holding the session lock, and SIGTERM (Serve's cancellation) then
// never finished. Now shutdown cuts the write short, the other trainer gets
// its Goodbye, and Serve returns promptly.
func TestShutdownWithATrainerThatDoesNotRead(t *testing.T) {
	src, err := OpenSource("synthetic:cora:0.5:3", false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sock := filepath.Join(t.TempDir(), "s.sock")
	srv := New(src, Config{Socket: sock, WriteTimeout: time.Hour}, nil)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()

	stuck := dial(t, srv)
	o := openReq()
	o.BatchSize = 1
	stuck.handshake(o)
	stop := make(chan struct{})
	released := peekingTrainer(t, stuck, stop)
	good := dial(t, srv)
	good.handshake(openReq())
	// Wait until the daemon's writes to the stuck trainer block: its
	// socket's unread bytes stop growing.
	unread := func() int {
		rc, _ := stuck.conn.UnixConn().SyscallConn()
		var n int
		rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
		return n
	}
	last, still := -1, 0
	waitFor(t, func() bool {
		n := unread()
		if n == last && n > 0 {
			still++
		} else {
			still = 0
		}
		last = n
		time.Sleep(20 * time.Millisecond)
		return still >= 10
	})
	t.Logf("the stuck trainer's socket holds %d unread bytes", last)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10 s of its cancellation")
	}
	m, _, err := good.conn.ReadMsg()
	if g, ok := m.(*ipc.Goodbye); !ok || !strings.Contains(g.Reason, "shutting down") {
		t.Fatalf("the other trainer got %#v %v, want Goodbye", m, err)
	}
	close(stop)
	if n := <-released; n == 0 {
		t.Fatal("the stuck trainer released nothing: the test did not exercise a full socket")
	}
}

// Without a shutdown, a trainer that stops reading for WriteTimeout is
// disconnected and its slots are freed; the other trainer goes on.
func TestTrainerThatStopsReadingIsDisconnected(t *testing.T) {
	srv, _ := testServer(t, Config{WriteTimeout: 300 * time.Millisecond})
	stuck := dial(t, srv)
	o := openReq()
	o.BatchSize = 1
	stuck.handshake(o)
	stop := make(chan struct{})
	defer close(stop)
	peekingTrainer(t, stuck, stop)
	waitFor(t, func() bool { return srv.Trainers() == 1 })
	waitFor(t, func() bool { return srv.Trainers() == 0 && srv.BudgetUsed() == 0 })
	stillServes(t, srv)
}

// Connections that never finish their handshake used to be unbounded (400
// of them holding 1 MiB partial frames took the RSS from 35 to 452 MB;
// 20,000 idle ones exhausted the descriptors). Now: at most MaxPending at
// once (more are refused at once), partial frames above MaxClientFrame are
// refused from their header, and a handshake has a deadline.
func TestStalledHandshakesAreBounded(t *testing.T) {
	srv, _ := testServer(t, Config{MaxPending: 4, HandshakeTimeout: 500 * time.Millisecond})
	// A header announcing a 1 MiB frame is refused before any payload.
	big := rawConn(t, srv)
	hdr := make([]byte, ipc.HeaderSize)
	binary.LittleEndian.PutUint32(hdr, 1<<20)
	binary.LittleEndian.PutUint16(hdr[4:], uint16(ipc.TypeHello))
	big.Write(hdr)
	expectRawError(t, big, ipc.CodeLimit)
	// Its handshake ends after the Error reaches us: wait, or it could take
	// one of the four places below.
	waitFor(t, func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.pending == 0 })

	// Four stalled handshakes, each holding a partial frame.
	var stalled []net.Conn
	for range 4 {
		c := rawConn(t, srv)
		binary.LittleEndian.PutUint32(hdr, 32<<10)
		c.Write(hdr)
		c.Write(make([]byte, 1000))
		stalled = append(stalled, c)
	}
	waitFor(t, func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.pending == 4 })
	// A fifth is refused at once, before any read.
	fifth := rawConn(t, srv)
	expectRawError(t, fifth, ipc.CodeBusy)
	// The stalled ones are closed at their deadline with Error(limit).
	for _, c := range stalled {
		expectRawError(t, c, ipc.CodeLimit)
	}
	waitFor(t, func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.pending == 0 })
	stillServes(t, srv)
}

func rawConn(t *testing.T, srv *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", srv.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectRawError reads frames until an Error with code, then the end.
func expectRawError(t *testing.T, c net.Conn, code ipc.Code) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading to the end: %v", err)
	}
	for len(b) >= ipc.HeaderSize {
		size := int(binary.LittleEndian.Uint32(b)) + 4
		if size > len(b) {
			break
		}
		m, err := ipc.Unmarshal(b[:size], ipc.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := m.(*ipc.Error); ok {
			if e.Code != code {
				t.Fatalf("Error %v %q, want code %v", e.Code, e.Message, code)
			}
			return
		}
		b = b[size:]
	}
	t.Fatalf("no Error frame before the end (%d bytes left)", len(b))
}
