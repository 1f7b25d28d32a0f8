package serve

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/ipc"
)

// seedsChunk is how many ids takeSeeds reads from the memfd at a time.
const seedsChunk = 1 << 16

// maxSeedIDs is the most ids one Seeds message may carry whatever the
// memory budget (16 bytes an id with times: 1 TiB).
const maxSeedIDs = 1 << 36

// takeSeeds handles a Seeds message (docs/protocol.md, "11 Seeds"): it
// checks the message order, reads m.Count node ids from the memfd in fds
// with pread (never a mapping: a client that truncates its memfd gets an
// error, not a SIGBUS in the daemon), checks them against the graph and
// keeps a copy for the Open that names ipc.CustomSplit. With m.Times it
// reads as many seed times after the ids and keeps them too (session.times,
// for a temporal Open). For a heterogeneous dataset the ids are of the
// Open's input type, which is not known yet: they are checked against the
// largest node type here and against the input type by the Open. It
// closes fds.
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
	n := ss.srv.src.seedNodes()
	// Node ids of seeds (they may repeat), or the ends of the pairs of a
	// link:custom split: an evaluation set with many negatives a source
	// (ogbl-citation2's valid split: 87 M pairs, 174 M ids) outnumbers the
	// graph's nodes and edges, so the memory budget bounds the count, and
	// maxSeedIDs only keeps the sizes far from overflowing.
	switch {
	case m.Count == 0:
		return perrf(ipc.CodeBadRequest, "Seeds with no seeds")
	case m.Count > maxSeedIDs:
		return perrf(ipc.CodeLimit, "%d seeds (at most %d)", m.Count, uint64(maxSeedIDs))
	}
	perID := int64(8)
	if m.Times {
		perID = 16
	}
	// The copy counts against the memory budget like slots do, so
	// connections cannot pile up seed lists the daemon holds.
	if err := ss.srv.reserve(perID*int64(m.Count), "custom seeds"); err != nil {
		return err
	}
	ss.seedBytes = perID * int64(m.Count)
	ids := make([]int64, m.Count)
	err = preadInt64s(fds[0], ids, 0, "ids", func(v int64, i int) error {
		if v < 0 || v >= n {
			return perrf(ipc.CodeBadRequest, "Seeds: id %d at position %d is outside [0, %d)", v, i, n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var times []int64
	if m.Times {
		times = make([]int64, m.Count)
		if err := preadInt64s(fds[0], times, 8*int64(m.Count), "times", nil); err != nil {
			return err
		}
	}
	ss.custom, ss.times = ids, times
	return nil
}

// preadInt64s fills dst with little-endian int64s read from fd at off,
// in chunks, calling check (when not nil) on each value and its position.
func preadInt64s(fd int, dst []int64, off int64, what string, check func(v int64, i int) error) error {
	buf := make([]byte, 8*min(len(dst), seedsChunk))
	for at := 0; at < len(dst); {
		k := min(len(dst)-at, seedsChunk)
		b := buf[:8*k]
		for got := 0; got < len(b); {
			r, err := unix.Pread(fd, b[got:], off+int64(8*at+got))
			if err == unix.EINTR {
				continue
			}
			if err != nil || r == 0 {
				return perrf(ipc.CodeBadRequest, "Seeds: cannot read %d %s from its memfd (%d bytes read at offset %d): %v", len(dst), what, got, off+int64(8*at), err)
			}
			got += r
		}
		for i := 0; i < k; i++ {
			v := int64(binary.LittleEndian.Uint64(b[8*i:]))
			if check != nil {
				if err := check(v, at+i); err != nil {
					return err
				}
			}
			dst[at+i] = v
		}
		at += k
	}
	return nil
}

// seedNodes is the node ids a seed may have: for a heterogeneous dataset,
// the largest node type's count (the Open checks the seeds against its
// input type).
func (s *Source) seedNodes() (nodes int64) {
	if s.Hetero == nil {
		return s.Data.Graph.NumNodes
	}
	for _, t := range s.Hetero.NodeTypes {
		nodes = max(nodes, t.NumNodes)
	}
	return nodes
}
