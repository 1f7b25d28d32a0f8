package serve

// The test harness: a server on a temporary socket, a raw protocol client,
// and checks of what it is served.

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// hello sends Hello and takes the Welcome.
func (c *client) hello() {
	c.t.Helper()
	c.send(&ipc.Hello{Version: ipc.Version, Name: "test"})
	if _, ok := c.recv().(*ipc.Welcome); !ok {
		c.t.Fatal("no welcome")
	}
}

func (c *client) handshake(open ipc.Open) *ipc.Opened {
	c.t.Helper()
	c.hello()
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
	var seeds []int64
	c.eachBatch(epoch, func(b *ipc.BatchReady) { seeds = append(seeds, checkBatch(c.t, c, src, b)...) })
	return seeds
}

// eachBatch runs epoch: fn sees every batch, which is released after it.
// The batches must be of epoch, and EpochEnd must count what Opened said.
func (c *client) eachBatch(epoch uint32, fn func(b *ipc.BatchReady)) {
	c.t.Helper()
	c.send(&ipc.StartEpoch{Epoch: epoch})
	for {
		switch m := c.recv().(type) {
		case *ipc.BatchReady:
			if m.Epoch != epoch {
				c.t.Fatalf("batch of epoch %d in epoch %d", m.Epoch, epoch)
			}
			fn(m)
			c.send(&ipc.Release{Slot: m.Slot, Epoch: m.Epoch, Index: m.Index})
		case *ipc.EpochEnd:
			if int(m.NumBatches) != int(c.opened.NumBatches) {
				c.t.Fatalf("epoch end after %d batches, opened said %d", m.NumBatches, c.opened.NumBatches)
			}
			return
		default:
			c.t.Fatalf("unexpected %#v", m)
		}
	}
}

// linkInputs is a link batch's pair count, its n_id and its input_id (the
// positions of its pairs).
func (c *client) linkInputs(b *ipc.BatchReady) (pairs int, nid, in []byte) {
	B, _ := c.opened.Count(b, "input_id")
	nodes, _ := c.opened.Count(b, "n_id")
	return int(B), c.region(b.Slot, "n_id", 8*int(nodes)), c.region(b.Slot, "input_id", 8*int(B))
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
