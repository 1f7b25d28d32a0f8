package datasets

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// OpenOptions control Open. A nil *OpenOptions means the defaults.
type OpenOptions struct {
	// SkipChecksums skips hashing the data files. Sizes, Arrow structure,
	// and the ranges of indices, labels and split ids are checked anyway.
	SkipChecksums bool
	// NoFeatures leaves the feature table out: Features is nil and
	// features.arrow is neither read nor checked (for work on the graph
	// alone, such as benchmarking the sampler).
	NoFeatures bool
	// Workers reads, hashes and checks on this many goroutines;
	// 0 = GOMAXPROCS.
	Workers int
	// Progress counts the bytes read (stage "verify" when hashing, "read"
	// otherwise).
	Progress Progress
	// AllocFeatures, when set, allocates the memory features.arrow (or each
	// node type's features of a heterogeneous dataset) is read
	// into (for example pinned.Alloc, so that the GPU path registers the
	// rows where they lie instead of copying them); FreeFeatures must be
	// set with it. Open asks for the file's size plus FeatureAlign bytes
	// and places the file so that the rows start on a FeatureAlign
	// boundary, somewhere inside the allocation. If Open fails it gives the
	// memory back with FreeFeatures; once it succeeds the memory is the
	// caller's: Close leaves it alone.
	AllocFeatures func(n int64) ([]byte, error)
	FreeFeatures  func([]byte) error

	// NoEdgeFeatures leaves edge_attr and edge_weight out (EdgeAttr and
	// EdgeWeight nil; EdgeDim stays as the manifest says).
	NoEdgeFeatures bool
	// AllocEdgeFeatures and FreeEdgeFeatures are AllocFeatures and
	// FreeFeatures for edge_attr.arrow and edge_weight.arrow (called once
	// for each present, never two calls at once): the same alignment, the
	// same ownership.
	AllocEdgeFeatures func(n int64) ([]byte, error)
	FreeEdgeFeatures  func([]byte) error

	// AllowHetero opens a heterogeneous dataset (format_version 2) as
	// Dataset.Hetero; without it Open refuses one with an error wrapping
	// ErrHetero. The other options but SkipChecksums, Workers and Progress
	// do not apply to it.
	AllowHetero bool

	// streamFeatures (Verify) checks features.arrow without keeping it:
	// hashed through small buffers, structure checked from its metadata.
	streamFeatures bool
}

// Dataset is an open dataset directory. Its Data lies in private memory
// Open read the files into, so nothing that happens to the files afterwards
// (a truncation, a copy over them) reaches it. The slices are valid until
// Close and must not be written (they are read-only, except features in
// memory from OpenOptions.AllocFeatures). A Dataset may be read by any
// number of goroutines at once.
type Dataset struct {
	Data
	Manifest *Manifest
	Dir      string
	// Hetero is the heterogeneous dataset (OpenOptions.AllowHetero); Data
	// then holds only Name and Source.
	Hetero *Hetero

	images []*image
}

// Open reads the dataset at dir into memory, each file once, and checks
// it: by default every file's size and checksum against the manifest (in
// parallel chunks, each hashed as it is read, so the checksum covers exactly
// the bytes served), the Arrow structure of every file, and the ranges of
// every id. Any mismatch is an error naming the file and what is wrong, and
// nothing stays allocated. The feature rows start on a FeatureAlign
// boundary.
func Open(dir string, opts *OpenOptions) (_ *Dataset, err error) {
	if opts == nil {
		opts = &OpenOptions{}
	}
	if (opts.AllocFeatures == nil) != (opts.FreeFeatures == nil) {
		return nil, errors.New("datasets: OpenOptions.AllocFeatures and FreeFeatures go together")
	}
	if (opts.AllocEdgeFeatures == nil) != (opts.FreeEdgeFeatures == nil) {
		return nil, errors.New("datasets: OpenOptions.AllocEdgeFeatures and FreeEdgeFeatures go together")
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if opts.AllocEdgeFeatures != nil {
		// Two files are read at once: their calls are made one at a time.
		o := *opts
		alloc, free := opts.AllocEdgeFeatures, opts.FreeEdgeFeatures
		var mu sync.Mutex
		o.AllocEdgeFeatures = func(n int64) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			return alloc(n)
		}
		o.FreeEdgeFeatures = func(b []byte) error {
			mu.Lock()
			defer mu.Unlock()
			return free(b)
		}
		opts = &o
	}
	ds := &Dataset{Manifest: m, Dir: dir}
	defer func() {
		if err != nil {
			// ds, not the result: "return nil, err" has set that to nil.
			ds.Close()
		}
	}()
	if m.FormatVersion == FormatVersionHetero {
		if !opts.AllowHetero {
			return nil, heteroRefusal(dir, m)
		}
		if err := openHetero(dir, m, opts, ds); err != nil {
			return nil, err
		}
		return ds, nil
	}
	progress := orNop(opts.Progress)
	var total, held int64 // the bytes read, and those kept in memory
	for _, f := range m.Files {
		if !opts.skips(f.Role) {
			held += f.Bytes
		}
		if !opts.skips(f.Role) || opts.streamFeatures {
			total += f.Bytes
		}
	}
	if err := fitsMemory(dir, held); err != nil {
		return nil, err
	}
	if opts.SkipChecksums {
		progress.Begin("read", total)
	} else {
		progress.Begin("verify", total)
	}
	n := m.NumNodes
	idx := int32Type
	if Wide(n) {
		idx = int64Type
	}
	type load struct {
		role string
		want column
		im   *image
		err  error
	}
	loads := []*load{
		{role: roleIndptr, want: column{field: "indptr", elem: int64Type, rows: n + 1}},
		{role: roleIndices, want: column{field: "indices", elem: idx, rows: m.NumEdges}},
		{role: roleFeatures, want: column{field: "x", elem: arrowElemType(m.FeatureDType), dim: m.FeatureDim, rows: n}},
		{role: roleLabels, want: column{field: "y", elem: int32Type, rows: n}},
	}
	for _, s := range SplitNames {
		if size, ok := m.Splits[s]; ok {
			loads = append(loads, &load{role: rolePrefixSp + s, want: column{field: "node_id", elem: int64Type, rows: size}})
		}
	}
	for _, role := range optionalRoles {
		if m.File(role) != nil {
			loads = append(loads, &load{role: role, want: optionalColumn(m, role)})
		}
	}
	for _, f := range m.Files {
		if split, part, ok := parseLinkRole(f.Role); ok {
			loads = append(loads, &load{role: f.Role, want: linkColumn(part, m.LinkSplits[split])})
		}
	}
	// Every file is read at once, at most Workers chunks at a time in all,
	// so that a dataset's small files do not wait for its big ones.
	sem := make(chan struct{}, workersOr(opts.Workers))
	var wg sync.WaitGroup
	for _, l := range loads {
		f := m.File(l.role)
		path := filepath.Join(dir, f.Name)
		o := readOptions{size: f.Bytes, workers: opts.Workers, sem: sem, progress: progress}
		if !opts.SkipChecksums {
			o.checksum = &f.Checksum
		}
		switch {
		case opts.skips(l.role) && opts.streamFeatures:
			wg.Go(func() { l.err = streamCheck(path, o, l.want) })
		case opts.skips(l.role):
		default:
			o.alloc, o.free = opts.allocFor(l.role)
			if l.role == roleFeatures || o.alloc != nil {
				o.alignValues = FeatureAlign
			}
			wg.Go(func() { l.im, l.err = readImage(path, o) })
		}
	}
	wg.Wait()
	owned := map[*image]bool{} // in the caller's memory
	for _, l := range loads {
		if l.im != nil {
			ds.images = append(ds.images, l.im)
			if alloc, _ := opts.allocFor(l.role); alloc != nil {
				owned[l.im] = true
			}
		}
	}
	// The first error in file order, whichever came first.
	cols := map[string][]byte{}
	for _, l := range loads {
		if l.err == nil && l.im != nil {
			path := filepath.Join(dir, m.File(l.role).Name)
			cols[l.role], l.err = readColumn(path, l.im.data, l.want)
		}
		if l.err != nil {
			return nil, l.err
		}
	}
	d := &ds.Data
	d.Name, d.Directed, d.NumClasses, d.ClassNames, d.Source = m.Name, m.Directed, m.NumClasses, m.ClassNames, m.Source
	d.FeatureDim, d.FeatureDType = m.FeatureDim, m.FeatureDType
	d.Graph.NumNodes = n
	d.Graph.Indptr = asInt64s(cols[roleIndptr])
	if Wide(n) {
		d.Graph.Indices64 = asInt64s(cols[roleIndices])
	} else {
		d.Graph.Indices32 = asInt32s(cols[roleIndices])
	}
	if c, ok := cols[roleEdgeAttr]; ok && opts.AllocEdgeFeatures != nil && len(c) > 0 && uintptr(unsafe.Pointer(&c[0]))%FeatureAlign != 0 {
		return nil, fmt.Errorf("%s: the rows moved while the file was read (was it changed?)", filepath.Join(dir, m.File(roleEdgeAttr).Name))
	}
	if c, ok := cols[roleFeatures]; ok {
		if len(c) > 0 && uintptr(unsafe.Pointer(&c[0]))%FeatureAlign != 0 {
			return nil, fmt.Errorf("%s: the rows moved while the file was read (was it changed?)", filepath.Join(dir, m.File(roleFeatures).Name))
		}
		d.Features = c
	}
	d.Labels = asInt32s(cols[roleLabels])
	d.Splits = map[string][]int64{}
	for s := range m.Splits {
		d.Splits[s] = asInt64s(cols[rolePrefixSp+s])
	}
	d.EdgeDim, d.EdgeDType = m.EdgeDim, m.EdgeDType
	if c, ok := cols[roleEdgeAttr]; ok {
		d.EdgeAttr = c
	}
	if c, ok := cols[roleEdgeWeight]; ok {
		d.EdgeWeight = asFloat32s(c)
	}
	if c, ok := cols[roleEdgeTime]; ok {
		d.EdgeTime = asInt64s(c)
	}
	if c, ok := cols[roleNodeTime]; ok {
		d.NodeTime = asInt64s(c)
	}
	d.LinkSplits = linkSplitsFrom(m, cols)
	if err := d.validateArrays(workersOr(opts.Workers), !opts.NoFeatures, !opts.NoEdgeFeatures); err != nil {
		var ae *arrayError
		if errors.As(err, &ae) && m.File(ae.role) != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, m.File(ae.role).Name), err)
		}
		return nil, fmt.Errorf("dataset %s: %w", dir, err)
	}
	for _, im := range ds.images {
		if owned[im] {
			im.free = nil // the caller's now
		} else {
			// Read-only from here, as the shared mappings were.
			_ = unix.Mprotect(im.mem, unix.PROT_READ)
		}
	}
	return ds, nil
}

// skips reports whether Open leaves the file of role out.
func (o *OpenOptions) skips(role string) bool {
	switch role {
	case roleFeatures:
		return o.NoFeatures
	case roleEdgeAttr, roleEdgeWeight:
		return o.NoEdgeFeatures
	}
	return false
}

// allocFor is the caller's allocator for the file of role, or nils.
func (o *OpenOptions) allocFor(role string) (func(int64) ([]byte, error), func([]byte) error) {
	switch role {
	case roleFeatures:
		return o.AllocFeatures, o.FreeFeatures
	case roleEdgeAttr, roleEdgeWeight:
		return o.AllocEdgeFeatures, o.FreeEdgeFeatures
	}
	return nil, nil
}

// optionalColumn is the expected column of an optional file.
func optionalColumn(m *Manifest, role string) column {
	switch role {
	case roleEdgeAttr:
		return edgeAttrColumn(m.NumEdges, m.EdgeDim, m.EdgeDType, nil)
	case roleEdgeWeight:
		return column{field: "edge_weight", elem: float32Type, rows: m.NumEdges}
	case roleEdgeTime:
		return column{field: "time", elem: int64Type, rows: m.NumEdges}
	}
	return column{field: "time", elem: int64Type, rows: m.NumNodes}
}

// Close frees the memory the files were read into (except features in
// memory from OpenOptions.AllocFeatures, which is the caller's). The
// Dataset's slices must not be used afterwards.
func (ds *Dataset) Close() error {
	if ds == nil {
		return nil
	}
	var errs []error
	for _, im := range ds.images {
		errs = append(errs, im.release())
	}
	ds.images = nil
	ds.Data = Data{}
	ds.Hetero = nil
	return errors.Join(errs...)
}

// machineMemory is the machine's memory and swap in bytes (0: unknown); a
// variable so that tests can make it small.
var machineMemory = func() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return (int64(si.Totalram) + int64(si.Totalswap)) * int64(si.Unit)
}

// fitsMemory refuses, before anything is allocated or read, a dataset
// whose files to be kept in memory (held bytes, as the manifest records
// them and the files' sizes then match) outgrow the machine's memory and
// swap: reading them would end in the kernel's out-of-memory killer, not
// an error (a file grown sparse to terabytes, with a manifest to match).
func fitsMemory(dir string, held int64) error {
	if have := machineMemory(); have > 0 && held > have {
		return fmt.Errorf("dataset %s: its files hold %d bytes to read into memory, more than this machine's memory and swap (%d bytes)", dir, held, have)
	}
	return nil
}
