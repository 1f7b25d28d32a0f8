package serve

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
)

// testServer serves a small generated dataset on a socket in a temp dir.
func testServer(t *testing.T, cfg Config, setup ...func(*Server)) (*Server, *Source) {
	t.Helper()
	src, err := OpenSource("synthetic:cora:0.5:3", false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return serveSource(t, src, cfg, setup...), src
}

// serveSource serves src on a socket in a temporary directory until the test
// ends, then closes src. setup runs before the server listens.
func serveSource(t *testing.T, src *Source, cfg Config, setup ...func(*Server)) *Server {
	t.Helper()
	cfg.Socket = filepath.Join(t.TempDir(), "loaderd.sock")
	srv := New(src, cfg, nil)
	t.Cleanup(func() { src.Close() }) // runs after the server below stopped
	for _, f := range setup {
		f(srv)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv
}

// client is a raw protocol client for tests.
type client struct {
	t      *testing.T
	conn   *ipc.Conn
	opened *ipc.Opened
	mem    []byte
}

func dial(t *testing.T, srv *Server) *client {
	t.Helper()
	c, err := ipc.Dial(srv.cfg.Socket, ipc.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, conn: c}
}

func (c *client) send(m ipc.Msg) {
	c.t.Helper()
	if err := c.conn.WriteMsg(m); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) recv() ipc.Msg {
	c.t.Helper()
	c.conn.UnixConn().SetReadDeadline(time.Now().Add(10 * time.Second))
	m, fds, err := c.conn.ReadMsg()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if len(fds) == 1 {
		o := m.(*ipc.Opened)
		mem, err := unix.Mmap(fds[0], 0, int(o.SlotBytes)*int(o.Slots), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			c.t.Fatal(err)
		}
		unix.Close(fds[0])
		c.mem = mem
		c.t.Cleanup(func() { unix.Munmap(mem) })
	}
	return m
}

func (c *client) handshake(open ipc.Open) *ipc.Opened {
	c.t.Helper()
	c.send(&ipc.Hello{Version: ipc.Version, Name: "test"})
	if _, ok := c.recv().(*ipc.Welcome); !ok {
		c.t.Fatal("no welcome")
	}
	c.send(&open)
	m := c.recv()
	o, ok := m.(*ipc.Opened)
	if !ok {
		c.t.Fatalf("got %#v, want Opened", m)
	}
	c.opened = o
	return o
}

// expectError reads until the daemon's Error and checks its code and text.
func (c *client) expectError(code ipc.Code, text string) {
	c.t.Helper()
	for {
		c.conn.UnixConn().SetReadDeadline(time.Now().Add(10 * time.Second))
		m, fds, err := c.conn.ReadMsg()
		ipc.CloseFDs(fds)
		if err != nil {
			c.t.Fatalf("connection ended without an Error frame: %v", err)
		}
		if e, ok := m.(*ipc.Error); ok {
			if e.Code != code || !strings.Contains(e.Message, text) {
				c.t.Fatalf("got error %s %q, want %s containing %q", e.Code, e.Message, code, text)
			}
			// And then the daemon closes the connection.
			if _, _, err := c.conn.ReadMsg(); err == nil {
				c.t.Fatal("connection still open after Error")
			}
			return
		}
	}
}

func (c *client) region(slot uint32, name string, n int) []byte {
	r := c.opened.Region(name)
	off := int(slot)*int(c.opened.SlotBytes) + int(r.Offset)
	return c.mem[off : off+n]
}

func i64(b []byte, i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }

func openReq() ipc.Open {
	return ipc.Open{Split: "train", BatchSize: 32, Fanouts: []int32{5, 3}, Shuffle: true, Seed: 7,
		WorldSize: 1, Device: "cpu"}
}

// sizes are a node batch's nodes, edges, seeds and per-hop node counts, as
// its BatchReady reports them.
func (c *client) sizes(b *ipc.BatchReady) (nodes, edges, seeds int, perHop []uint32) {
	c.t.Helper()
	if err := c.opened.Matches(b); err != nil {
		c.t.Fatal(err)
	}
	n, ok1 := c.opened.Count(b, "n_id")
	e, ok2 := c.opened.Count(b, "edge_index")
	bs, ok3 := c.opened.Scalar(b, "batch_size")
	hops, ok4 := c.opened.List(b, "num_sampled_nodes")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		c.t.Fatalf("BatchReady %+v lacks a node batch's counts", b)
	}
	return int(n), int(e), int(bs), hops
}

// checkBatch verifies a served batch against the dataset itself.
func checkBatch(t *testing.T, c *client, src *Source, b *ipc.BatchReady) []int64 {
	t.Helper()
	d := src.Data
	n, e, batchSize, perHop := c.sizes(b)
	nid := c.region(b.Slot, "n_id", 8*n)
	y := c.region(b.Slot, "y", 8*n)
	rb := d.RowBytes()
	x := c.region(b.Slot, "x", rb*n)
	ei := c.region(b.Slot, "edge_index", 16*e)
	ids := make([]int64, n)
	seen := map[int64]bool{}
	for i := 0; i < n; i++ {
		v := i64(nid, i)
		ids[i] = v
		if seen[v] {
			t.Fatalf("node %d twice in n_id", v)
		}
		seen[v] = true
		if !bytes.Equal(x[i*rb:(i+1)*rb], d.Row(v)) {
			t.Fatalf("x row %d is not node %d's features", i, v)
		}
		if i64(y, i) != int64(d.Labels[v]) {
			t.Fatalf("y[%d] = %d, want %d", i, i64(y, i), d.Labels[v])
		}
	}
	sum := 0
	for _, k := range perHop {
		sum += int(k)
	}
	if sum != n || int(perHop[0]) != batchSize {
		t.Fatalf("num_sampled_nodes %v for %d nodes, batch size %d", perHop, n, batchSize)
	}
	eid := c.region(b.Slot, "e_id", 8*e)
	for j := 0; j < e; j++ {
		src, dst := i64(ei, j), i64(ei, e+j)
		// e_id names the edge: the CSR row of the target holds the source
		// at that position.
		if id := i64(eid, j); id < d.Graph.Indptr[ids[dst]] || id >= d.Graph.Indptr[ids[dst]+1] || d.Graph.Neighbor(id) != ids[src] {
			t.Fatalf("edge %d (%d -> %d): e_id %d is not that edge", j, ids[src], ids[dst], id)
		}
		if src < 0 || src >= int64(n) || dst < 0 || dst >= int64(n) {
			t.Fatalf("edge %d: local ids %d->%d out of range", j, src, dst)
		}
		// Messages flow from the sampled neighbour (src) to the node that
		// sampled it (dst): ids[src] is a neighbour of ids[dst].
		g := &d.Graph
		u := ids[dst]
		found := false
		for k := g.Indptr[u]; k < g.Indptr[u+1]; k++ {
			if g.Neighbor(k) == ids[src] {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("edge %d: %d is not a neighbour of %d", j, ids[src], u)
		}
	}
	return ids[:batchSize]
}

// epoch runs one epoch and returns the seeds served, in order.
func (c *client) epoch(src *Source, epoch uint32) []int64 {
	c.t.Helper()
	c.send(&ipc.StartEpoch{Epoch: epoch})
	var seeds []int64
	for {
		switch m := c.recv().(type) {
		case *ipc.BatchReady:
			if m.Epoch != epoch {
				c.t.Fatalf("batch of epoch %d in epoch %d", m.Epoch, epoch)
			}
			seeds = append(seeds, checkBatch(c.t, c, src, m)...)
			c.send(&ipc.Release{Slot: m.Slot, Epoch: m.Epoch, Index: m.Index})
		case *ipc.EpochEnd:
			if int(m.NumBatches) != int(c.opened.NumBatches) {
				c.t.Fatalf("epoch end after %d batches, opened said %d", m.NumBatches, c.opened.NumBatches)
			}
			return seeds
		default:
			c.t.Fatalf("unexpected %#v", m)
		}
	}
}

func TestOneTrainerEpochs(t *testing.T) {
	srv, src := testServer(t, Config{})
	c := dial(t, srv)
	c.handshake(openReq())
	train := src.Data.Splits[datasets.SplitTrain]
	var first []int64
	for e := uint32(0); e < 2; e++ {
		got := c.epoch(src, e)
		if len(got) != len(train) {
			t.Fatalf("epoch %d served %d seeds, split has %d", e, len(got), len(train))
		}
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		want := slices.Clone(train)
		slices.Sort(want)
		if !slices.Equal(sorted, want) {
			t.Fatalf("epoch %d did not serve the split exactly once", e)
		}
		if e == 0 {
			first = got
		} else if slices.Equal(first, got) {
			t.Fatal("shuffle gave the same order in two epochs")
		}
	}
	c.send(&ipc.Goodbye{})
	waitFor(t, func() bool { return srv.Trainers() == 0 })
}

func TestTwoTrainersSplitTheEpoch(t *testing.T) {
	srv, src := testServer(t, Config{})
	var mu sync.Mutex
	all := map[int64]int{}
	var wg sync.WaitGroup
	for rank := uint32(0); rank < 2; rank++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, srv)
			o := openReq()
			// 813 train seeds: drop_last drops one so the ranks split 812
			// evenly, 406 each = 14 batches of 29, none short.
			o.Rank, o.WorldSize, o.DropLast, o.BatchSize = rank, 2, true, 29
			c.handshake(o)
			seeds := c.epoch(src, 0)
			mu.Lock()
			for _, s := range seeds {
				all[s]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	train := src.Data.Splits[datasets.SplitTrain]
	for s, n := range all {
		if n != 1 {
			t.Fatalf("seed %d served %d times", s, n)
		}
	}
	if len(train) != 813 {
		t.Fatalf("the generated split changed size (%d): adjust the batch size", len(train))
	}
	if want := len(train) / 2 * 2; len(all) != want {
		t.Fatalf("two ranks served %d distinct seeds, want %d", len(all), want)
	}
}

func TestHeldSlotNeverChanges(t *testing.T) {
	srv, src := testServer(t, Config{Slots: 3})
	c := dial(t, srv)
	c.handshake(openReq())
	c.send(&ipc.StartEpoch{Epoch: 0})
	first := c.recv().(*ipc.BatchReady)
	nodes, _, _, _ := c.sizes(first)
	n := nodes * src.Data.RowBytes()
	snapshot := slices.Clone(c.region(first.Slot, "x", n))
	// Keep the first batch; take and release the others. The daemon runs
	// ahead through the other slots but must never refill the held one.
	for i := 0; i < 6; i++ {
		m := c.recv()
		b, ok := m.(*ipc.BatchReady)
		if !ok {
			break
		}
		if b.Slot == first.Slot {
			t.Fatalf("held slot %d was handed out again", b.Slot)
		}
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	time.Sleep(50 * time.Millisecond)
	if !bytes.Equal(snapshot, c.region(first.Slot, "x", n)) {
		t.Fatal("the held slot's contents changed")
	}
}

func TestBadRequests(t *testing.T) {
	srv, _ := testServer(t, Config{MaxSlots: 4})
	cases := []struct {
		name string
		mod  func(o *ipc.Open)
		code ipc.Code
		text string
	}{
		{"unknown split", func(o *ipc.Open) { o.Split = "nope" }, ipc.CodeNotFound, `no split "nope"`},
		{"batch size 0", func(o *ipc.Open) { o.BatchSize = 0 }, ipc.CodeBadRequest, "batch_size"},
		{"no fanouts", func(o *ipc.Open) { o.Fanouts = nil }, ipc.CodeBadRequest, "fanouts"},
		{"rank beyond world", func(o *ipc.Open) { o.Rank = 2; o.WorldSize = 2 }, ipc.CodeBadRequest, "rank"},
		{"gpu on cpu daemon", func(o *ipc.Open) { o.Device = "cuda:0" }, ipc.CodeBadRequest, "CPU path only"},
		{"dtype conversion", func(o *ipc.Open) { o.FeatureDType = "float16" }, ipc.CodeBadRequest, "does not convert"},
		{"too many slots", func(o *ipc.Open) { o.Slots = 5 }, ipc.CodeLimit, "limit 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv)
			c.send(&ipc.Hello{Version: ipc.Version})
			c.recv()
			o := openReq()
			tc.mod(&o)
			if err := c.conn.WriteMsg(&o); err != nil {
				// Some requests cannot even be encoded (limits checked on
				// both sides); the daemon's side is covered by the raw
				// frame tests.
				t.Skipf("client refuses to encode: %v", err)
			}
			c.expectError(tc.code, tc.text)
		})
	}
	// The daemon carries on: a good trainer still gets its batches.
	good := dial(t, srv)
	good.handshake(openReq())
}

func TestBadFrames(t *testing.T) {
	srv, _ := testServer(t, Config{})
	raw := func(t *testing.T, b []byte) *client {
		c := dial(t, srv)
		if _, err := c.conn.UnixConn().Write(b); err != nil {
			t.Fatal(err)
		}
		return c
	}
	hello, _ := ipc.Marshal(&ipc.Hello{Version: ipc.Version})
	t.Run("oversized", func(t *testing.T) {
		raw(t, []byte{0xff, 0xff, 0xff, 0x7f, 1, 0, 0, 0}).expectError(ipc.CodeLimit, "")
	})
	t.Run("unknown type", func(t *testing.T) {
		raw(t, []byte{4, 0, 0, 0, 0xee, 0x0e, 0, 0}).expectError(ipc.CodeBadMessage, "")
	})
	t.Run("garbage payload", func(t *testing.T) {
		b := slices.Clone(hello)
		copy(b[8:], "XXXX")
		raw(t, b).expectError(ipc.CodeUnsupportedVersion, "")
	})
	t.Run("out of order", func(t *testing.T) {
		c := dial(t, srv)
		c.send(&ipc.StartEpoch{})
		c.expectError(ipc.CodeOutOfOrder, "")
	})
	t.Run("wrong version", func(t *testing.T) {
		c := dial(t, srv)
		c.send(&ipc.Hello{Version: 9})
		c.expectError(ipc.CodeUnsupportedVersion, "version 9")
	})
	t.Run("release not held", func(t *testing.T) {
		c := dial(t, srv)
		c.handshake(openReq())
		c.send(&ipc.StartEpoch{})
		c.send(&ipc.Release{Slot: 1, Epoch: 0, Index: 99})
		c.expectError(ipc.CodeBadRequest, "release of slot 1")
	})
	t.Run("truncated then hang up", func(t *testing.T) {
		c := raw(t, hello[:5])
		c.conn.UnixConn().CloseWrite()
		c.expectError(ipc.CodeBadFrame, "")
	})
	good := dial(t, srv)
	good.handshake(openReq())
}

func TestDisconnectFreesSlots(t *testing.T) {
	srv, _ := testServer(t, Config{})
	c := dial(t, srv)
	c.handshake(openReq())
	c.send(&ipc.StartEpoch{})
	c.recv()
	if srv.Trainers() != 1 || srv.SlotBytes() == 0 {
		t.Fatalf("trainers %d slot bytes %d", srv.Trainers(), srv.SlotBytes())
	}
	c.conn.Close() // no Goodbye
	waitFor(t, func() bool { return srv.Trainers() == 0 && srv.SlotBytes() == 0 && srv.BudgetUsed() == 0 })
}

func TestMemoryBudgetAndTrainerLimit(t *testing.T) {
	srv, _ := testServer(t, Config{MaxTrainers: 1})
	a := dial(t, srv)
	a.handshake(openReq())
	b := dial(t, srv)
	b.send(&ipc.Hello{Version: ipc.Version})
	b.recv()
	o := openReq()
	b.send(&o)
	b.expectError(ipc.CodeBusy, "limit 1")

	// Slots that can never fit are a limit; slots that do not fit now,
	// beside another trainer's, make the daemon busy.
	srv2, _ := testServer(t, Config{MemoryBudget: 1024})
	c := dial(t, srv2)
	c.send(&ipc.Hello{Version: ipc.Version})
	c.recv()
	c.send(&o)
	c.expectError(ipc.CodeLimit, "exceed the whole memory budget")

	probe, _ := testServer(t, Config{})
	p := dial(t, probe)
	p.handshake(openReq())
	one := probe.BudgetUsed()
	srv3, _ := testServer(t, Config{MemoryBudget: one + one/2})
	first := dial(t, srv3)
	first.handshake(openReq())
	second := dial(t, srv3)
	second.send(&ipc.Hello{Version: ipc.Version})
	second.recv()
	second.send(&o)
	second.expectError(ipc.CodeBusy, "do not fit the memory budget")
}

func TestShutdownSaysGoodbyeAndRemovesSocket(t *testing.T) {
	src, err := OpenSource("synthetic:cora:0.2:1", true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sock := filepath.Join(t.TempDir(), "s.sock")
	srv := New(src, Config{Socket: sock}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Serve(ctx) }()
	waitFor(t, func() bool {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	c := dial(t, srv)
	c.handshake(openReq())
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m, _, err := c.conn.ReadMsg()
	if g, ok := m.(*ipc.Goodbye); !ok || !strings.Contains(g.Reason, "shutting down") {
		t.Fatalf("got %#v %v, want Goodbye", m, err)
	}
	if _, _, err := c.conn.ReadMsg(); !errors.Is(err, io.EOF) && err == nil {
		t.Fatal("connection open after shutdown")
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Fatal("socket still accepts")
	}
}

func TestStaleSocketReplacedLiveRefused(t *testing.T) {
	srv, _ := testServer(t, Config{})
	other := New(srv.src, Config{Socket: srv.cfg.Socket}, nil)
	if err := other.Listen(); err == nil || !strings.Contains(err.Error(), "another daemon") {
		t.Fatalf("second daemon on a live socket: %v", err)
	}
	// A stale socket file (no listener) is replaced.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, _ := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	l.SetUnlinkOnClose(false)
	l.Close()
	s3 := New(srv.src, Config{Socket: stale}, nil)
	if err := s3.Listen(); err != nil {
		t.Fatal(err)
	}
	s3.ln.Close()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
