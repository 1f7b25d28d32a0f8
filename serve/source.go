package serve

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/pinned"
)

// Source is the dataset a daemon serves: one copy shared by every trainer.
// It is read-only after OpenSource and safe for concurrent use.
//
// A heterogeneous dataset (Hetero set) has its node types' features, labels
// and splits and one graph per edge type in Hetero; Data then holds only its
// Name and Source, and Table is empty.
type Source struct {
	Data      *datasets.Data
	Hetero    *datasets.Hetero
	Table     gather.Table
	MaxDegree int64 // homogeneous: the graph's largest degree
	// RelMaxDegree is, for a heterogeneous dataset, each edge type's
	// largest row (batch.HeteroMaxDegrees), in the dataset's order.
	RelMaxDegree []int64
	Spec         string

	// store is the feature table in pinned, registered memory when the
	// source was opened for the GPU path (OpenSourcePinned); Table then
	// views its rows.
	store *pinned.Store
	// stores are the gathered tables (tables) in pinned, registered memory,
	// by name, on the GPU path ("x" is store); the dataset's slices view
	// them.
	stores map[string]*pinned.Store
	close  func() error
}

// tables are the tables the batches gather rows from, by the table name a
// batch layout gives them (batch.Region.Table), labels aside
// (labelTables): the node features "x", and the per-edge tables gathered by
// e_id, "edge_attr" (rows of its dtype) and "edge_weight" (float32), in
// CSR order.
//
// A heterogeneous source has each node type's features instead, "<type>/x",
// and labels, "<type>/y", where the type has them.
func (s *Source) tables() map[string]gather.Table {
	if h := s.Hetero; h != nil {
		t := map[string]gather.Table{}
		for _, nt := range h.NodeTypes {
			if nt.FeatureDim > 0 {
				t[nt.Name+"/x"] = gather.Table{Rows: nt.Features, RowBytes: nt.FeatureDim * nt.FeatureDType.Size(), NumRows: nt.NumNodes}
			}
		}
		return t
	}
	d := s.Data
	t := map[string]gather.Table{"x": s.Table}
	if d.EdgeAttr != nil && d.EdgeDim > 0 {
		t["edge_attr"] = gather.Table{Rows: d.EdgeAttr, RowBytes: d.EdgeRowBytes(), NumRows: d.Graph.NumEdges()}
	}
	if d.EdgeWeight != nil {
		w := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d.EdgeWeight))), 4*len(d.EdgeWeight))
		t["edge_weight"] = gather.Table{Rows: w, RowBytes: 4, NumRows: d.Graph.NumEdges()}
	}
	return t
}

// heteroType is the node type whose features table name is ("<type>/x"),
// or nil.
func (s *Source) heteroType(name string) *datasets.NodeType {
	if s.Hetero == nil {
		return nil
	}
	for _, nt := range s.Hetero.NodeTypes {
		if nt.Name+"/x" == name {
			return nt
		}
	}
	return nil
}

// labelTables are the label tables by name ("y": one int32 a node, -1 =
// unlabelled), gathered as int64 into the regions that name them.
func (s *Source) labelTables() map[string][]int32 {
	if h := s.Hetero; h != nil {
		t := map[string][]int32{}
		for _, nt := range h.NodeTypes {
			if nt.Labels != nil {
				t[nt.Name+"/y"] = nt.Labels
			}
		}
		return t
	}
	return map[string][]int32{"y": s.Data.Labels}
}

// DefaultSource is what loaderd serves without --dataset: a small generated
// arxiv-like graph, so the first command a new user runs does something real.
const DefaultSource = "synthetic:arxiv:0.1:0"

// OpenSource opens a dataset directory, or generates one in memory for a
// spec "synthetic:NAME[:SCALE[:SEED[:DTYPE]]]" (NAME as in `loaderd gen --like`).
// Opening a directory verifies its checksums unless skipChecksums is set.
func OpenSource(spec string, skipChecksums bool, progress datasets.Progress, log *slog.Logger) (*Source, error) {
	var mem featureMem
	if pinned.Shared() {
		mem.generated = true // a generated table in a memfd, to share (table.go)
	}
	return openSource(spec, skipChecksums, progress, log, mem)
}

// featureMem says which feature tables openSource puts in memory from
// pinned.Alloc: a generated one, a dataset directory's one, or neither.
// Memory from pinned.Alloc is the Source's caller's to free (pinned.FromAlloc
// takes it over).
type featureMem struct {
	generated, read bool
}

// openSource opens spec, with the feature table in pinned.Alloc memory
// where mem says.
func openSource(spec string, skipChecksums bool, progress datasets.Progress, log *slog.Logger, mem featureMem) (*Source, error) {
	start := time.Now()
	var (
		d     *datasets.Data
		close = func() error { return nil }
	)
	if rest, ok := strings.CutPrefix(spec, "synthetic:"); ok {
		opts, err := ParseSynthetic(rest)
		if err != nil {
			return nil, err
		}
		opts.Progress = progress
		if datasets.IsHeteroPreset(opts.Like) {
			h, err := datasets.GenerateHetero(opts)
			if err != nil {
				return nil, err
			}
			return heteroSource(spec, h, close, start, log), nil
		}
		if mem.generated {
			opts.AllocFeatures = pinned.Alloc
		}
		if d, err = datasets.Generate(opts); err != nil {
			return nil, err
		}
	} else {
		o := &datasets.OpenOptions{SkipChecksums: skipChecksums, Progress: progress, AllowHetero: true}
		if mem.read {
			o.AllocFeatures, o.FreeFeatures = pinned.Alloc, pinned.Free
			o.AllocEdgeFeatures, o.FreeEdgeFeatures = pinned.Alloc, pinned.Free
		}
		ds, err := datasets.Open(spec, o)
		if err != nil {
			return nil, err
		}
		d, close = &ds.Data, ds.Close
		for _, w := range ds.Manifest.Warnings {
			if log != nil {
				log.Warn(w, "dataset", spec)
			}
		}
		if ds.Hetero != nil {
			return heteroSource(spec, ds.Hetero, close, start, log), nil
		}
	}
	s := &Source{
		Data:  d,
		Table: gather.Table{Rows: d.Features, RowBytes: d.RowBytes(), NumRows: d.Graph.NumNodes},
		Spec:  spec,
		close: close,
	}
	s.MaxDegree = d.Graph.MaxDegree()
	if log != nil {
		log.Info("dataset ready", "dataset", d.Name, "source", spec, "nodes", d.Graph.NumNodes,
			"edges", d.Graph.NumEdges(), "feature_dim", d.FeatureDim, "feature_dtype", d.FeatureDType,
			"feature_bytes", len(d.Features), "took", time.Since(start).Round(time.Millisecond))
	}
	return s, nil
}

// heteroSource is the Source of a heterogeneous dataset.
func heteroSource(spec string, h *datasets.Hetero, close func() error, start time.Time, log *slog.Logger) *Source {
	s := &Source{Data: &datasets.Data{Name: h.Name, Source: h.Source}, Hetero: h, Spec: spec, close: close,
		RelMaxDegree: batch.HeteroMaxDegrees(h)}
	if log != nil {
		var types []string
		var nodes, edges, bytes int64
		for _, t := range h.NodeTypes {
			nodes, bytes = nodes+t.NumNodes, bytes+int64(len(t.Features))
		}
		for _, r := range h.Relations {
			edges += r.Graph.NumEdges()
			types = append(types, r.EdgeType.String())
		}
		log.Info("heterogeneous dataset ready", "dataset", h.Name, "source", spec, "node_types", len(h.NodeTypes),
			"edge_types", types, "nodes", nodes, "edges", edges, "feature_bytes", bytes, "took", time.Since(start).Round(time.Millisecond))
	}
	return s
}

// featureBytes is the bytes of the served node features.
func (s *Source) featureBytes() int64 {
	if s.Hetero == nil {
		return int64(len(s.Table.Rows))
	}
	var n int64
	for _, t := range s.Hetero.NodeTypes {
		n += int64(len(t.Features))
	}
	return n
}

// IsHeteroSpec reports whether spec (a dataset directory or a synthetic
// spec, as OpenSource takes) names a heterogeneous dataset, without reading
// more than a manifest: the GPU path does not serve those yet.
func IsHeteroSpec(spec string) bool {
	if rest, ok := strings.CutPrefix(spec, "synthetic:"); ok {
		opts, err := ParseSynthetic(rest)
		return err == nil && datasets.IsHeteroPreset(opts.Like)
	}
	m, err := datasets.ReadManifest(spec)
	return err == nil && m.FormatVersion == datasets.FormatVersionHetero
}

// ParseSynthetic parses the part of a "synthetic:NAME[:SCALE[:SEED[:DTYPE]]]"
// spec after "synthetic:" into generator options (DTYPE: the feature type,
// as `loaderd gen --dtype`; default float32).
func ParseSynthetic(s string) (datasets.GenOptions, error) {
	parts := strings.Split(s, ":")
	opts := datasets.GenOptions{Like: parts[0], Scale: 1}
	bad := func(what string) error {
		return fmt.Errorf("dataset spec %q: %s (want synthetic:NAME[:SCALE[:SEED[:DTYPE]]], e.g. synthetic:arxiv:0.1:0 or synthetic:papers100M:1:0:float16)", "synthetic:"+s, what)
	}
	if len(parts) > 4 || parts[0] == "" {
		return opts, bad("malformed")
	}
	var err error
	if len(parts) > 1 {
		if opts.Scale, err = strconv.ParseFloat(parts[1], 64); err != nil || opts.Scale <= 0 {
			return opts, bad("bad scale " + strconv.Quote(parts[1]))
		}
	}
	if len(parts) > 2 {
		if opts.Seed, err = strconv.ParseUint(parts[2], 10, 64); err != nil {
			return opts, bad("bad seed " + strconv.Quote(parts[2]))
		}
	}
	if len(parts) > 3 {
		if opts.FeatureDType, err = datasets.ParseDType(parts[3]); err != nil {
			return opts, bad(err.Error())
		}
	}
	return opts, nil
}

// Close releases the dataset's mappings.
func (s *Source) Close() error {
	err := s.close()
	// The tables may lie in memory just unmapped (pinned stores, a dataset's
	// images): no slice may point there once the address range can be the
	// Go heap's again, for a Source still reachable would then hold a
	// pointer into it ("found bad pointer in Go heap").
	s.Table.Rows = nil
	if d := s.Data; d != nil {
		d.Features, d.EdgeAttr, d.EdgeWeight = nil, nil, nil
	}
	if h := s.Hetero; h != nil {
		for _, nt := range h.NodeTypes {
			nt.Features = nil
		}
		// Its labels, splits, times and graphs lie in the dataset's images.
		s.Hetero = nil
	}
	return err
}

// DropEdgeFeatures serves the source without its edge features: batches
// then have no edge_attr or edge_weight regions (a trainer that does not use
// them saves their gather), and their pinned copies are freed. Call it
// before New.
func (s *Source) DropEdgeFeatures() {
	s.Data.EdgeAttr, s.Data.EdgeWeight, s.Data.EdgeDim, s.Data.EdgeDType = nil, nil, 0, ""
	for _, name := range []string{"edge_attr", "edge_weight"} {
		if st := s.stores[name]; st != nil {
			st.Close() // s.close closes it again: a no-op
			delete(s.stores, name)
		}
	}
}
