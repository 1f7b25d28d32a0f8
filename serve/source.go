package serve

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

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
	Spec      string

	// store is the feature table in pinned, registered memory when the
	// source was opened for the GPU path (OpenSourcePinned); Table then
	// views its rows.
	store *pinned.Store
	close func() error
}

// DefaultSource is what loaderd serves without --dataset: a small generated
// arxiv-like graph, so the first command a new user runs does something real.
const DefaultSource = "synthetic:arxiv:0.1:0"

// OpenSource opens a dataset directory, or generates one in memory for a
// spec "synthetic:NAME[:SCALE[:SEED]]" (NAME as in `loaderd gen --like`).
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
	for v := int64(0); v < d.Graph.NumNodes; v++ {
		s.MaxDegree = max(s.MaxDegree, d.Graph.Degree(v))
	}
	if log != nil {
		log.Info("dataset ready", "dataset", d.Name, "source", spec, "nodes", d.Graph.NumNodes,
			"edges", d.Graph.NumEdges(), "feature_dim", d.FeatureDim, "feature_dtype", d.FeatureDType,
			"feature_bytes", len(d.Features), "took", time.Since(start).Round(time.Millisecond))
	}
	return s, nil
}

// heteroSource is the Source of a heterogeneous dataset.
func heteroSource(spec string, h *datasets.Hetero, close func() error, start time.Time, log *slog.Logger) *Source {
	s := &Source{Data: &datasets.Data{Name: h.Name, Source: h.Source}, Hetero: h, Spec: spec, close: close}
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

// ParseSynthetic parses the part of a "synthetic:NAME[:SCALE[:SEED]]" spec
// after "synthetic:" into generator options.
func ParseSynthetic(s string) (datasets.GenOptions, error) {
	parts := strings.Split(s, ":")
	opts := datasets.GenOptions{Like: parts[0], Scale: 1}
	bad := func(what string) error {
		return fmt.Errorf("dataset spec %q: %s (want synthetic:NAME[:SCALE[:SEED]], e.g. synthetic:arxiv:0.1:0)", "synthetic:"+s, what)
	}
	if len(parts) > 3 || parts[0] == "" {
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
	return opts, nil
}

// Close releases the dataset's mappings.
func (s *Source) Close() error { return s.close() }

// DropEdgeFeatures serves the source without its edge features: batches
// then have no edge_attr or edge_weight regions, and trainers on a GPU,
// whose path does not carry them yet, are served. Call it before New.
func (s *Source) DropEdgeFeatures() {
	s.Data.EdgeAttr, s.Data.EdgeWeight, s.Data.EdgeDim, s.Data.EdgeDType = nil, nil, 0, ""
}
