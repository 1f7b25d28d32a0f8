package serve

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/ring"
)

// gradClient registers rank of world for job and returns its connection and
// mapped buffer (CPU path).
func gradClient(t *testing.T, srv *Server, job string, rank, world int, bytes uint64) (*ipc.Conn, []byte) {
	c, err := ipc.Dial(srv.cfg.Socket, ipc.DefaultLimits)
	if err != nil {
		t.Error(err)
		return nil, nil
	}
	t.Cleanup(func() { c.Close() })
	c.UnixConn().SetDeadline(time.Now().Add(20 * time.Second))
	if err := c.WriteMsg(&ipc.Hello{Version: ipc.Version, Name: "grad"}); err != nil {
		t.Error(err)
		return nil, nil
	}
	if m, _, err := c.ReadMsg(); err != nil || m.Type() != ipc.TypeWelcome {
		t.Errorf("welcome: %v %v", m, err)
		return nil, nil
	}
	if err := c.WriteMsg(&ipc.RegisterGrad{Job: job, Rank: uint32(rank), WorldSize: uint32(world), Device: "cpu", Bytes: bytes}); err != nil {
		t.Error(err)
		return nil, nil
	}
	m, fds, err := c.ReadMsg()
	if err != nil {
		t.Errorf("rank %d: %v", rank, err)
		return nil, nil
	}
	reg, ok := m.(*ipc.GradRegistered)
	if !ok || len(fds) != 1 || reg.Memory != ipc.MemoryShm || reg.Bytes != bytes {
		ipc.CloseFDs(fds)
		t.Errorf("rank %d: got %#v with %d fds", rank, m, len(fds))
		return nil, nil
	}
	mem, err := unix.Mmap(fds[0], 0, int(bytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fds[0])
	if err != nil {
		t.Error(err)
		return nil, nil
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return c, mem
}

// TestGradAllReduceCPU: three trainers of one job all-reduce buckets of
// several sizes, dtypes and ops through loaderd's CPU path; every rank gets
// the CPU ring's bytes.
func TestGradAllReduceCPU(t *testing.T) {
	srv, _ := testServer(t, Config{})
	const world, size = 3, 1 << 16
	conns := make([]*ipc.Conn, world)
	mems := make([][]byte, world)
	var wg sync.WaitGroup
	for r := 0; r < world; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conns[r], mems[r] = gradClient(t, srv, "job", r, world, size)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	rnd := rand.New(rand.NewSource(1))
	cases := []struct {
		n  int64
		dt ring.DType
		op ring.Op
	}{{1, ring.Float32, ring.Sum}, {1001, ring.Float32, ring.Avg}, {16384, ring.Float32, ring.Sum}, {777, ring.BFloat16, ring.Sum}, {32767, ring.Float16, ring.Avg}}
	for seq, tc := range cases {
		in := make([][]byte, world)
		for r := range in {
			b := make([]byte, tc.n*int64(tc.dt.Size()))
			for i := 0; i < int(tc.n); i++ {
				tc.dt.Store(b, i, rnd.Float64()*2-1)
			}
			in[r] = b
			copy(mems[r], b)
		}
		want := make([][]byte, world)
		for r := range in {
			want[r] = append([]byte(nil), in[r]...)
		}
		if err := ring.ReduceCPU(want, tc.n, tc.dt, tc.op); err != nil {
			t.Fatal(err)
		}
		req := &ipc.AllReduce{Seq: uint64(seq), Count: uint64(tc.n), DType: tc.dt.String(), Op: tc.op.String()}
		for r := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := conns[r].WriteMsg(req); err != nil {
					t.Error(err)
					return
				}
				m, _, err := conns[r].ReadMsg()
				if d, ok := m.(*ipc.AllReduceDone); err != nil || !ok || d.Seq != uint64(seq) {
					t.Errorf("rank %d: %#v %v", r, m, err)
				}
			}()
		}
		wg.Wait()
		for r := range mems {
			if !bytes.Equal(mems[r][:len(want[r])], want[r]) {
				t.Fatalf("case %d rank %d: buffer differs from the CPU ring", seq, r)
			}
		}
	}
	for _, c := range conns {
		c.WriteMsg(&ipc.Goodbye{})
	}
}

func TestGradBadRequests(t *testing.T) {
	srv, _ := testServer(t, Config{})
	// A bucket larger than the buffer, and a dtype the ring does not know.
	c, _ := gradClient(t, srv, "solo", 0, 1, 64)
	if c == nil {
		t.FailNow()
	}
	c.WriteMsg(&ipc.AllReduce{Seq: 0, Count: 17, DType: "float32", Op: "sum"})
	if m, _, err := c.ReadMsg(); err != nil || m.Type() != ipc.TypeError || ipc.CodeOf(errFromMsg(m)) != ipc.CodeBadRequest {
		t.Fatalf("oversized bucket: %#v %v", m, err)
	}
	c2, _ := gradClient(t, srv, "solo2", 0, 1, 64)
	if c2 == nil {
		t.FailNow()
	}
	c2.WriteMsg(&ipc.AllReduce{Seq: 0, Count: 1, DType: "int8", Op: "sum"})
	if m, _, err := c2.ReadMsg(); err != nil || m.Type() != ipc.TypeError {
		t.Fatalf("bad dtype: %#v %v", m, err)
	}
	// A rank that disagrees with its job on the world size.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); gradClient(t, srv, "pair", 0, 2, 64) }()
	d, err := ipc.Dial(srv.cfg.Socket, ipc.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.UnixConn().SetDeadline(time.Now().Add(10 * time.Second))
	d.WriteMsg(&ipc.Hello{Version: ipc.Version})
	d.ReadMsg()
	time.Sleep(50 * time.Millisecond) // rank 0 first
	d.WriteMsg(&ipc.RegisterGrad{Job: "pair", Rank: 1, WorldSize: 3, Device: "cpu", Bytes: 64})
	if m, _, err := d.ReadMsg(); err != nil || m.Type() != ipc.TypeError {
		t.Fatalf("world size mismatch: %#v %v", m, err)
	}
	// Rank 1 of the right shape completes the pair.
	gradClient(t, srv, "pair", 1, 2, 64)
	wg.Wait()
}

func errFromMsg(m ipc.Msg) error {
	if e, ok := m.(*ipc.Error); ok {
		return &ipc.ProtocolError{Code: e.Code, Msg: e.Message}
	}
	return nil
}

// TestGradRankLeavesMidRound: of three ranks, rank 1 asks for an all-reduce
// and hangs up before rank 2 asks; rank 0, which asked too, gets an error
// naming rank 1 at once, instead of waiting for a round that can never end
// (before, nobody read a connection while its rank waited in a round), and
// so does rank 2, between rounds, without asking. On
// a GPU the same hang-up mid-round also ends a reduce that waits on the ranks'
// ready events (scripts/grad_kill_check.py).
func TestGradRankLeavesMidRound(t *testing.T) {
	srv, _ := testServer(t, Config{})
	const world, size = 3, 1 << 12
	conns := make([]*ipc.Conn, world)
	var wg sync.WaitGroup
	for r := 0; r < world; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conns[r], _ = gradClient(t, srv, "job", r, world, size)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	req := &ipc.AllReduce{Seq: 0, Count: 16, DType: "float32", Op: "sum"}
	for _, r := range []int{0, 1} {
		if err := conns[r].WriteMsg(req); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // both are in the round
	conns[1].Close()
	conns[0].UnixConn().SetDeadline(time.Now().Add(10 * time.Second))
	m, _, err := conns[0].ReadMsg()
	e, ok := m.(*ipc.Error)
	if err != nil || !ok || !strings.Contains(e.Message, "rank 1") {
		t.Fatalf("rank 0 after rank 1 hung up mid-round: %#v %v, want an Error naming rank 1", m, err)
	}
	// Rank 2, which had not asked yet, is told too, without asking.
	conns[2].UnixConn().SetDeadline(time.Now().Add(10 * time.Second))
	if m, _, err := conns[2].ReadMsg(); err != nil || m.Type() != ipc.TypeError || !strings.Contains(m.(*ipc.Error).Message, "rank 1") {
		t.Fatalf("rank 2 after the group broke: %#v %v, want an Error naming rank 1", m, err)
	}
}

// A frame that comes with a descriptor right after a rank's Goodbye is read
// by the connection's reader and never handled: its descriptor is closed
// all the same (a client repeating this must not pile up descriptors in
// the daemon).
func TestGradFramesAfterGoodbyeLeakNoFDs(t *testing.T) {
	srv, _ := testServer(t, Config{})
	const name = "grad-leak-check"
	for i := range 20 {
		c, _ := gradClient(t, srv, fmt.Sprintf("job%d", i), 0, 1, 1<<12)
		if c == nil {
			t.FailNow()
		}
		fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		c.WriteMsg(&ipc.Goodbye{})
		c.WriteMsg(&ipc.Seeds{Count: 1}, fd)
		unix.Close(fd)
		c.UnixConn().SetReadDeadline(time.Now().Add(10 * time.Second))
		c.ReadMsg() // EOF once the daemon is done with the connection
		c.Close()
	}
	waitFor(t, func() bool { return srv.Trainers() == 0 })
	left := 0
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); strings.Contains(l, name) {
			left++
		}
	}
	if left != 0 {
		t.Fatalf("%d descriptors sent after Goodbye are still open in the daemon", left)
	}
}

// A rank that says Goodbye in the middle of a round breaks the group: the
// other rank is told why, and the one that left gets no Error.
func TestGradGoodbyeMidRound(t *testing.T) {
	srv, _ := testServer(t, Config{})
	c0, c1 := gradPair(t, srv, 1<<12)
	req := &ipc.AllReduce{Seq: 0, Count: 16, DType: "float32", Op: "sum"}
	if err := c0.WriteMsg(req); err != nil {
		t.Fatal(err)
	}
	if err := c0.WriteMsg(&ipc.Goodbye{Reason: "bye"}); err != nil {
		t.Fatal(err)
	}
	c0.UnixConn().SetReadDeadline(time.Now().Add(10 * time.Second))
	if m, _, err := c0.ReadMsg(); err == nil {
		t.Fatalf("rank 0 after its Goodbye got %#v, want its connection closed", m)
	}
	// Rank 1 had not asked yet: it is told without asking.
	c1.UnixConn().SetReadDeadline(time.Now().Add(10 * time.Second))
	m, _, err := c1.ReadMsg()
	if e, ok := m.(*ipc.Error); err != nil || !ok || !strings.Contains(e.Message, "rank 0") || !strings.Contains(e.Message, "Goodbye") {
		t.Fatalf("rank 1 after rank 0's Goodbye mid-round: %#v %v, want an Error saying so", m, err)
	}
}
