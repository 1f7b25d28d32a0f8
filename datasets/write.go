package datasets

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteOptions control Write. A nil *WriteOptions means the defaults.
type WriteOptions struct {
	// Overwrite replaces an existing dataset at dir: a directory holding a
	// gnnloader dataset and nothing else (or an empty directory); anything
	// else there is refused and left as it is. Without it Write refuses to
	// touch an existing path.
	Overwrite bool
	// Workers is unused: Write hashes each file as it writes it.
	//
	// Deprecated: files are no longer hashed after writing.
	Workers int
	// Progress counts the bytes written.
	Progress Progress
}

// Write stores d as a dataset directory at dir. It validates d first, writes
// every file into a temporary directory beside dir, and renames it into place
// only when everything is written and synced: a failed, cancelled or killed
// Write leaves no new dataset at dir (a killed one leaves a ".<name>.tmp-<pid>"
// directory that the next Write to dir removes). With Overwrite it replaces
// only a dataset directory, atomically (overwrite.go says how).
func Write(dir string, d *Data, opts *WriteOptions) error {
	return WriteContext(context.Background(), dir, d, opts)
}

// WriteContext is Write with a context: cancelling ctx stops the write between
// files and removes the temporary directory.
func WriteContext(ctx context.Context, dir string, d *Data, opts *WriteOptions) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("dataset %s: not written: %w", d.Name, err)
	}
	return writeDir(ctx, dir, columnsOf(d), manifestOf(d), opts)
}

// CheckWritable reports whether Write could write a dataset at dir with
// WriteOptions.Overwrite = overwrite, as Write itself checks it: nothing at
// dir, or (overwrite) a dataset directory or an empty one. A command that
// reads for minutes before it writes asks first.
func CheckWritable(dir string, overwrite bool) error {
	_, _, err := writeTarget(filepath.Clean(dir), overwrite)
	return err
}

// writeTarget checks what is at dir for a write: nothing (exists false), or,
// with overwrite, a dataset whose files it returns (or an empty directory).
func writeTarget(dir string, overwrite bool) (old []string, exists bool, err error) {
	if _, err := os.Lstat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, err
	}
	if !overwrite {
		return nil, false, fmt.Errorf("%s already exists (use overwrite to replace it)", dir)
	}
	if old, err = replaceable(dir); err != nil {
		return nil, false, err
	}
	return old, true, nil
}

// writeDir writes the columns and the manifest m (which gets their file
// entries) as a dataset directory at dir, the way Write describes.
func writeDir(ctx context.Context, dir string, cols []namedColumn, m *Manifest, opts *WriteOptions) (err error) {
	if opts == nil {
		opts = &WriteOptions{}
	}
	dir = filepath.Clean(dir)
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	// First put back a dataset an interrupted overwrite left aside, so that
	// what is at dir is what the user last had.
	if err := recoverStale(parent, base); err != nil {
		return err
	}
	old, exists, err := writeTarget(dir, opts.Overwrite) // old: the files of the dataset being replaced
	if err != nil {
		return err
	}
	tmp := filepath.Join(parent, fmt.Sprintf(".%s.tmp-%d", base, os.Getpid()))
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()

	progress := orNop(opts.Progress)
	var total int64
	for _, c := range cols {
		total += int64(len(c.data))
	}
	progress.Begin("write", total)
	for _, c := range cols {
		if err := ctx.Err(); err != nil {
			return err
		}
		entry, err := writeFile(tmp, c, progress)
		if err != nil {
			return fmt.Errorf("writing %s: %w", c.role, err)
		}
		m.Files = append(m.Files, entry)
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	mb = append(mb, '\n')
	if err := writeFileSync(filepath.Join(tmp, ManifestName), mb); err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(tmp, ManifestSumName), manifestSum(mb)); err != nil {
		return err
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if exists {
		if _, err := os.Lstat(dir); err != nil {
			return fmt.Errorf("%s disappeared during the write: %w", dir, err)
		}
		return swapIn(parent, base, tmp, dir, old)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return syncDir(parent)
}

// namedColumn is a column with its manifest role.
type namedColumn struct {
	column
	role string
}

func columnsOf(d *Data) []namedColumn {
	n := d.Graph.NumNodes
	cols := []namedColumn{
		{role: roleIndptr, column: column{field: "indptr", elem: int64Type, rows: n + 1, data: int64Bytes(d.Graph.Indptr)}},
	}
	if Wide(n) {
		cols = append(cols, namedColumn{role: roleIndices, column: column{field: "indices", elem: int64Type, rows: d.Graph.NumEdges(), data: int64Bytes(d.Graph.Indices64)}})
	} else {
		cols = append(cols, namedColumn{role: roleIndices, column: column{field: "indices", elem: int32Type, rows: d.Graph.NumEdges(), data: int32Bytes(d.Graph.Indices32)}})
	}
	feat := column{field: "x", elem: arrowElemType(d.FeatureDType), dim: d.FeatureDim, rows: n, data: d.Features, meta: dtypeMeta(d.FeatureDType)}
	cols = append(cols,
		namedColumn{role: roleFeatures, column: feat},
		namedColumn{role: roleLabels, column: column{field: "y", elem: int32Type, rows: n, data: int32Bytes(d.Labels)}},
	)
	for _, s := range SplitNames {
		ids, ok := d.Splits[s]
		if !ok {
			continue
		}
		cols = append(cols, namedColumn{role: rolePrefixSp + s, column: column{field: "node_id", elem: int64Type, rows: int64(len(ids)), data: int64Bytes(ids)}})
	}
	e := d.Graph.NumEdges()
	if d.EdgeDim > 0 {
		cols = append(cols, namedColumn{role: roleEdgeAttr, column: edgeAttrColumn(e, d.EdgeDim, d.EdgeDType, d.EdgeAttr)})
	}
	if d.EdgeWeight != nil {
		cols = append(cols, namedColumn{role: roleEdgeWeight, column: column{field: "edge_weight", elem: float32Type, rows: e, data: float32Bytes(d.EdgeWeight)}})
	}
	if d.EdgeTime != nil {
		cols = append(cols, namedColumn{role: roleEdgeTime, column: column{field: "time", elem: int64Type, rows: e, data: int64Bytes(d.EdgeTime)}})
	}
	if d.NodeTime != nil {
		cols = append(cols, namedColumn{role: roleNodeTime, column: column{field: "time", elem: int64Type, rows: d.Graph.NumNodes, data: int64Bytes(d.NodeTime)}})
	}
	return append(cols, linkColumns(d)...)
}

func edgeAttrColumn(rows int64, dim int, dt DType, data []byte) column {
	return column{field: "edge_attr", elem: arrowElemType(dt), dim: dim, rows: rows, data: data, meta: dtypeMeta(dt)}
}

func manifestOf(d *Data) *Manifest {
	m := &Manifest{
		Format:        FormatName,
		FormatVersion: FormatVersion,
		Name:          d.Name,
		NumNodes:      d.Graph.NumNodes,
		NumEdges:      d.Graph.NumEdges(),
		FeatureDim:    d.FeatureDim,
		FeatureDType:  d.FeatureDType,
		NumClasses:    d.NumClasses,
		ClassNames:    d.ClassNames,
		Directed:      d.Directed,
		Splits:        map[string]int64{},
		Source:        d.Source,
		EdgeDim:       d.EdgeDim,
		EdgeDType:     d.EdgeDType,
	}
	for s, ids := range d.Splits {
		m.Splits[s] = int64(len(ids))
	}
	for s, l := range d.LinkSplits {
		if m.LinkSplits == nil {
			m.LinkSplits = map[string]LinkSplitInfo{}
		}
		m.LinkSplits[s] = LinkSplitInfo{NumEdges: l.Len(), NumNeg: l.NumNeg}
	}
	return m
}

// countingWriter counts written bytes, for the manifest and for progress.
type countingWriter struct {
	w io.Writer
	p Progress
	n int64
}

func (cw *countingWriter) Write(b []byte) (int, error) {
	n, err := cw.w.Write(b)
	cw.n += int64(n)
	cw.p.Add(int64(n))
	return n, err
}

func writeFile(dir string, c namedColumn, progress Progress) (FileEntry, error) {
	name := fileNameFor(c.role)
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return FileEntry{}, err
	}
	// Hash what is written as it is written: the checksum is of the bytes
	// handed to the file, and nothing reads the file back.
	bw := bufio.NewWriterSize(f, 4<<20)
	h := newTreeHasher(DefaultChunkBytes)
	cw := &countingWriter{w: io.MultiWriter(bw, h), p: progress}
	err = writeColumn(cw, c.column)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return FileEntry{}, err
	}
	return FileEntry{Name: name, Role: c.role, Bytes: cw.n, Checksum: h.Checksum()}, nil
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}
