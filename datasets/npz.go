package datasets

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/klauspost/compress/zip"
)

// ImportOptions controls ImportNPZ and ImportOGB. The zero value means
// defaults everywhere.
type ImportOptions struct {
	// Name is the dataset name; "" takes it from the file or directory name.
	Name string
	// SplitRatios are the train/valid/test fractions of the stratified
	// random split made for formats that ship no split (npz). All zero
	// means 0.6, 0.2, 0.2. They must be >= 0 and sum to at most 1.
	SplitRatios [3]float64
	// SplitSeed seeds the stratified random split.
	SplitSeed uint64
	// Undirected adds the reverse of every edge and drops duplicate edges
	// and self loops (see MakeUndirected); the result has Directed false.
	Undirected bool
	// UndirectedReduce is how Undirected merges the edge_attr and
	// edge_weight of an edge's copies: "" or ReduceFirst keeps the first
	// copy's, ReduceSum adds them (PyG's ToUndirected).
	UndirectedReduce EdgeReduce
	// EdgeDirection says how input edges become CSR rows (see
	// EdgeDirection); "" means EdgeIn, the reading of earlier versions.
	EdgeDirection EdgeDirection
	// EdgeWeights keeps an npz file's adj_data as edge_weight (float32).
	EdgeWeights bool
	// OGBSplit names the split scheme directory under split/; "" means the
	// only one present (an error lists them when there are several).
	OGBSplit string
	// Workers bounds the goroutines used for parsing and graph building;
	// 0 means GOMAXPROCS.
	Workers int
	// Progress receives per-stage progress; nil means none.
	Progress Progress
}

func (o *ImportOptions) workers() int { return workerCount(o.Workers) }

func (o *ImportOptions) ratios() [3]float64 {
	if o.SplitRatios == ([3]float64{}) {
		return [3]float64{0.6, 0.2, 0.2}
	}
	return o.SplitRatios
}

// npzFile is an open .npz archive (a zip of .npy members).
type npzFile struct {
	path    string
	f       *os.File
	size    int64
	zr      *zip.Reader
	members map[string]*zip.File // by name without ".npy"
}

// openNPZ opens an .npz archive and indexes its members.
func openNPZ(path string) (*npzFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: corrupt or truncated .npz (zip) archive: %w", path, err)
	}
	z := &npzFile{path: path, f: f, size: st.Size(), zr: zr, members: map[string]*zip.File{}}
	for _, m := range zr.File {
		z.members[strings.TrimSuffix(m.Name, ".npy")] = m
	}
	return z, nil
}

func (z *npzFile) Close() error { return z.f.Close() }

func (z *npzFile) has(name string) bool { _, ok := z.members[name]; return ok }

func (z *npzFile) names() []string {
	var s []string
	for n := range z.members {
		s = append(s, n)
	}
	sort.Strings(s)
	return s
}

// array opens member name (without ".npy") and parses its header. Stored
// members (np.savez) are read in place through the file; deflated ones
// (np.savez_compressed) are inflated as a stream.
func (z *npzFile) array(name string) (*npyArray, error) {
	m, ok := z.members[name]
	if !ok {
		return nil, fmt.Errorf("%s: missing member %s.npy (members: %s)", z.path, name, strings.Join(z.names(), ", "))
	}
	where := fmt.Sprintf("%s: member %s", z.path, m.Name)
	rc, err := m.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	a, hlen, err := parseNPYHeader(rc, where)
	rc.Close()
	if err != nil {
		return nil, err
	}
	total := int64(m.UncompressedSize64)
	if m.UncompressedSize64 > math.MaxInt64 || total < hlen {
		return nil, fmt.Errorf("%s: bad member size %d", where, m.UncompressedSize64)
	}
	a.dataLen = total - hlen
	if m.Method == zip.Store {
		off, err := m.DataOffset()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if m.CompressedSize64 != m.UncompressedSize64 {
			return nil, fmt.Errorf("%s: stored member has compressed size %d != size %d", where, m.CompressedSize64, m.UncompressedSize64)
		}
		if off+total > z.size {
			return nil, fmt.Errorf("%s: truncated: member data ends at byte %d, file has %d", where, off+total, z.size)
		}
		a.src = storedSource{io.NewSectionReader(z.f, off+hlen, a.dataLen)}
	} else {
		a.src = &streamSource{m: m, hlen: hlen, where: where}
	}
	return a, nil
}

// storedSource reads a stored member's data in place.
type storedSource struct{ r *io.SectionReader }

func (s storedSource) reader(off, n int64) (io.Reader, error) {
	return io.NewSectionReader(s.r, off, n), nil
}
func (s storedSource) readerAt() io.ReaderAt { return s.r }

// streamSource inflates a deflated member; each reader starts a new
// inflater and skips to the offset.
type streamSource struct {
	m     *zip.File
	hlen  int64
	where string
}

func (s *streamSource) reader(off, n int64) (io.Reader, error) {
	rc, err := s.m.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.where, err)
	}
	if _, err := io.CopyN(io.Discard, rc, s.hlen+off); err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: skipping to data offset %d: %w", s.where, off, unexpectedEOF(err))
	}
	return &closingReader{r: io.LimitReader(rc, n), c: rc}, nil
}
func (s *streamSource) readerAt() io.ReaderAt { return nil }

// closingReader closes c once r is exhausted or fails.
type closingReader struct {
	r io.Reader
	c io.Closer
}

func (c *closingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && c.c != nil {
		c.c.Close()
		c.c = nil
	}
	return n, err
}

// ImportNPZ reads a gnn-benchmark .npz file (Shchur et al. 2018): the
// adjacency as scipy CSR parts (adj_indptr, adj_indices, adj_shape; row =
// paper), node features as CSR parts (attr_*) or a dense attr_matrix,
// densified to float32 (integer features keep an integer type:
// npzIntDType), int labels (-1 = unlabelled) and optional
// class_names. Input row i is node i's incoming neighbours unless
// opts.EdgeDirection is EdgeOut (see EdgeDirection). The file ships
// no split, so a stratified random split is made from opts. Rows of the
// graph are sorted ascending; entries are kept as given (duplicates
// included) unless opts.Undirected.
func ImportNPZ(path string, opts ImportOptions) (*Data, error) {
	prog := orNop(opts.Progress)
	z, err := openNPZ(path)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	name := opts.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	d := &Data{Name: name, Directed: true, FeatureDType: Float32, Source: "import npz " + filepath.Base(path)}

	prog.Begin("graph", -1)
	shape, err := npzInts(z, "adj_shape")
	if err != nil {
		return nil, err
	}
	if len(shape) != 2 || shape[0] != shape[1] || shape[0] < 0 {
		return nil, fmt.Errorf("%s: member adj_shape.npy: want a square (N, N) shape, got %v", path, shape)
	}
	n := shape[0]
	if Wide(n) {
		return nil, fmt.Errorf("%s: %d nodes is too many for the npz importer", path, n)
	}
	indptr, indices, err := npzCSR(z, "adj", n, n)
	if err != nil {
		return nil, err
	}
	if z.has("adj_data") {
		a, err := z.array("adj_data")
		if err != nil {
			return nil, err
		}
		if err := a.wantShape(int64(len(indices))); err != nil {
			return nil, err
		}
	}
	if opts.EdgeWeights || z.has(npzEdgeTimeMember) {
		if err := npzEdgeArrays(z, d, n, indptr, indices, opts.EdgeWeights); err != nil {
			return nil, err
		}
	} else {
		idx := make([]int32, len(indices))
		for i, v := range indices {
			idx[i] = int32(v)
		}
		for v := int64(0); v < n; v++ {
			slices.Sort(idx[indptr[v]:indptr[v+1]])
		}
		d.Graph = Graph{NumNodes: n, Indptr: indptr, Indices32: idx}
	}
	prog.Add(int64(len(indices)))

	prog.Begin("features", -1)
	if err := npzFeatures(z, d); err != nil {
		return nil, err
	}

	if err := npzNodeTime(z, d, n); err != nil {
		return nil, err
	}

	prog.Begin("labels", -1)
	la, err := z.array("labels")
	if err != nil {
		return nil, err
	}
	if err := la.wantShape(n); err != nil {
		return nil, err
	}
	labels, err := la.ints()
	if err != nil {
		return nil, err
	}
	if z.has("class_names") {
		ca, err := z.array("class_names")
		if err != nil {
			return nil, err
		}
		if len(ca.shape) != 1 {
			return nil, ca.errorf("wrong shape %s, want (C,)", ca.shapeString())
		}
		if d.ClassNames, err = ca.strings(); err != nil {
			return nil, err
		}
		d.NumClasses = len(d.ClassNames)
	}
	d.Labels = make([]int32, n)
	maxLabel := int64(-1)
	for i, y := range labels {
		if y < -1 || d.ClassNames != nil && y >= int64(d.NumClasses) || y > math.MaxInt32-1 {
			bound := "num_classes"
			if d.ClassNames != nil {
				bound = fmt.Sprint(d.NumClasses)
			}
			return nil, la.errorf("labels[%d] = %d outside [0, %s) (or -1 for unlabelled)", i, y, bound)
		}
		d.Labels[i] = int32(y)
		maxLabel = max(maxLabel, y)
	}
	if d.ClassNames == nil {
		d.NumClasses = int(maxLabel + 1)
	}

	if maxLabel < 0 {
		return nil, la.errorf("no labelled node")
	}
	if err := d.orient(opts.EdgeDirection, opts.workers()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if opts.Undirected {
		prog.Begin("undirected", -1)
		if err = d.makeUndirected(opts.workers(), opts.UndirectedReduce); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	ratios := opts.ratios()
	if d.Splits, err = StratifiedSplit(d.Labels, d.NumClasses, ratios, opts.SplitSeed); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d.Source += fmt.Sprintf(" --split %g,%g,%g --split-seed %d", ratios[0], ratios[1], ratios[2], opts.SplitSeed)
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// npzInts reads a whole integer member.
func npzInts(z *npzFile, name string) ([]int64, error) {
	a, err := z.array(name)
	if err != nil {
		return nil, err
	}
	if len(a.shape) != 1 {
		return nil, a.errorf("wrong shape %s, want one dimension", a.shapeString())
	}
	return a.ints()
}

// npzCSR reads the scipy CSR parts prefix_indptr and prefix_indices of a
// rows x cols matrix and checks them.
func npzCSR(z *npzFile, prefix string, rows, cols int64) (indptr, indices []int64, err error) {
	pa, err := z.array(prefix + "_indptr")
	if err != nil {
		return nil, nil, err
	}
	if err := pa.wantShape(rows + 1); err != nil {
		return nil, nil, err
	}
	if indptr, err = pa.ints(); err != nil {
		return nil, nil, err
	}
	ia, err := z.array(prefix + "_indices")
	if err != nil {
		return nil, nil, err
	}
	if err := ia.wantShape(-1); err != nil {
		return nil, nil, err
	}
	if indices, err = ia.ints(); err != nil {
		return nil, nil, err
	}
	if indptr[0] != 0 {
		return nil, nil, pa.errorf("indptr[0] = %d, want 0", indptr[0])
	}
	for i := int64(1); i <= rows; i++ {
		if indptr[i] < indptr[i-1] {
			return nil, nil, pa.errorf("indptr decreases at row %d (%d < %d)", i, indptr[i], indptr[i-1])
		}
	}
	if indptr[rows] != int64(len(indices)) {
		return nil, nil, pa.errorf("indptr ends at %d but %s_indices has %d entries", indptr[rows], prefix, len(indices))
	}
	for i, v := range indices {
		if v < 0 || v >= cols {
			return nil, nil, ia.errorf("indices[%d] = %d out of range [0, %d)", i, v, cols)
		}
	}
	return indptr, indices, nil
}

func putFloat32(b []byte, v float32) {
	u := math.Float32bits(v)
	_ = b[3]
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

func getFloat32(b []byte) float32 {
	_ = b[3]
	return math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}
