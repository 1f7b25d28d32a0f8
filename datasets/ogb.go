package datasets

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/klauspost/compress/gzip"
	"golang.org/x/sync/errgroup"
)

// ImportOGB reads an OGB node-property dataset in its raw layout, in either
// of the two shapes OGB ships, detected from the files present:
//
//   - csv (ogbn-arxiv, ogbn-products): raw/edge.csv.gz ("src,dst" rows),
//     raw/node-feat.csv.gz (F comma-separated floats per node),
//     raw/node-label.csv.gz (one int per node, "nan" = unlabelled), and
//     when present raw/num-node-list.csv.gz and raw/num-edge-list.csv.gz;
//   - npz (ogbn-papers100M): raw/data.npz (edge_index int [2, E], node_feat
//     float [N, F]) and raw/node-label.npz (node_label float [N, 1] or [N],
//     NaN = unlabelled).
//
// Both take their split from split/<scheme>/{train,valid,test}.csv.gz (one
// node id per row); opts.OGBSplit picks the scheme. The graph is CSR by
// source with rows sorted ascending (by target with EdgeOut: see
// EdgeDirection); features are float32 (float16 stays
// float16). num_classes is the known count for ogbn-arxiv, -products and
// -papers100M (matched by name), else max label + 1.
//
// Gzip files are inflated on one goroutine and parsed on opts.Workers; the
// npz members are read in place when stored. Memory stays near the size of
// the result plus the parsed edge list.
func ImportOGB(dir string, opts ImportOptions) (*Data, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a directory (want an OGB dataset directory holding raw/ and split/)", dir)
	}
	name := opts.Name
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	im := &ogbImport{dir: dir, opts: opts, workers: opts.workers(), prog: orNop(opts.Progress),
		d: &Data{Name: name, Directed: true}}
	im.numClasses = knownOGBClasses(name, filepath.Base(filepath.Clean(dir)))
	switch {
	case fileExists(filepath.Join(dir, "raw", "data.npz")):
		err = im.npzLayout()
	case fileExists(filepath.Join(dir, "raw", "edge.csv.gz")):
		err = im.csvLayout()
	default:
		err = fmt.Errorf("%s: not an OGB node- or link-property dataset: neither raw/data.npz nor raw/edge.csv.gz is present", dir)
	}
	if err != nil {
		return nil, err
	}
	if err := im.splits(); err != nil {
		return nil, err
	}
	d := im.d
	if im.isLinkDataset() {
		switch opts.EdgeDirection {
		case "", EdgeOut:
			opts.EdgeDirection = EdgeOut
		default:
			return nil, fmt.Errorf("%s: a link dataset (no node labels) is imported with edge direction out only, PyG's reading, so that its edge splits match the stored graph", dir)
		}
	}
	if err := d.orient(opts.EdgeDirection, im.workers); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if opts.Undirected {
		im.prog.Begin("undirected", d.Graph.NumEdges())
		if err = d.makeUndirected(im.workers, opts.UndirectedReduce); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return d, nil
}

// knownOGBClasses is the class count of the OGB datasets this importer is
// meant for, matched by name ("ogbn-arxiv" or OGB's directory name
// "ogbn_arxiv"), or 0.
func knownOGBClasses(names ...string) int {
	for _, name := range names {
		n := strings.ReplaceAll(strings.ToLower(name), "_", "-")
		switch {
		case strings.Contains(n, "ogbn-papers100m"):
			return 172
		case strings.Contains(n, "ogbn-products"):
			return 47
		case strings.Contains(n, "ogbn-arxiv"):
			return 40
		}
	}
	return 0
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

type ogbImport struct {
	dir        string
	opts       ImportOptions
	workers    int
	prog       Progress
	d          *Data
	numClasses int // known up front, or 0
}

func (im *ogbImport) raw(name string) string { return filepath.Join(im.dir, "raw", name) }

// csvLayout reads the raw/*.csv.gz files.
func (im *ogbImport) csvLayout() error {
	d := im.d
	d.Source = "import ogb " + filepath.Base(filepath.Clean(im.dir)) + " (csv layout)"
	d.FeatureDType = Float32
	n := int64(-1)
	if p := im.raw("num-node-list.csv.gz"); fileExists(p) {
		v, err := readCountCSV(p, im.prog)
		if err != nil {
			return err
		}
		n = v
	}
	if err := im.csvFeatures(n); err != nil {
		return err
	}
	n = int64(len(d.Features) / d.RowBytes())
	if im.isLinkDataset() {
		im.unlabelled(n)
	} else if err := im.csvLabels(n); err != nil {
		return err
	}
	numEdges := int64(-1)
	if p := im.raw("num-edge-list.csv.gz"); fileExists(p) {
		v, err := readCountCSV(p, im.prog)
		if err != nil {
			return err
		}
		numEdges = v
	}
	if err := im.nodeYears(n); err != nil {
		return err
	}
	return im.csvEdges(n, numEdges)
}

// readCountCSV reads num-node-list / num-edge-list: one graph, one count.
func readCountCSV(path string, prog Progress) (int64, error) {
	var vals []int64
	err := streamLines(path, 1, prog, func(b []byte) ([]int64, int64, *parseError) {
		return parseIDs(b, math.MaxInt64)
	}, func(v []int64, _ int64) error { vals = append(vals, v...); return nil })
	if err != nil {
		return 0, err
	}
	if len(vals) != 1 {
		return 0, fmt.Errorf("%s: want one count (a single graph), got %d rows", path, len(vals))
	}
	return vals[0], nil
}

func (im *ogbImport) csvFeatures(n int64) error {
	path := im.raw("node-feat.csv.gz")
	c, err := im.readNumberRows(path, n, "nodes in num-node-list.csv.gz")
	if err != nil {
		return err
	}
	if n >= 0 && c.rows != n {
		return fmt.Errorf("%s: %d rows, but num-node-list.csv.gz says %d nodes", path, c.rows, n)
	}
	im.d.FeatureDim = c.dim
	im.d.Features, im.d.FeatureDType = c.result()
	return nil
}

func (im *ogbImport) csvLabels(n int64) error {
	path := im.raw("node-label.csv.gz")
	labels := make([]int32, 0, n)
	err := streamLines(path, im.workers, im.prog, parseLabels, func(ls []int32, line int64) error {
		if err := im.checkLabels(ls); err != nil {
			return fmt.Errorf("%s: line %d: %w", path, line+1+int64(slices.Index(ls, firstBad(ls, im.numClasses))), err)
		}
		labels = append(labels, ls...)
		return nil
	})
	if err != nil {
		return err
	}
	if int64(len(labels)) != n {
		return fmt.Errorf("%s: %d rows, want one per node (%d nodes in node-feat.csv.gz)", path, len(labels), n)
	}
	im.d.Labels = labels
	return im.setNumClasses()
}

// checkLabels fails on a label outside [0, numClasses) when it is known.
func (im *ogbImport) checkLabels(ls []int32) error {
	if y := firstBad(ls, im.numClasses); y != -1 {
		return fmt.Errorf("label %d outside [0, %d) (%d classes known for %s)", y, im.numClasses, im.numClasses, im.d.Name)
	}
	return nil
}

// firstBad returns the first label >= numClasses (when numClasses > 0), or -1.
func firstBad(ls []int32, numClasses int) int32 {
	if numClasses <= 0 {
		return -1
	}
	for _, y := range ls {
		if int(y) >= numClasses {
			return y
		}
	}
	return -1
}

func (im *ogbImport) setNumClasses() error {
	if im.numClasses > 0 {
		im.d.NumClasses = im.numClasses
		return nil
	}
	m := int32(-1)
	for _, y := range im.d.Labels {
		m = max(m, y)
	}
	if m < 0 {
		return fmt.Errorf("%s: no labelled nodes", im.dir)
	}
	im.d.NumClasses = int(m) + 1
	return nil
}

func (im *ogbImport) csvEdges(n, numEdges int64) error {
	if Wide(n) {
		return csvEdges[int64](im, n, numEdges)
	}
	return csvEdges[int32](im, n, numEdges) // half the memory while parsed
}

// csvEdges parses edge.csv.gz into blocks of interleaved (src, dst) pairs
// of type T, then builds the CSR from them.
func csvEdges[T nodeID](im *ogbImport, n, numEdges int64) error {
	path := im.raw("edge.csv.gz")
	var blocks [][]T
	var total int64
	err := streamLines(path, im.workers, im.prog, func(b []byte) ([]T, int64, *parseError) {
		return parseEdges[T](b, n)
	}, func(pairs []T, _ int64) error {
		blocks = append(blocks, pairs)
		total += int64(len(pairs) / 2)
		return nil
	})
	if err != nil {
		return err
	}
	if numEdges >= 0 && numEdges != total {
		return fmt.Errorf("%s: %d rows, but num-edge-list.csv.gz says %d edges", path, total, numEdges)
	}
	im.prog.Begin("csr", total)
	if im.hasEdgeFiles() {
		pairs := make([]int64, 0, 2*total)
		for _, b := range blocks {
			for _, v := range b {
				pairs = append(pairs, int64(v))
			}
		}
		blocks = nil
		g, perm, err := stableCSR(n, pairs)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		im.d.Graph = g
		return im.csvEdgeArrays(total, perm)
	}
	var scratch []int64
	g, err := buildCSR(n, im.workers, im.prog, func(yield func(base int64, pairs []int64) error) error {
		var base int64
		for _, b := range blocks {
			scratch = slices.Grow(scratch[:0], len(b))[:len(b)]
			for i, v := range b {
				scratch[i] = int64(v)
			}
			if err := yield(base, scratch); err != nil {
				return err
			}
			base += int64(len(b) / 2)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	im.d.Graph = g
	return nil
}

// splits reads split/<scheme>/{train,valid,test}.csv.gz.
func (im *ogbImport) splits() error {
	root := filepath.Join(im.dir, "split")
	ents, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("%s: missing split directory: %w", im.dir, err)
	}
	var schemes []string
	for _, e := range ents {
		if e.IsDir() {
			schemes = append(schemes, e.Name())
		}
	}
	sort.Strings(schemes)
	scheme := im.opts.OGBSplit
	switch {
	case scheme != "":
		if !slices.Contains(schemes, scheme) {
			return fmt.Errorf("%s: no split scheme %q (present: %s)", root, scheme, strings.Join(schemes, ", "))
		}
	case len(schemes) == 1:
		scheme = schemes[0]
	case len(schemes) == 0:
		return fmt.Errorf("%s: no split scheme directories", root)
	default:
		return fmt.Errorf("%s: several split schemes (%s): choose one", root, strings.Join(schemes, ", "))
	}
	if im.isLinkDataset() {
		return im.linkSplits(root, scheme)
	}
	n := im.d.Graph.NumNodes
	im.d.Splits = map[string][]int64{}
	for _, s := range SplitNames {
		path := filepath.Join(root, scheme, s+".csv.gz")
		var ids []int64
		err := streamLines(path, im.workers, im.prog, func(b []byte) ([]int64, int64, *parseError) {
			return parseIDs(b, n)
		}, func(v []int64, _ int64) error { ids = append(ids, v...); return nil })
		if err != nil {
			return err
		}
		im.d.Splits[s] = ids
	}
	im.d.Source += " --split " + scheme
	return nil
}

// npzLayout reads raw/data.npz and raw/node-label.npz.
func (im *ogbImport) npzLayout() error {
	d := im.d
	d.Source = "import ogb " + filepath.Base(filepath.Clean(im.dir)) + " (npz layout)"
	z, err := openNPZ(im.raw("data.npz"))
	if err != nil {
		return err
	}
	defer z.Close()
	nf, err := z.array("node_feat")
	if err != nil {
		return err
	}
	if err := nf.wantShape(-1, -1); err != nil {
		return err
	}
	n := nf.shape[0]
	if z.has("num_nodes_list") {
		v, err := npzInts(z, "num_nodes_list")
		if err != nil {
			return err
		}
		if len(v) != 1 || v[0] != n {
			return fmt.Errorf("%s: num_nodes_list is %v but node_feat has %d rows", z.path, v, n)
		}
	}
	if err := im.npzFeatures(nf); err != nil {
		return err
	}
	ei, err := z.array("edge_index")
	if err != nil {
		return err
	}
	if !ei.isInt() || ei.kind == 'b' {
		return ei.errorf("wrong dtype %s, want int64 or int32", ei.descr)
	}
	if err := ei.wantShape(2, -1); err != nil {
		return err
	}
	if err := ei.checkData(); err != nil {
		return err
	}
	e := ei.shape[1]
	if z.has("num_edges_list") {
		v, err := npzInts(z, "num_edges_list")
		if err != nil {
			return err
		}
		if len(v) != 1 || v[0] != e {
			return fmt.Errorf("%s: num_edges_list is %v but edge_index has %d edges", z.path, v, e)
		}
	}
	im.prog.Begin("csr", e)
	if z.has("edge_feat") {
		pairs := make([]int64, 0, 2*e)
		err := edgeIndexChunks(ei, e, im.workers, func(_ int64, p []int64) error { pairs = append(pairs, p...); return nil })
		if err != nil {
			return fmt.Errorf("%s: member edge_index.npy: %w", z.path, err)
		}
		g, perm, err := stableCSR(n, pairs)
		if err != nil {
			return fmt.Errorf("%s: member edge_index.npy: %w", z.path, err)
		}
		d.Graph = g
		if err := im.npzEdgeAttr(z, e, perm); err != nil {
			return err
		}
		return im.npzLabelsOrNone(n)
	}
	g, err := buildCSR(n, im.workers, im.prog, func(yield func(base int64, pairs []int64) error) error {
		return edgeIndexChunks(ei, e, im.workers, yield)
	})
	if err != nil {
		return fmt.Errorf("%s: member edge_index.npy: %w", z.path, err)
	}
	d.Graph = g
	return im.npzLabelsOrNone(n)
}

// npzLabelsOrNone reads the labels, or leaves a link dataset unlabelled.
func (im *ogbImport) npzLabelsOrNone(n int64) error {
	if im.isLinkDataset() {
		im.unlabelled(n)
		return nil
	}
	return im.npzLabels(n)
}

// edgeIndexChunks streams a [2, E] edge_index as interleaved (src, dst)
// pairs, a few million edges at a time. A stored member is read and decoded
// in place on workers goroutines; a deflated one is inflated serially.
func edgeIndexChunks(ei *npyArray, e int64, workers int, yield func(base int64, pairs []int64) error) error {
	sz := int64(ei.itemSize)
	if ra := ei.src.readerAt(); ra != nil {
		chunk, sub := npzEdgeChunk, npzEdgeSub
		pairs := make([]int64, 2*min(chunk, e))
		for base := int64(0); base < e; base += chunk {
			m := min(chunk, e-base)
			err := parallelChunks(m, sub, workers, func(lo, hi int64) error {
				raw := make([]byte, (hi-lo)*sz)
				vals := make([]int64, hi-lo)
				for row := int64(0); row < 2; row++ {
					off := (row*e + base + lo) * sz
					if _, err := ra.ReadAt(raw, off); err != nil {
						return fmt.Errorf("reading at data byte %d: %w", off, unexpectedEOF(err))
					}
					if err := ei.decodeInts(raw, vals); err != nil {
						return err
					}
					for i, v := range vals {
						pairs[2*(lo+int64(i))+row] = v
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			if err := yield(base, pairs[:2*m]); err != nil {
				return err
			}
		}
		return nil
	}
	const chunk = 1 << 20
	srcR, err := ei.src.reader(0, e*sz)
	if err != nil {
		return err
	}
	dstR, err := ei.src.reader(e*sz, e*sz)
	if err != nil {
		return err
	}
	raw := make([]byte, chunk*sz)
	src := make([]int64, chunk)
	dst := make([]int64, chunk)
	pairs := make([]int64, 2*chunk)
	for base := int64(0); base < e; base += chunk {
		m := min(chunk, e-base)
		for _, x := range []struct {
			r   io.Reader
			out []int64
			off int64
		}{{srcR, src, base}, {dstR, dst, e + base}} {
			if _, err := io.ReadFull(x.r, raw[:m*sz]); err != nil {
				return fmt.Errorf("reading at data byte %d: %w", x.off*sz, unexpectedEOF(err))
			}
			if err := ei.decodeInts(raw[:m*sz], x.out); err != nil {
				return err
			}
		}
		for i := int64(0); i < m; i++ {
			pairs[2*i], pairs[2*i+1] = src[i], dst[i]
		}
		if err := yield(base, pairs[:2*m]); err != nil {
			return err
		}
	}
	return nil
}

// npzFeatures copies node_feat into d.Features: float32 and float16 as they
// are (in parallel, in place, when the member is stored), float64 narrowed.
func (im *ogbImport) npzFeatures(a *npyArray) error {
	d := im.d
	n, f := a.shape[0], a.shape[1]
	if f <= 0 || f > math.MaxInt32 {
		return a.errorf("bad feature dimension %d", f)
	}
	if b, dt, ok, err := npzIntBytes(a); ok {
		// Integer features stay integer, as OGB's reader keeps them (and
		// as its csv layout gives them, csvNumbers), typed as import npz
		// types them.
		d.FeatureDim, d.FeatureDType, d.Features = int(f), dt, b
		return err
	}
	if a.kind != 'f' {
		return a.errorf("wrong dtype %s, want a float or integer type", a.descr)
	}
	if err := a.checkData(); err != nil {
		return err
	}
	d.FeatureDim = int(f)
	d.FeatureDType = Float32
	if a.itemSize == 2 {
		d.FeatureDType = Float16
	}
	rowIn := f * int64(a.itemSize)
	rowOut := f * int64(d.FeatureDType.Size())
	d.Features = make([]byte, n*rowOut)
	im.prog.Begin("features", n*rowIn)
	const chunkBytes = 8 << 20
	rowsPer := max(1, chunkBytes/rowIn)
	if a.src.readerAt() == nil { // deflated: one stream
		r, err := a.src.reader(0, n*rowIn)
		if err != nil {
			return err
		}
		buf := make([]byte, rowsPer*rowIn)
		for lo := int64(0); lo < n; lo += rowsPer {
			hi := min(n, lo+rowsPer)
			b := buf[:(hi-lo)*rowIn]
			if _, err := io.ReadFull(r, b); err != nil {
				return a.errorf("reading at data byte %d: %v", lo*rowIn, unexpectedEOF(err))
			}
			narrowFloats(a, b, d.Features[lo*rowOut:hi*rowOut])
			im.prog.Add(int64(len(b)))
		}
		return nil
	}
	return parallelChunks(n, rowsPer, im.workers, func(lo, hi int64) error {
		out := d.Features[lo*rowOut : hi*rowOut]
		if a.itemSize != 8 {
			if err := a.readBytes(lo*rowIn, out); err != nil {
				return err
			}
		} else {
			b := make([]byte, (hi-lo)*rowIn)
			if err := a.readBytes(lo*rowIn, b); err != nil {
				return err
			}
			narrowFloats(a, b, out)
		}
		im.prog.Add((hi - lo) * rowIn)
		return nil
	})
}

// narrowFloats copies float16/32 bytes or narrows float64 to float32.
func narrowFloats(a *npyArray, in, out []byte) {
	if a.itemSize != 8 {
		copy(out, in)
		return
	}
	for i := 0; i < len(in)/8; i++ {
		v := math.Float64frombits(uint64(in[8*i]) | uint64(in[8*i+1])<<8 | uint64(in[8*i+2])<<16 | uint64(in[8*i+3])<<24 |
			uint64(in[8*i+4])<<32 | uint64(in[8*i+5])<<40 | uint64(in[8*i+6])<<48 | uint64(in[8*i+7])<<56)
		putFloat32(out[4*i:], float32(v))
	}
}

// npzLabels reads raw/node-label.npz: node_label [N, 1] or [N], float with
// NaN for unlabelled nodes (or int).
func (im *ogbImport) npzLabels(n int64) error {
	z, err := openNPZ(im.raw("node-label.npz"))
	if err != nil {
		return err
	}
	defer z.Close()
	a, err := z.array("node_label")
	if err != nil {
		return err
	}
	if len(a.shape) == 2 {
		err = a.wantShape(n, 1)
	} else {
		err = a.wantShape(n)
	}
	if err != nil {
		return err
	}
	vals, err := a.floats()
	if err != nil {
		return err
	}
	labels := make([]int32, n)
	for i, v := range vals {
		switch {
		case math.IsNaN(v):
			labels[i] = -1
		case v < 0 || v != math.Trunc(v) || v > math.MaxInt32-1 || im.numClasses > 0 && v >= float64(im.numClasses):
			bound := "num_classes"
			if im.numClasses > 0 {
				bound = strconv.Itoa(im.numClasses)
			}
			return a.errorf("node_label[%d] = %g is not a class id in [0, %s) or NaN", i, v, bound)
		default:
			labels[i] = int32(v)
		}
	}
	im.d.Labels = labels
	return im.setNumClasses()
}

// buildCSR builds a CSR graph (rows sorted ascending, duplicates kept) from
// edges given as interleaved (src, dst) pairs. each is called twice: once
// to count degrees and check ids, once to scatter.
func buildCSR(n int64, workers int, prog Progress, each func(yield func(base int64, pairs []int64) error) error) (Graph, error) {
	indptr := make([]int64, n+1)
	const sub = 1 << 16
	err := each(func(base int64, pairs []int64) error {
		m := int64(len(pairs) / 2)
		return parallelChunks(m, sub, workers, func(lo, hi int64) error {
			for i := lo; i < hi; i++ {
				s, t := pairs[2*i], pairs[2*i+1]
				if s < 0 || s >= n || t < 0 || t >= n {
					return fmt.Errorf("edge %d (%d -> %d) has a node id out of range [0, %d)", base+i, s, t, n)
				}
				atomic.AddInt64(&indptr[s+1], 1)
			}
			return nil
		})
	})
	if err != nil {
		return Graph{}, err
	}
	for v := int64(0); v < n; v++ {
		indptr[v+1] += indptr[v]
	}
	if Wide(n) {
		idx, err := scatterCSR[int64](indptr, workers, prog, each)
		return Graph{NumNodes: n, Indptr: indptr, Indices64: idx}, err
	}
	idx, err := scatterCSR[int32](indptr, workers, prog, each)
	return Graph{NumNodes: n, Indptr: indptr, Indices32: idx}, err
}

func scatterCSR[T nodeID](indptr []int64, workers int, prog Progress, each func(yield func(base int64, pairs []int64) error) error) ([]T, error) {
	n := int64(len(indptr) - 1)
	idx := make([]T, indptr[n])
	cursor := slices.Clone(indptr[:n])
	err := each(func(base int64, pairs []int64) error {
		m := int64(len(pairs) / 2)
		parallelChunks(m, 1<<16, workers, func(lo, hi int64) error {
			for i := lo; i < hi; i++ {
				p := atomic.AddInt64(&cursor[pairs[2*i]], 1) - 1
				idx[p] = T(pairs[2*i+1])
			}
			return nil
		})
		prog.Add(m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for v := int64(0); v < n; v++ {
		if cursor[v] != indptr[v+1] {
			return nil, fmt.Errorf("edges changed between the two passes (row %d)", v)
		}
	}
	chunks := rowChunks(indptr, edgeChunk)
	parallelChunks(int64(len(chunks)), 1, workers, func(lo, hi int64) error {
		for c := lo; c < hi; c++ {
			for v := chunks[c][0]; v < chunks[c][1]; v++ {
				slices.Sort(idx[indptr[v]:indptr[v+1]])
			}
		}
		return nil
	})
	return idx, nil
}

// ---- gzip text pipeline ----

// parseError is a problem in one line of a block: line is 0-based within
// the block, off the byte offset within the block.
type parseError struct {
	line int64
	off  int
	msg  string
}

// Work sizes, variables so that tests can make them tiny.
var (
	csvBlockSize = 4 << 20        // bytes of text per parse block
	npzEdgeChunk = int64(1 << 22) // edges per chunk of a stored edge_index
	npzEdgeSub   = int64(1 << 16) // edges per parallel read within a chunk
)

// streamLines inflates the gzip file at path on one goroutine, cuts the
// text into blocks of whole lines, parses the blocks on workers goroutines
// and hands the results to consume in file order, with the 0-based number
// of the block's first line. At most about 3*workers blocks are in flight.
func streamLines[T any](path string, workers int, prog Progress, parse func([]byte) (T, int64, *parseError), consume func(T, int64) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	prog.Begin(filepath.Base(path), st.Size())
	zr, err := gzip.NewReader(bufio.NewReaderSize(&progressReader{r: f, p: prog}, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: not a gzip file: %w", path, unexpectedEOF(err))
	}
	defer zr.Close()

	type result struct {
		val   T
		lines int64
		off   int64
		perr  *parseError
	}
	type job struct {
		data []byte
		buf  *[]byte
		off  int64
		res  chan result
	}
	g, ctx := errgroup.WithContext(context.Background())
	jobs := make(chan job, workers)
	order := make(chan chan result, 2*workers)
	var pool sync.Pool
	g.Go(func() error { // the inflater
		defer close(order)
		defer close(jobs)
		var carry []byte
		var off int64
		size := csvBlockSize
		for {
			bp, _ := pool.Get().(*[]byte)
			if bp == nil || cap(*bp) < size {
				b := make([]byte, size)
				bp = &b
			}
			buf := (*bp)[:cap(*bp)]
			n := copy(buf, carry)
			eof := false
			for n < len(buf) {
				m, err := zr.Read(buf[n:])
				n += m
				if err == io.EOF {
					eof = true
					break
				}
				if err != nil {
					return fmt.Errorf("%s: corrupt or truncated gzip stream after %d uncompressed bytes: %w", path, off+int64(n), unexpectedEOF(err))
				}
			}
			data := buf[:n]
			if !eof {
				i := bytes.LastIndexByte(data, '\n')
				if i < 0 { // a line longer than the block: grow
					carry = slices.Clone(data)
					size *= 2
					continue
				}
				carry = append(carry[:0:0], data[i+1:]...)
				data = data[:i+1]
			}
			if len(data) > 0 {
				rc := make(chan result, 1)
				select {
				case jobs <- job{data: data, buf: bp, off: off, res: rc}:
				case <-ctx.Done():
					return ctx.Err()
				}
				select {
				case order <- rc:
				case <-ctx.Done():
					return ctx.Err()
				}
				off += int64(len(data))
			}
			if eof {
				return nil
			}
		}
	})
	for w := 0; w < workers; w++ {
		g.Go(func() error {
			for j := range jobs {
				v, lines, perr := parse(j.data)
				pool.Put(j.buf)
				j.res <- result{val: v, lines: lines, off: j.off, perr: perr}
			}
			return nil
		})
	}
	g.Go(func() error { // ordered reassembly
		var line int64
		for rc := range order {
			var r result
			select {
			case r = <-rc:
			case <-ctx.Done():
				return ctx.Err()
			}
			if r.perr != nil {
				return fmt.Errorf("%s: line %d (byte %d of the uncompressed text): %s", path, line+r.perr.line+1, r.off+int64(r.perr.off), r.perr.msg)
			}
			if err := consume(r.val, line); err != nil {
				return err
			}
			line += r.lines
		}
		return nil
	})
	return g.Wait()
}

// progressReader counts the compressed bytes read.
type progressReader struct {
	r io.Reader
	p Progress
}

func (r *progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.Add(int64(n))
	return n, err
}

// eachLine calls fn for every line of b (without the newline and a trailing
// '\r'), with its 0-based index and byte offset; empty lines are errors. It
// returns the number of lines.
func eachLine(b []byte, fn func(line []byte, i int64, off int) *parseError) (int64, *parseError) {
	var i int64
	off := 0
	for off < len(b) {
		end := bytes.IndexByte(b[off:], '\n')
		next := off + end + 1
		if end < 0 {
			end = len(b) - off
			next = len(b)
		}
		line := b[off : off+end]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) == 0 {
			return i, &parseError{line: i, off: off, msg: "empty line"}
		}
		if pe := fn(line, i, off); pe != nil {
			return i, pe
		}
		i++
		off = next
	}
	return i, nil
}

// fieldText quotes a field for an error message (a copy: b is reused).
func fieldText(b []byte) string {
	if len(b) > 40 {
		return strconv.Quote(string(b[:40])) + "..."
	}
	return strconv.Quote(string(b))
}

// parseInt parses a decimal integer field (surrounding spaces allowed).
func parseInt(b []byte) (int64, bool) {
	b = bytes.TrimSpace(b)
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
		if v < 0 {
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	return v, true
}

// parseIDs parses one node id (or count) per line, each in [0, limit).
func parseIDs(b []byte, limit int64) ([]int64, int64, *parseError) {
	out := make([]int64, 0, len(b)/8)
	lines, pe := eachLine(b, func(line []byte, i int64, off int) *parseError {
		v, ok := parseInt(line)
		switch {
		case !ok:
			return &parseError{i, off, fmt.Sprintf("%s is not an integer", fieldText(line))}
		case v < 0:
			return &parseError{i, off, fmt.Sprintf("negative value %d", v)}
		case v >= limit:
			return &parseError{i, off, fmt.Sprintf("node id %d out of range [0, %d)", v, limit)}
		}
		out = append(out, v)
		return nil
	})
	return out, lines, pe
}

// parseEdges parses "src,dst" lines into interleaved pairs; ids must lie in
// [0, n) when n >= 0.
func parseEdges[T nodeID](b []byte, n int64) ([]T, int64, *parseError) {
	out := make([]T, 0, len(b)/7+2)
	lines, pe := eachLine(b, func(line []byte, i int64, off int) *parseError {
		c := bytes.IndexByte(line, ',')
		if c < 0 || bytes.IndexByte(line[c+1:], ',') >= 0 {
			return &parseError{i, off, fmt.Sprintf("want 2 fields src,dst, got %d", bytes.Count(line, []byte{','})+1)}
		}
		for k, f := range [2][]byte{line[:c], line[c+1:]} {
			v, ok := parseInt(f)
			switch {
			case !ok:
				return &parseError{i, off, fmt.Sprintf("field %d: %s is not an integer node id", k+1, fieldText(f))}
			case v < 0:
				return &parseError{i, off, fmt.Sprintf("field %d: negative node id %d", k+1, v)}
			case n >= 0 && v >= n:
				return &parseError{i, off, fmt.Sprintf("field %d: node id %d out of range [0, %d)", k+1, v, n)}
			}
			out = append(out, T(v))
		}
		return nil
	})
	return out, lines, pe
}

// parseLabels parses one int label per line; "nan" (any case) or an empty
// float NaN is -1 (unlabelled).
func parseLabels(b []byte) ([]int32, int64, *parseError) {
	out := make([]int32, 0, len(b)/2)
	lines, pe := eachLine(b, func(line []byte, i int64, off int) *parseError {
		if bytes.IndexByte(line, ',') >= 0 {
			return &parseError{i, off, "want one label per row, got several fields (multi-label datasets are not supported)"}
		}
		if bytes.EqualFold(bytes.TrimSpace(line), []byte("nan")) {
			out = append(out, -1)
			return nil
		}
		v, ok := parseInt(line)
		switch {
		case !ok:
			return &parseError{i, off, fmt.Sprintf("label %s is not an integer", fieldText(line))}
		case v < 0 || v > math.MaxInt32-1:
			return &parseError{i, off, fmt.Sprintf("label %d outside [0, num_classes)", v)}
		}
		out = append(out, int32(v))
		return nil
	})
	return out, lines, pe
}

// pow10f32 holds the powers of ten that float32 represents exactly.
var pow10f32 = [...]float32{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}

// parseFloat32 parses a float field exactly as strconv.ParseFloat(s, 32)
// does (overflow gives +-Inf, as there). Plain decimals with at most 7
// significant digits and 10 fraction digits, the shape of OGB's feature
// files, take a fast path: an exact float32 mantissa and one exact power
// of ten, whose quotient IEEE rounds correctly; everything else goes to
// strconv.
func parseFloat32(b []byte) (float32, bool) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, i = b[0] == '-', 1
	}
	var mant uint64
	digits, frac, dot, sawDigit := 0, 0, false, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			sawDigit = true
			if mant != 0 || c != '0' {
				digits++
			}
			mant = mant*10 + uint64(c-'0')
			if dot {
				frac++
			}
			if digits > 7 || frac > 10 {
				return parseFloat32Slow(b)
			}
			continue
		case c == '.' && !dot:
			dot = true
			continue
		}
		return parseFloat32Slow(b)
	}
	if !sawDigit {
		return parseFloat32Slow(b) // "", ".", "-": errors there
	}
	f := float32(mant) / pow10f32[frac]
	if neg {
		f = -f
	}
	return f, true
}

func parseFloat32Slow(b []byte) (float32, bool) {
	if len(b) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(unsafe.String(&b[0], len(b)), 32)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return float32(v), true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange // +-Inf or 0: keep what ParseFloat gives
}
