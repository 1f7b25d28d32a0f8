package serve

// Config.GradTimeout: ranks that never come do not hold the others forever.

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/ipc"
)

// gradPair registers ranks 0 and 1 of job "job" (world 2) at once and
// returns their connections; the test ends unless both registered.
func gradPair(t *testing.T, srv *Server, bytes uint64) (c0, c1 *ipc.Conn) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c0, _ = gradClient(t, srv, "job", 0, 2, bytes) }()
	go func() { defer wg.Done(); c1, _ = gradClient(t, srv, "job", 1, 2, bytes) }()
	wg.Wait()
	if c0 == nil || c1 == nil {
		t.FailNow()
	}
	return c0, c1
}

// expectGradError reads c until an Error arrives (within 10 s) and checks
// that its message holds every one of want.
func expectGradError(t *testing.T, c *ipc.Conn, who string, want ...string) {
	t.Helper()
	c.UnixConn().SetReadDeadline(time.Now().Add(10 * time.Second))
	m, fds, err := c.ReadMsg()
	ipc.CloseFDs(fds)
	e, ok := m.(*ipc.Error)
	if err != nil || !ok {
		t.Fatalf("%s: got %#v, %v; want an Error", who, m, err)
	}
	for _, w := range want {
		if !strings.Contains(e.Message, w) {
			t.Fatalf("%s: Error %q does not say %q", who, e.Message, w)
		}
	}
}

// TestGradRegistrationTimesOut: ranks 0 and 2 of a job of 3 register and
// rank 1 never does; after the timeout both are told that rank 1 did not
// register, instead of waiting forever.
func TestGradRegistrationTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv, _ := testServer(t, Config{GradTimeout: timeout})
	start := time.Now()
	var conns []*ipc.Conn
	for _, rank := range []uint32{0, 2} {
		c, err := ipc.Dial(srv.cfg.Socket, ipc.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.UnixConn().SetDeadline(time.Now().Add(10 * time.Second))
		c.WriteMsg(&ipc.Hello{Version: ipc.Version, Name: "grad"})
		if m, _, err := c.ReadMsg(); err != nil || m.Type() != ipc.TypeWelcome {
			t.Fatalf("welcome: %v %v", m, err)
		}
		if err := c.WriteMsg(&ipc.RegisterGrad{Job: "job", Rank: rank, WorldSize: 3, Device: "cpu", Bytes: 1 << 12}); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		expectGradError(t, c, []string{"rank 0", "rank 2"}[i], "rank(s) [1] of 3 did not register", "--grad-timeout")
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("told after %v, before the %v timeout", took, timeout)
	}
	waitFor(t, func() bool { return srv.BudgetUsed() == 0 })
}

// TestGradRoundTimesOut: of two registered ranks, rank 0 asks for an
// all-reduce and rank 1 never does; rank 0 is told rank 1 did not ask, and
// so is rank 1, without asking; both leave, their budget comes back, and
// the job can register again and all-reduce.
func TestGradRoundTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv, _ := testServer(t, Config{GradTimeout: timeout})
	c0, c1 := gradPair(t, srv, 1<<12)
	req := &ipc.AllReduce{Seq: 0, Count: 16, DType: "float32", Op: "sum"}
	start := time.Now()
	if err := c0.WriteMsg(req); err != nil {
		t.Fatal(err)
	}
	expectGradError(t, c0, "rank 0", "all-reduce 0", "rank(s) [1] did not ask for it", "--grad-timeout")
	if took := time.Since(start); took < timeout {
		t.Fatalf("told after %v, before the %v timeout", took, timeout)
	}
	expectGradError(t, c1, "rank 1 (between rounds)", "rank(s) [1] did not ask for it")
	waitFor(t, func() bool { return srv.BudgetUsed() == 0 })
	// The job starts again (the ranks restarted): a new group.
	c0, c1 = gradPair(t, srv, 1<<12)
	for r, c := range []*ipc.Conn{c0, c1} {
		c.WriteMsg(req)
		defer func() {
			c.UnixConn().SetReadDeadline(time.Now().Add(10 * time.Second))
			if m, _, err := c.ReadMsg(); err != nil || m.Type() != ipc.TypeAllReduceDone {
				t.Errorf("rank %d of the job started again: %#v %v, want AllReduceDone", r, m, err)
			}
		}()
	}
}

// TestGradBrokenGroupMakesWayForTheNext: rank 0 of a pair leaves before its
// peer has even asked for anything; the peer, waiting between rounds, is
// told at once, and the job registers afresh.
func TestGradBrokenGroupMakesWayForTheNext(t *testing.T) {
	srv, _ := testServer(t, Config{})
	c0, c1 := gradPair(t, srv, 1<<12)
	c0.Close()
	expectGradError(t, c1, "rank 1", "left the gradient ring")
	n0, _ := gradClient(t, srv, "job", 0, 1, 1<<12) // the job again, alone this time
	if n0 == nil {
		t.FailNow()
	}
	n0.WriteMsg(&ipc.AllReduce{Seq: 0, Count: 4, DType: "float32", Op: "sum"})
	n0.UnixConn().SetReadDeadline(time.Now().Add(10 * time.Second))
	if m, _, err := n0.ReadMsg(); err != nil || m.Type() != ipc.TypeAllReduceDone {
		t.Fatalf("the job registered again: %#v %v, want AllReduceDone", m, err)
	}
}

// TestGradSlowRanksWithinTheTimeout: rounds that each end within the
// timeout, with pauses between them longer than it (a rank's forward and
// backward pass), never break the ring; neither does a job that took longer
// than the timeout in all to register its ranks one by one, as long as the
// last came in time.
func TestGradSlowRanksWithinTheTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	srv, _ := testServer(t, Config{GradTimeout: timeout})
	var c0, c1 *ipc.Conn
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c0, _ = gradClient(t, srv, "job", 0, 2, 1<<12) }()
	go func() {
		defer wg.Done()
		time.Sleep(timeout / 2) // the second rank comes late, but in time
		c1, _ = gradClient(t, srv, "job", 1, 2, 1<<12)
	}()
	wg.Wait()
	if c0 == nil || c1 == nil {
		t.FailNow()
	}
	for seq := range 2 {
		time.Sleep(timeout * 5 / 4) // longer than the timeout between rounds
		req := &ipc.AllReduce{Seq: uint64(seq), Count: 16, DType: "float32", Op: "sum"}
		c0.WriteMsg(req)
		time.Sleep(timeout / 4) // rank 1 asks a little later
		c1.WriteMsg(req)
		for r, c := range []*ipc.Conn{c0, c1} {
			c.UnixConn().SetReadDeadline(time.Now().Add(10 * time.Second))
			m, _, err := c.ReadMsg()
			if d, ok := m.(*ipc.AllReduceDone); err != nil || !ok || d.Seq != uint64(seq) {
				t.Fatalf("round %d rank %d: %#v %v, want AllReduceDone", seq, r, m, err)
			}
		}
	}
}

// TestGradBreakAndRejoinChurnLeavesNothing: a hostile client that registers
// a job's rank 0 and never reads again, while rank 1 registers and hangs up,
// over and over under one job name: each broken group tells the rank that
// never reads and ends its connection, so no group, rank, timer's group or
// byte of the memory budget piles up, and a well-behaved job still runs.
func TestGradBreakAndRejoinChurnLeavesNothing(t *testing.T) {
	srv, _ := testServer(t, Config{MemoryBudget: 64 << 20, MaxTrainers: 4})
	for i := range 20 {
		mute, err := ipc.Dial(srv.cfg.Socket, ipc.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		mute.WriteMsg(&ipc.Hello{Version: ipc.Version, Name: "mute"})
		mute.WriteMsg(&ipc.RegisterGrad{Job: "churn", Rank: 0, WorldSize: 2, Device: "cpu", Bytes: 16 << 20})
		c1, _ := gradClient(t, srv, "churn", 1, 2, 16<<20)
		if c1 == nil {
			t.Fatalf("round %d: rank 1 not registered", i)
		}
		c1.Close()
		// The mute rank is told (into its socket buffer) and let go: its
		// budget and rank come back without it reading anything.
		waitFor(t, func() bool { return srv.BudgetUsed() == 0 && srv.Trainers() == 0 })
		mute.Close()
	}
	gs := srv.gradGroups()
	gs.mu.Lock()
	groups, ranks := len(gs.m), gs.ranks
	gs.mu.Unlock()
	if groups != 0 || ranks != 0 {
		t.Fatalf("after the churn: %d groups, %d ranks registered, want none", groups, ranks)
	}
	c0, c1 := gradPair(t, srv, 1<<12)
	for _, c := range []*ipc.Conn{c0, c1} {
		c.WriteMsg(&ipc.AllReduce{Seq: 0, Count: 4, DType: "float32", Op: "sum"})
	}
	for r, c := range []*ipc.Conn{c0, c1} {
		c.UnixConn().SetReadDeadline(time.Now().Add(10 * time.Second))
		if m, _, err := c.ReadMsg(); err != nil || m.Type() != ipc.TypeAllReduceDone {
			t.Fatalf("rank %d after the churn: %#v %v, want AllReduceDone", r, m, err)
		}
	}
}
