package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/pinned"
)

// The table socket and structure-only slots are what a trainer needs to run
// its own feature path over loaderd's sampler (the issue-6 baselines: a CPU
// gather with index_select, or the whole table copied into GPU memory) with
// no second copy of the table in host memory:
//
//   - ServeTable listens on a second Unix socket. Every accepted peer (same
//     SO_PEERCRED check as trainers) gets one JSON line describing the
//     feature table and, with it, the table's memfd (SCM_RIGHTS). It maps the
//     fd read-only. The table must be in shared memory: pinned.SetShared(true)
//     before the source is opened (loaderd serve --table-socket does that).
//   - A trainer that opens with FeatureDType "none" on the CPU path gets
//     batches of the same sampler without their x region (batch.NodeOptions
//     NoFeatures): y, n_id and edge_index only.

// NoFeatures is the Open.FeatureDType asking for batches without features.
const NoFeatures = "none"

// TableInfo is the JSON line sent with the table's fd.
type TableInfo struct {
	Dataset      string `json:"dataset"`
	NumRows      int64  `json:"num_rows"`
	RowBytes     int    `json:"row_bytes"`
	FeatureDim   int    `json:"feature_dim"`
	FeatureDType string `json:"feature_dtype"`
	Bytes        int64  `json:"bytes"` // rows x row_bytes; the fd may be longer (rounded to 2 MiB)
	Offset       int64  `json:"offset"`
	NumClasses   int    `json:"num_classes"`
	// DatasetBytes is the dataset's own bytes in memory: features, CSR
	// (indptr and indices), labels and splits.
	DatasetBytes int64 `json:"dataset_bytes"`
}

// DatasetBytes is the bytes of the dataset's arrays: features, CSR, labels
// and splits (what the daemon's resident memory is measured against).
func (s *Source) DatasetBytes() int64 {
	d := s.Data
	n := int64(len(d.Features)) + 8*int64(len(d.Graph.Indptr)) + 4*int64(len(d.Graph.Indices32)) +
		8*int64(len(d.Graph.Indices64)) + 4*int64(len(d.Labels))
	for _, ids := range d.Splits {
		n += 8 * int64(len(ids))
	}
	return n
}

// TableFD returns the memfd holding the source's feature table and the
// table's offset in it (a dataset's rows follow its file's header), or an
// error saying why the table cannot be shared.
func (s *Source) TableFD() (fd int, off int64, err error) {
	if s.Hetero != nil {
		return -1, 0, errors.New("the dataset is heterogeneous (a feature table per node type): the table socket shares a homogeneous dataset's one table")
	}
	fd, off, ok := pinned.SharedFD(s.Data.Features)
	if !ok {
		return -1, 0, errors.New("the feature table is not in shared memory (start loaderd with --table-socket, with a synthetic dataset or on the GPU path)")
	}
	return fd, off, nil
}

// ServeTable listens on path (mode 0600, or the trainer socket's mode) and
// hands every allowed peer the feature table's fd, until ctx ends. It fails
// at once when the table is not shareable.
func (s *Server) ServeTable(ctx context.Context, path string) error {
	fd, off, err := s.src.TableFD()
	if err != nil {
		return err
	}
	d := s.src.Data
	info := TableInfo{Dataset: d.Name, NumRows: d.Graph.NumNodes, RowBytes: d.RowBytes(), FeatureDim: d.FeatureDim,
		FeatureDType: string(d.FeatureDType), Bytes: int64(len(d.Features)), Offset: off, NumClasses: d.NumClasses,
		DatasetBytes: s.src.DatasetBytes()}
	line, _ := json.Marshal(info)
	line = append(line, '\n')
	// Peers get a read-only open of the memfd, not the daemon's own
	// read-write one: they can neither write the table nor resize it (a
	// shrunk table would make the daemon's gather fault).
	ro, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("serve: a read-only descriptor of the feature table: %w", err)
	}
	defer unix.Close(ro)
	ln, err := listenSocket(path, s.access(), s.log)
	if err != nil {
		return err
	}
	s.log.Info("sharing the feature table", "socket", path, "bytes", info.Bytes)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		p, err := (*s.peerCred.Load())(c)
		if err != nil || !s.allowed(p) {
			s.log.Warn("table socket: refused peer", "pid", p.pid, "uid", p.uid, "gid", p.gid, "err", err)
			c.Close()
			continue
		}
		if _, _, err := c.WriteMsgUnix(line, unix.UnixRights(ro), nil); err != nil {
			s.log.Warn("table socket: sending the table failed", "pid", p.pid, "err", err)
		} else {
			s.log.Info("feature table shared", "pid", p.pid)
		}
		c.Close()
	}
}
