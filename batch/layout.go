package batch

import "fmt"

// Region is one array of a batch, at the same place in every slot.
type Region struct {
	// Name is the field the trainer sees: "x", "y", "n_id", "edge_index".
	Name string
	// DType is the element type: "float32", "float16", "bfloat16", "int64",
	// "int32", "uint8", ...
	DType string
	// Shape is the capacity shape; every dimension is at least 1 except
	// the count axis, which may be 0.
	Shape []int64
	// CountAxis is the axis whose length varies from batch to batch. A
	// batch's data is the contiguous array of Shape with Shape[CountAxis]
	// replaced by its count, at the start of the region.
	CountAxis int
	// Table, when not empty, names the table whose rows are gathered into
	// the region ("x": the node features, "y": the labels as int64); the
	// region's rows are on axis 0. An empty Table means the mode writes the
	// region itself (Batch.WriteStructure).
	Table string
	// IDs names the region holding the row ids of a gathered region (int64,
	// one per row; "n_id" for x and y). The batch writes it as structure, so
	// a slot that is filled on a GPU has the ids there before the gather.
	IDs string
}

// Bytes is the region's capacity in bytes.
func (r Region) Bytes() int64 { return r.bytes(r.Shape[r.CountAxis]) }

// DataBytes is the bytes of a batch whose count is n.
func (r Region) DataBytes(n int) int64 { return r.bytes(int64(n)) }

func (r Region) bytes(count int64) int64 {
	n := int64(ElemSize(r.DType))
	for i, d := range r.Shape {
		if i == r.CountAxis {
			d = count
		}
		n *= d
	}
	return n
}

// Layout is what every batch of a mode holds: its regions, and the names of
// the integers (Scalars) and integer lists (Lists) each batch reports beside
// them, e.g. "batch_size" and "num_sampled_nodes".
type Layout struct {
	Regions []Region
	Scalars []string
	Lists   []string
}

// Index returns the position of the region called name, or -1.
func (l *Layout) Index(name string) int {
	for i, r := range l.Regions {
		if r.Name == name {
			return i
		}
	}
	return -1
}

// Check validates the layout: unique names, known types, shapes and count
// axes that make sense.
func (l *Layout) Check() error {
	seen := map[string]bool{}
	for _, r := range l.Regions {
		switch {
		case r.Name == "" || seen[r.Name]:
			return fmt.Errorf("batch: region name %q empty or repeated", r.Name)
		case ElemSize(r.DType) == 0:
			return fmt.Errorf("batch: region %q: unknown dtype %q", r.Name, r.DType)
		case len(r.Shape) == 0 || r.CountAxis < 0 || r.CountAxis >= len(r.Shape):
			return fmt.Errorf("batch: region %q: count axis %d of a %d-dimensional shape", r.Name, r.CountAxis, len(r.Shape))
		case r.Table != "" && r.CountAxis != 0:
			return fmt.Errorf("batch: gathered region %q must be counted on axis 0 (its rows)", r.Name)
		case r.Table != "" && l.Index(r.IDs) < 0:
			return fmt.Errorf("batch: gathered region %q takes its ids from %q, which the layout lacks", r.Name, r.IDs)
		case r.Table != "" && (l.Regions[l.Index(r.IDs)].DType != "int64" || len(l.Regions[l.Index(r.IDs)].Shape) != 1 || l.Regions[l.Index(r.IDs)].Table != ""):
			return fmt.Errorf("batch: the ids of gathered region %q (%q) must be a one-dimensional int64 region the batch writes", r.Name, r.IDs)
		}
		for i, d := range r.Shape {
			if d < 0 || d == 0 && i != r.CountAxis {
				return fmt.Errorf("batch: region %q: shape %v", r.Name, r.Shape)
			}
		}
		seen[r.Name] = true
	}
	return nil
}

// ElemSize is the size in bytes of one element of dtype, 0 for an unknown one.
func ElemSize(dtype string) int {
	switch dtype {
	case "float64", "int64", "uint64":
		return 8
	case "float32", "int32", "uint32":
		return 4
	case "float16", "bfloat16", "int16", "uint16":
		return 2
	case "int8", "uint8", "bool":
		return 1
	}
	return 0
}

// Meta is what one batch reports beside its regions' data (the BatchReady
// message): per region the count along its count axis, and the values of
// the layout's scalars and lists, in layout order.
type Meta struct {
	Counts  []uint32
	Scalars []int64
	Lists   [][]uint32
}

// Mode is a sampling mode: what its batches hold and how they are sampled.
type Mode interface {
	// Layout is the same for every batch of the mode.
	Layout() *Layout
	// NewBatch returns an empty batch to sample into (and reuse).
	NewBatch() Batch
	// BatchBytes bounds the host memory one sampled batch holds (what a
	// daemon counts against its memory budget for each batch in flight).
	BatchBytes() int64
	// Sample samples the batch of the given seeds into b. key makes it
	// reproducible: the same seeds and key give the same bytes.
	Sample(seeds []int64, key uint64, b Batch) error
}

// Batch is one sampled batch of a Mode.
type Batch interface {
	// Meta fills m (reusing its slices) for the batch.
	Meta(m *Meta)
	// Rows returns the table rows gathered into region r (one with a
	// Table), in the region's row order, and their address order (the
	// positions of ids in ascending id order), or nil when the mode was
	// made without it.
	Rows(r int) (ids []int64, order []int32)
	// WriteStructure writes every region without a Table: region(r) is
	// host memory of at least DataBytes(count) bytes for region r. It uses
	// up to workers goroutines.
	WriteStructure(region func(r int) []byte, workers int)
}
