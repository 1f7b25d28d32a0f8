package datasets

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A heterogeneous dataset (format_version 2) lists node_types and
// edge_types in its manifest; its files have roles
//
//	node:<type>:features   x          FixedSizeList<T>[feature_dim]  (when feature_dim > 0)
//	node:<type>:labels     y          int32                          (when num_classes > 0)
//	node:<type>:split:<s>  node_id    int64
//	node:<type>:time       time       int64                          (optional)
//	edge:<src__rel__dst>:indptr   indptr   int64, dst nodes + 1
//	edge:<src__rel__dst>:indices  indices  int32 (int64 from 2^31 src nodes)
//
// and file names made of the role with ':' replaced by '_'.

// NodeTypeInfo is a node type in the manifest.
type NodeTypeInfo struct {
	Name         string           `json:"name"`
	NumNodes     int64            `json:"num_nodes"`
	FeatureDim   int              `json:"feature_dim,omitempty"`
	FeatureDType DType            `json:"feature_dtype,omitempty"`
	NumClasses   int              `json:"num_classes,omitempty"`
	Splits       map[string]int64 `json:"splits,omitempty"`
}

// EdgeTypeInfo is an edge type in the manifest.
type EdgeTypeInfo struct {
	Src      string `json:"src"`
	Rel      string `json:"rel"`
	Dst      string `json:"dst"`
	NumEdges int64  `json:"num_edges"`
}

func nodeRole(t, part string) string          { return "node:" + t + ":" + part }
func edgeRole(t EdgeType, part string) string { return "edge:" + t.String() + ":" + part }

// heteroColumns lists every file of a heterogeneous dataset with its
// column; data is set when h is.
func heteroColumns(m *Manifest, h *Hetero) []namedColumn {
	var cols []namedColumn
	for i, t := range m.NodeTypes {
		var nt *NodeType
		if h != nil {
			nt = h.NodeTypes[i]
		}
		pick := func(b []byte) []byte {
			if nt == nil {
				return nil
			}
			return b
		}
		if t.FeatureDim > 0 {
			var f []byte
			if nt != nil {
				f = nt.Features
			}
			cols = append(cols, namedColumn{role: nodeRole(t.Name, "features"), column: column{field: "x", elem: arrowElemType(t.FeatureDType),
				dim: t.FeatureDim, rows: t.NumNodes, data: f, meta: dtypeMeta(t.FeatureDType)}})
		}
		if t.NumClasses > 0 {
			var b []byte
			if nt != nil {
				b = int32Bytes(nt.Labels)
			}
			cols = append(cols, namedColumn{role: nodeRole(t.Name, "labels"), column: column{field: "y", elem: int32Type, rows: t.NumNodes, data: pick(b)}})
		}
		for _, s := range SplitNames {
			if size, ok := t.Splits[s]; ok {
				var b []byte
				if nt != nil {
					b = int64Bytes(nt.Splits[s])
				}
				cols = append(cols, namedColumn{role: nodeRole(t.Name, "split:"+s), column: column{field: "node_id", elem: int64Type, rows: size, data: b}})
			}
		}
		if (nt != nil && nt.Time != nil) || (nt == nil && m.File(nodeRole(t.Name, "time")) != nil) {
			var b []byte
			if nt != nil {
				b = int64Bytes(nt.Time)
			}
			cols = append(cols, namedColumn{role: nodeRole(t.Name, "time"), column: column{field: "time", elem: int64Type, rows: t.NumNodes, data: b}})
		}
	}
	counts := map[string]int64{}
	for _, t := range m.NodeTypes {
		counts[t.Name] = t.NumNodes
	}
	for i, e := range m.EdgeTypes {
		et := EdgeType{e.Src, e.Rel, e.Dst}
		idx := int32Type
		if Wide(counts[e.Src]) {
			idx = int64Type
		}
		var ip, ix []byte
		if h != nil {
			g := &h.Relations[i].Graph
			ip = int64Bytes(g.Indptr)
			if g.Indices64 != nil {
				ix = int64Bytes(g.Indices64)
			} else {
				ix = int32Bytes(g.Indices32)
			}
		}
		cols = append(cols,
			namedColumn{role: edgeRole(et, "indptr"), column: column{field: "indptr", elem: int64Type, rows: counts[e.Dst] + 1, data: ip}},
			namedColumn{role: edgeRole(et, "indices"), column: column{field: "indices", elem: idx, rows: e.NumEdges, data: ix}})
	}
	return cols
}

func heteroManifest(h *Hetero) *Manifest {
	m := &Manifest{Format: FormatName, FormatVersion: FormatVersionHetero, Name: h.Name, Source: h.Source,
		Directed: true, Splits: map[string]int64{}}
	for _, t := range h.NodeTypes {
		info := NodeTypeInfo{Name: t.Name, NumNodes: t.NumNodes, FeatureDim: t.FeatureDim, NumClasses: t.NumClasses}
		if t.FeatureDim > 0 {
			info.FeatureDType = t.FeatureDType
		}
		if len(t.Splits) > 0 {
			info.Splits = map[string]int64{}
			for s, ids := range t.Splits {
				info.Splits[s] = int64(len(ids))
			}
		}
		m.NodeTypes = append(m.NodeTypes, info)
		m.NumNodes += t.NumNodes
	}
	for _, r := range h.Relations {
		m.EdgeTypes = append(m.EdgeTypes, EdgeTypeInfo{Src: r.Src, Rel: r.Rel, Dst: r.Dst, NumEdges: r.Graph.NumEdges()})
		m.NumEdges += r.Graph.NumEdges()
	}
	return m
}

// WriteHetero stores h as a heterogeneous dataset directory at dir, the
// way Write stores a homogeneous one (format_version 2).
func WriteHetero(ctx context.Context, dir string, h *Hetero, opts *WriteOptions) error {
	if err := h.Validate(); err != nil {
		return fmt.Errorf("dataset %s: not written: %w", h.Name, err)
	}
	m := heteroManifest(h)
	return writeDir(ctx, dir, heteroColumns(m, h), m, opts)
}

// checkHetero checks the manifest of a heterogeneous dataset: type names,
// every file's role, and that every count fits its file.
func (m *Manifest) checkHetero() error {
	if len(m.NodeTypes) == 0 {
		return fmt.Errorf("format_version %d without node_types", m.FormatVersion)
	}
	names := map[string]bool{}
	for _, t := range m.NodeTypes {
		if err := checkTypeName("node type", t.Name); err != nil || names[t.Name] {
			return fmt.Errorf("node type %q: bad or listed twice (%v)", t.Name, err)
		}
		names[t.Name] = true
		if t.NumNodes < 0 || t.NumNodes == 1<<63-1 || t.FeatureDim < 0 || t.FeatureDim > 1<<31-1 || t.FeatureDim > 0 && !t.FeatureDType.Valid() || t.NumClasses < 0 || t.NumClasses > 1<<31-1 {
			return fmt.Errorf("node type %s: bad counts or dtype", t.Name)
		}
		for s, n := range t.Splits {
			if !knownSplit(s) || n < 0 {
				return fmt.Errorf("node type %s: bad split %q of %d", t.Name, s, n)
			}
		}
	}
	rels := map[EdgeType]bool{}
	for _, e := range m.EdgeTypes {
		et := EdgeType{e.Src, e.Rel, e.Dst}
		if err := checkTypeName("relation", e.Rel); err != nil || !names[e.Src] || !names[e.Dst] || rels[et] || e.NumEdges < 0 {
			return fmt.Errorf("edge type %s: bad, unknown node type or listed twice", et)
		}
		rels[et] = true
	}
	want := map[string]namedColumn{}
	for _, c := range heteroColumns(m, nil) {
		want[c.role] = c
	}
	files := map[string]bool{}
	for _, f := range m.Files {
		if f.Name != filepath.Base(f.Name) || f.Name == ManifestName || f.Name == ManifestSumName || files[f.Name] || f.Bytes < 0 {
			return fmt.Errorf("bad or repeated file %q", f.Name)
		}
		files[f.Name] = true
		if _, ok := want[f.Role]; !ok {
			return fmt.Errorf("%s: unknown role %q", f.Name, f.Role)
		}
		if err := f.Checksum.check(); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	for role, c := range want {
		f := m.File(role)
		if f == nil {
			return fmt.Errorf("no file with role %q", role)
		}
		need, ok := c.rows, true
		for _, w := range []int64{int64(max(c.dim, 1)), int64(c.elem.(interface{ BitWidth() int }).BitWidth() / 8)} {
			if need, ok = mulNonNeg(need, w); !ok {
				break
			}
		}
		if !ok || need > f.Bytes {
			return fmt.Errorf("%s (%d bytes) cannot hold %d rows of %s", f.Name, f.Bytes, c.rows, c.field)
		}
	}
	return nil
}

// openHetero reads a heterogeneous dataset, every file at once.
func openHetero(dir string, m *Manifest, opts *OpenOptions, ds *Dataset) error {
	cols := heteroColumns(m, nil)
	sem := make(chan struct{}, workersOr(opts.Workers))
	images := make([]*image, len(cols))
	errs := make([]error, len(cols))
	var total int64
	for _, f := range m.Files {
		total += f.Bytes
	}
	if err := fitsMemory(dir, total); err != nil {
		return err
	}
	progress := orNop(opts.Progress)
	progress.Begin("read", total)
	var wg sync.WaitGroup
	for i, c := range cols {
		f := m.File(c.role)
		o := readOptions{size: f.Bytes, workers: opts.Workers, sem: sem, progress: progress}
		if !opts.SkipChecksums {
			o.checksum = &f.Checksum
		}
		if c.dim > 0 {
			o.alignValues = FeatureAlign
		}
		if strings.HasSuffix(c.role, ":features") { // a node type's features: where the caller wants them
			o.alloc, o.free = opts.AllocFeatures, opts.FreeFeatures
		}
		wg.Go(func() { images[i], errs[i] = readImage(filepath.Join(dir, f.Name), o) })
	}
	wg.Wait()
	owned := map[*image]bool{} // in the caller's memory (OpenOptions.AllocFeatures)
	for i, im := range images {
		if im != nil {
			ds.images = append(ds.images, im)
			owned[im] = opts.AllocFeatures != nil && strings.HasSuffix(cols[i].role, ":features")
		}
	}
	vals := map[string][]byte{}
	for i, c := range cols {
		path := filepath.Join(dir, m.File(c.role).Name)
		if errs[i] == nil {
			vals[c.role], errs[i] = readColumn(path, images[i].data, c.column)
		}
		if errs[i] != nil {
			return errs[i]
		}
	}
	h := &Hetero{Name: m.Name, Source: m.Source}
	for _, t := range m.NodeTypes {
		nt := &NodeType{Name: t.Name, NumNodes: t.NumNodes, FeatureDim: t.FeatureDim, FeatureDType: t.FeatureDType,
			NumClasses: t.NumClasses, Features: vals[nodeRole(t.Name, "features")], Splits: map[string][]int64{}}
		if c, ok := vals[nodeRole(t.Name, "labels")]; ok {
			nt.Labels = asInt32s(c)
		}
		if c, ok := vals[nodeRole(t.Name, "time")]; ok {
			nt.Time = asInt64s(c)
		}
		for s := range t.Splits {
			nt.Splits[s] = asInt64s(vals[nodeRole(t.Name, "split:"+s)])
		}
		h.NodeTypes = append(h.NodeTypes, nt)
	}
	for _, e := range m.EdgeTypes {
		et := EdgeType{e.Src, e.Rel, e.Dst}
		g := Graph{NumNodes: h.NodeType(e.Dst).NumNodes, NumSrcNodes: h.NodeType(e.Src).NumNodes, Indptr: asInt64s(vals[edgeRole(et, "indptr")])}
		if Wide(g.NumSrcNodes) {
			g.Indices64 = asInt64s(vals[edgeRole(et, "indices")])
		} else {
			g.Indices32 = asInt32s(vals[edgeRole(et, "indices")])
		}
		h.Relations = append(h.Relations, &Relation{EdgeType: et, Graph: g})
	}
	if err := h.validate(workersOr(opts.Workers)); err != nil {
		return fmt.Errorf("dataset %s: %w", dir, err)
	}
	for _, im := range ds.images {
		if owned[im] {
			im.free = nil // the caller's now, as Open's node features are
		} else {
			_ = unix.Mprotect(im.mem, unix.PROT_READ)
		}
	}
	ds.Hetero = h
	ds.Name, ds.Source = m.Name, m.Source
	return nil
}

// heteroRefusal is Open's error for a heterogeneous dataset without
// AllowHetero.
func heteroRefusal(dir string, m *Manifest) error {
	var nt, et []string
	for _, t := range m.NodeTypes {
		nt = append(nt, t.Name)
	}
	for _, e := range m.EdgeTypes {
		et = append(et, EdgeType{e.Src, e.Rel, e.Dst}.String())
	}
	return fmt.Errorf("%s: %w: node types %s; edge types %s. This reads homogeneous datasets only (loaderd serve serves heterogeneous ones; datasets.OpenOptions.AllowHetero opens it as a Hetero)",
		dir, ErrHetero, strings.Join(nt, ", "), strings.Join(et, ", "))
}
