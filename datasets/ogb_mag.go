package datasets

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// IsOGBHetero reports whether dir holds an OGB heterogeneous raw layout
// (raw/num-node-dict.csv.gz).
func IsOGBHetero(dir string) bool {
	return fileExists(filepath.Join(dir, "raw", "num-node-dict.csv.gz"))
}

// ImportOGBHetero reads an OGB heterogeneous node-property dataset
// (ogbn-mag) in its raw csv layout:
//
//	raw/num-node-dict.csv.gz         a header of node type names, one row of counts
//	raw/triplet-type-list.csv.gz     "src,rel,dst" per relation
//	raw/relations/<src>___<rel>___<dst>/edge.csv.gz   "src,dst" rows
//	raw/node-feat/<type>/node-feat.csv.gz             (optional per type)
//	raw/node-label/<type>/node-label.csv.gz           (optional per type)
//	raw/node_year/<type>/node_year.csv.gz             (optional, time)
//	split/<scheme>/<type>/{train,valid,test}.csv.gz   (optional per type)
//
// Each relation is stored as PyG reads it: a row per dst node listing its
// src ids (edge direction out; opts.EdgeDirection does not apply), rows
// sorted, duplicates kept. opts.Undirected applies ToUndirected.
// num_classes is 349 for ogbn-mag papers (matched by name), else max
// label + 1.
func ImportOGBHetero(dir string, opts ImportOptions) (*Hetero, error) {
	name := opts.Name
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	im := &ogbImport{dir: dir, opts: opts, workers: opts.workers(), prog: orNop(opts.Progress), d: &Data{}}
	h := &Hetero{Name: name, Source: "import ogb " + filepath.Base(filepath.Clean(dir)) + " (heterogeneous)"}
	text, err := readGzText(im.raw("num-node-dict.csv.gz"))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 2 {
		return nil, fmt.Errorf("%s: want a header and one row of counts, got %d lines", im.raw("num-node-dict.csv.gz"), len(lines))
	}
	names, counts := strings.Split(strings.TrimSpace(lines[0]), ","), strings.Split(strings.TrimSpace(lines[1]), ",")
	if len(names) != len(counts) {
		return nil, fmt.Errorf("%s: %d names, %d counts", im.raw("num-node-dict.csv.gz"), len(names), len(counts))
	}
	for i, nm := range names {
		n, ok := parseInt([]byte(strings.TrimSpace(counts[i])))
		if !ok || n < 0 {
			return nil, fmt.Errorf("%s: bad count %q for %s", im.raw("num-node-dict.csv.gz"), counts[i], nm)
		}
		t := &NodeType{Name: strings.TrimSpace(nm), NumNodes: n}
		if err := im.heteroNodeType(t); err != nil {
			return nil, err
		}
		h.NodeTypes = append(h.NodeTypes, t)
	}
	text, err = readGzText(im.raw("triplet-type-list.csv.gz"))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Split(strings.TrimSpace(line), ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("%s: line %q: want src,rel,dst", im.raw("triplet-type-list.csv.gz"), line)
		}
		et := EdgeType{f[0], f[1], f[2]}
		src, dst := h.NodeType(et.Src), h.NodeType(et.Dst)
		if src == nil || dst == nil {
			return nil, fmt.Errorf("%s: relation %s names an unknown node type", im.raw("triplet-type-list.csv.gz"), et)
		}
		path := im.raw(filepath.Join("relations", et.Src+"___"+et.Rel+"___"+et.Dst, "edge.csv.gz"))
		var pairs []int64
		err := streamLines(path, im.workers, im.prog, func(b []byte) ([]int64, int64, *parseError) {
			return parseEdges[int64](b, -1)
		}, func(p []int64, _ int64) error { pairs = append(pairs, p...); return nil })
		if err != nil {
			return nil, err
		}
		for i := 0; i < len(pairs); i += 2 {
			if pairs[i] >= src.NumNodes || pairs[i+1] >= dst.NumNodes {
				return nil, fmt.Errorf("%s: line %d: edge %d -> %d outside %d %s x %d %s", path, i/2+1, pairs[i], pairs[i+1], src.NumNodes, src.Name, dst.NumNodes, dst.Name)
			}
			pairs[i], pairs[i+1] = pairs[i+1], pairs[i] // rows by dst
		}
		g, _, err := stableCSR(max(src.NumNodes, dst.NumNodes), pairs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		g.NumNodes, g.NumSrcNodes, g.Indptr = dst.NumNodes, src.NumNodes, g.Indptr[:dst.NumNodes+1]
		if Wide(src.NumNodes) && g.Indices32 != nil || !Wide(src.NumNodes) && g.Indices64 != nil {
			g = rewidth(g)
		}
		h.Relations = append(h.Relations, &Relation{EdgeType: et, Graph: g})
	}
	if opts.Undirected {
		if h, err = h.ToUndirected(im.workers); err != nil {
			return nil, err
		}
	}
	return h, h.Validate()
}

// heteroNodeType reads the optional per-type files of node type t.
func (im *ogbImport) heteroNodeType(t *NodeType) error {
	if p := im.raw(filepath.Join("node-feat", t.Name, "node-feat.csv.gz")); fileExists(p) {
		c, err := im.readNumberRows(p, t.NumNodes, "nodes of type "+t.Name)
		if err != nil {
			return err
		}
		if c.rows != t.NumNodes {
			return fmt.Errorf("%s: %d rows for %d nodes", p, c.rows, t.NumNodes)
		}
		t.FeatureDim = c.dim
		t.Features, t.FeatureDType = c.result()
	}
	if p := im.raw(filepath.Join("node-label", t.Name, "node-label.csv.gz")); fileExists(p) {
		var labels []int32
		err := streamLines(p, im.workers, im.prog, parseLabels, func(ls []int32, _ int64) error { labels = append(labels, ls...); return nil })
		if err != nil {
			return err
		}
		if int64(len(labels)) != t.NumNodes {
			return fmt.Errorf("%s: %d rows for %d nodes", p, len(labels), t.NumNodes)
		}
		top := int32(-1)
		for _, y := range labels {
			top = max(top, y)
		}
		t.Labels, t.NumClasses = labels, int(top)+1
		if strings.Contains(strings.ToLower(strings.ReplaceAll(im.dir, "_", "-")), "ogbn-mag") && t.Name == "paper" && top < 349 {
			t.NumClasses = 349
		}
	}
	if p := im.raw(filepath.Join("node_year", t.Name, "node_year.csv.gz")); fileExists(p) {
		vals, err := im.readIntRows(p)
		if err != nil {
			return err
		}
		if int64(len(vals)) != t.NumNodes {
			return fmt.Errorf("%s: %d rows for %d nodes", p, len(vals), t.NumNodes)
		}
		t.Time = vals
	}
	root := filepath.Join(im.dir, "split")
	schemes, _ := os.ReadDir(root)
	for _, sc := range schemes {
		if im.opts.OGBSplit != "" && sc.Name() != im.opts.OGBSplit {
			continue
		}
		for _, s := range SplitNames {
			p := filepath.Join(root, sc.Name(), t.Name, s+".csv.gz")
			if !fileExists(p) {
				continue
			}
			ids, err := im.readIntRows(p)
			if err != nil {
				return err
			}
			if t.Splits == nil {
				t.Splits = map[string][]int64{}
			}
			t.Splits[s] = ids
		}
		if t.Splits != nil {
			break
		}
	}
	return nil
}

// rewidth converts a graph's indices to the width its source count needs.
func rewidth(g Graph) Graph {
	if Wide(g.SrcNodes()) {
		g.Indices64 = make([]int64, len(g.Indices32))
		for i, v := range g.Indices32 {
			g.Indices64[i] = int64(v)
		}
		g.Indices32 = nil
		return g
	}
	g.Indices32 = make([]int32, len(g.Indices64))
	for i, v := range g.Indices64 {
		g.Indices32[i] = int32(v)
	}
	g.Indices64 = nil
	return g
}

// readGzText reads a small gzip text file whole.
func readGzText(path string) (string, error) {
	var b bytes.Buffer
	err := streamLines(path, 1, orNop(nil), func(blk []byte) ([]byte, int64, *parseError) { return blk, 0, nil },
		func(blk []byte, _ int64) error { b.Write(blk); return nil })
	return b.String(), err
}
