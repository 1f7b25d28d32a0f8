package serve

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/ipc"
)

// seedsChunk is how many ids takeSeeds reads from the memfd at a time.
const seedsChunk = 1 << 16

// takeSeeds handles a Seeds message (docs/protocol.md, "11 Seeds"): it
// checks the message order, reads m.Count node ids from the memfd in fds
// with pread (never a mapping: a client that truncates its memfd gets an
// error, not a SIGBUS in the daemon), checks them against the graph and
// keeps a copy for the Open that names ipc.CustomSplit. It closes fds.
func (ss *session) takeSeeds(m *ipc.Seeds, fds []int) error {
	defer ipc.CloseFDs(fds)
	ss.mu.Lock()
	err := ss.state.Next(ipc.FromClient, ipc.TypeSeeds)
	ss.mu.Unlock()
	if err != nil {
		return err
	}
	if ss.custom != nil {
		return perrf(ipc.CodeBadRequest, "a second Seeds message: custom seeds are sent once, before Open")
	}
	g := &ss.srv.src.Data.Graph
	n := g.NumNodes
	// Node ids of seeds, or the ends of the pairs of a link:custom split.
	limit := max(n, 2*g.NumEdges())
	switch {
	case m.Count == 0:
		return perrf(ipc.CodeBadRequest, "Seeds with no seeds")
	case m.Count > uint64(limit):
		return perrf(ipc.CodeLimit, "%d seeds for a graph of %d nodes and %d edges (at most %d)", m.Count, n, g.NumEdges(), limit)
	}
	// The copy counts against the memory budget like slots do, so
	// connections cannot pile up seed lists the daemon holds.
	if err := ss.srv.reserve(int64(8*m.Count), "custom seeds"); err != nil {
		return err
	}
	ss.seedBytes = int64(8 * m.Count)
	ids := make([]int64, m.Count)
	buf := make([]byte, 8*min(len(ids), seedsChunk))
	for at := 0; at < len(ids); {
		k := min(len(ids)-at, seedsChunk)
		b := buf[:8*k]
		for got := 0; got < len(b); {
			r, err := unix.Pread(fds[0], b[got:], int64(8*at+got))
			if err == unix.EINTR {
				continue
			}
			if err != nil || r == 0 {
				return perrf(ipc.CodeBadRequest, "Seeds: cannot read %d ids from its memfd (%d bytes read at offset %d): %v", m.Count, got, 8*at, err)
			}
			got += r
		}
		for i := 0; i < k; i++ {
			v := int64(binary.LittleEndian.Uint64(b[8*i:]))
			if v < 0 || v >= n {
				return perrf(ipc.CodeBadRequest, "Seeds: id %d at position %d is outside [0, %d)", v, at+i, n)
			}
			ids[at+i] = v
		}
		at += k
	}
	ss.custom = ids
	return nil
}
