package datasets

import (
	"fmt"
	"io"
	"runtime"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Each data file is an Arrow IPC file (uncompressed, so it can be mapped)
// with one column and one record batch, so every array is one contiguous
// buffer of the mapping.
//
//	indptr.arrow       indptr   int64                    num_nodes+1
//	indices.arrow      indices  int32 (int64 if N>=2^31) num_edges
//	features.arrow     x        FixedSizeList<T>[dim]    num_nodes   (T = float32, float16, float64, int64, int32, uint8,
//	                                                                  uint16 holding bfloat16, uint8 holding bool)
//	labels.arrow       y        int32                    num_nodes   (-1 = unlabelled)
//	split_<name>.arrow node_id  int64                    split size
//	edge_attr.arrow    edge_attr FixedSizeList<T>[edge_dim] num_edges (optional; T as for x)
//	edge_weight.arrow  edge_weight float32                num_edges   (optional)
//	edge_time.arrow    time     int64                    num_edges   (optional)
//	node_time.arrow    time     int64                    num_nodes   (optional)
//
// Per-edge files are in CSR order: row p is the edge at indices[p].
//
// bfloat16 has no Arrow type: it is stored as uint16 with field metadata
// gnnloader.dtype=bfloat16. bool is stored as uint8 (0 or 1, one byte per
// value, not Arrow's bit-packed boolean, so rows stay byte-addressable) with
// gnnloader.dtype=bool. The manifest's dtype is what counts; the metadata
// tells other Arrow readers.

const dtypeMetaKey = "gnnloader.dtype"

func arrowElemType(d DType) arrow.DataType {
	switch d {
	case Float16:
		return arrow.FixedWidthTypes.Float16
	case BFloat16:
		return arrow.PrimitiveTypes.Uint16
	case Float64:
		return arrow.PrimitiveTypes.Float64
	case Int64:
		return arrow.PrimitiveTypes.Int64
	case Int32:
		return arrow.PrimitiveTypes.Int32
	case UInt8, Bool:
		return arrow.PrimitiveTypes.Uint8
	}
	return arrow.PrimitiveTypes.Float32
}

// dtypeMeta is the field metadata naming d where its Arrow type does not
// (bfloat16 as uint16, bool as uint8), or nil.
func dtypeMeta(d DType) map[string]string {
	if d == BFloat16 || d == Bool {
		return map[string]string{dtypeMetaKey: string(d)}
	}
	return nil
}

// column is what goes into one data file: a flat buffer of little-endian
// values and, for features, the row width.
type column struct {
	field string
	elem  arrow.DataType
	dim   int // > 0: FixedSizeList of dim elements per row
	meta  map[string]string
	rows  int64
	data  []byte
}

func (c column) arrowType() arrow.DataType {
	if c.dim > 0 {
		return arrow.FixedSizeListOfNonNullable(int32(c.dim), c.elem)
	}
	return c.elem
}

// writeColumn writes c as an Arrow IPC file to w without copying its data.
func writeColumn(w io.Writer, c column) error {
	field := arrow.Field{Name: c.field, Type: c.arrowType(), Nullable: false}
	if len(c.meta) > 0 {
		field.Metadata = arrow.MetadataFrom(c.meta)
	}
	schema := arrow.NewSchema([]arrow.Field{field}, nil)
	buf := memory.NewBufferBytes(c.data)
	var data arrow.ArrayData
	if c.dim > 0 {
		child := array.NewData(c.elem, int(c.rows)*c.dim, []*memory.Buffer{nil, buf}, nil, 0, 0)
		defer child.Release()
		data = array.NewData(c.arrowType(), int(c.rows), []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)
	} else {
		data = array.NewData(c.elem, int(c.rows), []*memory.Buffer{nil, buf}, nil, 0, 0)
	}
	arr := array.MakeFromData(data)
	data.Release()
	defer arr.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{arr}, c.rows)
	defer rec.Release()
	fw, err := ipc.NewFileWriter(w, ipc.WithSchema(schema))
	if err != nil {
		return err
	}
	if err := fw.Write(rec); err != nil {
		fw.Close()
		return err
	}
	return fw.Close()
}

// newArrowReader is arrow-go's reader (a variable: a test makes it panic).
var newArrowReader = ipc.NewMappedFileReader

// readColumn reads the single column of the Arrow file held in b (the whole
// file) and checks its name, type and length; the returned values alias b.
// The structure is checked by checkArrowFile before arrow-go parses it, and a
// panic inside arrow-go is turned into an error here, at that parser
// boundary: a file that gets past both is one arrow-go and gnnloader read the
// same way (the value buffer must be where checkArrowFile found it). name
// is the file's path, for errors.
func readColumn(name string, b []byte, want column) (values []byte, err error) {
	valueOff, err := checkArrowFile(b, want)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer func() {
		if p := recover(); p != nil {
			values, err = nil, fmt.Errorf("%s: the Arrow reader failed on a file that passed gnnloader's checks: %v", name, p)
		}
	}()
	r, err := newArrowReader(b, ipc.WithBodySizeLimit(0), ipc.WithMetadataSizeLimit(64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable Arrow IPC file: %w", name, err)
	}
	defer r.Close()
	fail := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("%s: "+format, append([]any{name}, args...)...)
	}
	s := r.Schema()
	if s.NumFields() != 1 {
		return fail("%d columns, want 1", s.NumFields())
	}
	f := s.Field(0)
	if f.Name != want.field {
		return fail("column %q, want %q", f.Name, want.field)
	}
	if !arrow.TypeEqual(f.Type, want.arrowType()) {
		return fail("column %q has type %s, want %s", f.Name, f.Type, want.arrowType())
	}
	if r.NumRecords() != 1 {
		return fail("%d record batches, want 1", r.NumRecords())
	}
	rec, err := r.RecordBatch(0)
	if err != nil {
		return fail("reading record batch: %v", err)
	}
	if rec.NumRows() != want.rows {
		return fail("%d rows, want %d", rec.NumRows(), want.rows)
	}
	d := rec.Column(0).Data()
	if d.NullN() != 0 {
		return fail("%d nulls", d.NullN())
	}
	if want.dim > 0 {
		d = d.Children()[0]
	}
	width := int64(want.elem.(arrow.FixedWidthDataType).BitWidth() / 8)
	n := want.rows * int64(max(want.dim, 1)) * width // checkArrowFile checked it fits
	if n == 0 {
		return []byte{}, nil
	}
	if d.Offset() != 0 || len(d.Buffers()) < 2 || d.Buffers()[1] == nil {
		return fail("unexpected array layout")
	}
	values = d.Buffers()[1].Bytes()
	if int64(len(values)) < n || &values[0] != &b[valueOff] {
		return fail("arrow-go reads the value buffer elsewhere than its metadata says")
	}
	values = values[:n:n]
	if uintptr(unsafe.Pointer(&values[0]))%uintptr(width) != 0 {
		return fail("value buffer is not %d-byte aligned", width)
	}
	return values, nil
}

// Typed views of little-endian byte slices (the only byte order gnnloader
// runs on). The views alias b.
func asInt64s(b []byte) []int64 {
	if len(b) == 0 {
		return []int64{}
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), len(b)/8)
}

func asInt32s(b []byte) []int32 {
	if len(b) == 0 {
		return []int32{}
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func int64Bytes(s []int64) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*8)
}

func asFloat32s(b []byte) []float32 {
	if len(b) == 0 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func float32Bytes(s []float32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*4)
}

func int32Bytes(s []int32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*4)
}

func workersOr(n int) int {
	if n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

var (
	int64Type   = arrow.PrimitiveTypes.Int64
	int32Type   = arrow.PrimitiveTypes.Int32
	float32Type = arrow.PrimitiveTypes.Float32
)
