package serve

// The daemon's dataset in pinned host memory, for the GPU path.

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"unsafe"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/pinned"
)

// OpenSourcePinned opens spec like OpenSource, with the feature table in
// pinned host memory registered with the CUDA driver once (portable: every
// device's context reads it zero-copy). A synthetic table is generated
// straight into that memory and a dataset directory's features.arrow read
// straight into it, so the table is never held twice. It fails without a
// usable driver.
func OpenSourcePinned(spec string, skipChecksums bool, progress datasets.Progress, log *slog.Logger) (*Source, error) {
	if _, err := ProbeGPU(); err != nil {
		return nil, err
	}
	s, err := openSource(spec, skipChecksums, progress, log, featureMem{generated: true, read: true})
	if err != nil {
		return nil, err
	}
	if s.Hetero != nil {
		// Each node type's features, copied once into pinned memory.
		if err := s.pinTables(); err != nil {
			s.Close()
			return nil, fmt.Errorf("pinning the tables: %w", err)
		}
		if log != nil {
			log.Info("node type features pinned", "tables", len(s.stores))
		}
		return s, nil
	}
	d := s.Data
	st, err := pinned.FromAlloc(d.Features, d.RowBytes(), d.Graph.NumNodes, nil)
	if err != nil {
		pinned.Free(d.Features) // still ours on error
	} else if !st.Registered() {
		st.Close()
		err = errors.New("the CUDA driver did not register the feature table")
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("pinning the feature table: %w", err)
	}
	d.Features = st.Rows
	s.Table.Rows = st.Rows
	s.store = st
	prev := s.close
	s.close = func() error { return errors.Join(prev(), st.Close()) }
	if err := s.pinTables(); err != nil {
		s.Close()
		return nil, fmt.Errorf("pinning the tables: %w", err)
	}
	if log != nil {
		log.Info("feature table pinned", "bytes", len(st.Rows), "copy", st.LoadTime, "register", st.RegisterTime)
	}
	return s, nil
}

// pinTables puts every gathered table but the node features (pinned as
// they are read) into pinned, registered memory, in place when it was read
// into pinned.Alloc memory, else copied once: a CUDA slot
// gathers them zero-copy like the node features, and the dataset is pointed
// at the copies, which the shared-memory slots then read too.
func (s *Source) pinTables() error {
	d := s.Data
	s.stores = map[string]*pinned.Store{}
	if s.store != nil {
		s.stores["x"] = s.store
	}
	var copied int64
	defer func() {
		if copied > 1<<28 { // the originals of generated tables: garbage the runtime would keep resident
			debug.FreeOSMemory()
		}
	}()
	for name, t := range s.tables() {
		if name == "x" {
			continue
		}
		// Read straight into pinned.Alloc memory (a dataset directory's
		// edge tables and node types' features): registered where they
		// lie. Otherwise copied once.
		st, err := pinned.FromAlloc(t.Rows, t.RowBytes, t.NumRows, nil)
		if err != nil {
			st, err = pinned.Load(t.Rows, t.RowBytes, t.NumRows, nil)
			copied += int64(len(t.Rows))
			if err == nil {
				// An original in pinned.Alloc memory that FromAlloc would not
				// take is the Source's to free; Go memory is not (Free says
				// so, and that is fine).
				_ = pinned.Free(t.Rows)
			}
		}
		if err == nil && !st.Registered() {
			st.Close()
			err = errors.New("the CUDA driver did not register it")
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		s.stores[name] = st
		prev := s.close
		s.close = func() error { return errors.Join(prev(), st.Close()) }
		switch name {
		case "edge_attr":
			d.EdgeAttr = st.Rows[:len(t.Rows)]
		case "edge_weight":
			d.EdgeWeight = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(st.Rows))), len(d.EdgeWeight))
		default:
			if nt := s.heteroType(name); nt != nil {
				nt.Features = st.Rows[:len(t.Rows)]
			}
		}
	}
	return nil
}
