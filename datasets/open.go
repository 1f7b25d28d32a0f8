package datasets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// OpenOptions control Open. A nil *OpenOptions means the defaults.
type OpenOptions struct {
	// SkipChecksums skips hashing the data files. Sizes, Arrow structure,
	// and the ranges of indices, labels and split ids are checked anyway.
	SkipChecksums bool
	// Workers hashes and checks on this many goroutines; 0 = GOMAXPROCS.
	Workers int
	// Progress counts bytes hashed.
	Progress Progress
}

// Dataset is an open dataset directory. Its Data aliases read-only mappings
// of the files: the slices are valid until Close and must not be written.
// A Dataset may be read by any number of goroutines at once.
type Dataset struct {
	Data
	Manifest *Manifest
	Dir      string

	maps []*mappedFile
}

// Open maps the dataset at dir and reads it zero-copy. By default it checks
// every file's size and checksum against the manifest (in parallel: the
// hashing runs at several GB/s per core) and the ranges of every id; any
// mismatch is an error naming the file and what is wrong, and nothing stays
// mapped.
func Open(dir string, opts *OpenOptions) (ds *Dataset, err error) {
	if opts == nil {
		opts = &OpenOptions{}
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	ds = &Dataset{Manifest: m, Dir: dir}
	defer func() {
		if err != nil {
			ds.Close()
			ds = nil
		}
	}()
	progress := orNop(opts.Progress)
	if !opts.SkipChecksums {
		var total int64
		for _, f := range m.Files {
			total += f.Bytes
		}
		progress.Begin("verify", total)
	}
	mapped := map[string][]byte{}
	for _, f := range m.Files {
		path := filepath.Join(dir, f.Name)
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("dataset %s: %w", dir, err)
		}
		if st.Size() != f.Bytes {
			what := "truncated"
			if st.Size() > f.Bytes {
				what = "longer than recorded"
			}
			return nil, fmt.Errorf("%s: %s: %d bytes, manifest says %d", path, what, st.Size(), f.Bytes)
		}
		mf, err := mapFile(path)
		if err != nil {
			return nil, err
		}
		ds.maps = append(ds.maps, mf)
		if !opts.SkipChecksums {
			got := ComputeChecksum(mf.data, f.Checksum.ChunkBytes, opts.Workers, progress)
			if got.Value != f.Checksum.Value {
				return nil, fmt.Errorf("%s: checksum mismatch: file hashes to %s, manifest says %s (the file is corrupt or was changed)", path, got.Value, f.Checksum.Value)
			}
		}
		mapped[f.Role] = mf.data
	}
	read := func(role string, want column) ([]byte, error) {
		return readColumn(filepath.Join(dir, m.File(role).Name), mapped[role], want)
	}
	n := m.NumNodes
	d := &ds.Data
	d.Name, d.Directed, d.NumClasses, d.ClassNames, d.Source = m.Name, m.Directed, m.NumClasses, m.ClassNames, m.Source
	d.FeatureDim, d.FeatureDType = m.FeatureDim, m.FeatureDType
	d.Graph.NumNodes = n
	c, err := read(roleIndptr, column{field: "indptr", elem: int64Type, rows: n + 1})
	if err != nil {
		return nil, err
	}
	d.Graph.Indptr = asInt64s(c)
	if Wide(n) {
		c, err = read(roleIndices, column{field: "indices", elem: int64Type, rows: m.NumEdges})
		if err == nil {
			d.Graph.Indices64 = asInt64s(c)
		}
	} else {
		c, err = read(roleIndices, column{field: "indices", elem: int32Type, rows: m.NumEdges})
		if err == nil {
			d.Graph.Indices32 = asInt32s(c)
		}
	}
	if err != nil {
		return nil, err
	}
	c, err = read(roleFeatures, column{field: "x", elem: arrowElemType(m.FeatureDType), dim: m.FeatureDim, rows: n})
	if err != nil {
		return nil, err
	}
	d.Features = c
	c, err = read(roleLabels, column{field: "y", elem: int32Type, rows: n})
	if err != nil {
		return nil, err
	}
	d.Labels = asInt32s(c)
	d.Splits = map[string][]int64{}
	for s, size := range m.Splits {
		if m.File(rolePrefixSp+s) == nil {
			return nil, fmt.Errorf("dataset %s: manifest lists split %q but no file for it", dir, s)
		}
		c, err = read(rolePrefixSp+s, column{field: "node_id", elem: int64Type, rows: size})
		if err != nil {
			return nil, err
		}
		d.Splits[s] = asInt64s(c)
	}
	if err := d.validate(workersOr(opts.Workers)); err != nil {
		var ae *arrayError
		if errors.As(err, &ae) && m.File(ae.role) != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, m.File(ae.role).Name), err)
		}
		return nil, fmt.Errorf("dataset %s: %w", dir, err)
	}
	return ds, nil
}

// Close unmaps the files. The Dataset's slices must not be used afterwards.
func (ds *Dataset) Close() error {
	if ds == nil {
		return nil
	}
	var errs []error
	for _, m := range ds.maps {
		errs = append(errs, m.unmap())
	}
	ds.maps = nil
	ds.Data = Data{}
	return errors.Join(errs...)
}

// Verify opens the dataset at dir with every check, including checksums, and
// closes it: the work of `loaderd verify`.
func Verify(dir string, workers int, progress Progress) (*Manifest, error) {
	ds, err := Open(dir, &OpenOptions{Workers: workers, Progress: progress})
	if err != nil {
		return nil, err
	}
	m := ds.Manifest
	return m, ds.Close()
}
