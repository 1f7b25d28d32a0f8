package pingpong

import "fmt"

// Alignment of every region inside a slot, and of slots inside a ring: 128
// bytes, so a GPU writes whole cache lines and a view of any region is
// aligned for every element type.
const Alignment = 128

// Region is one array inside a slot.
type Region struct {
	Name   string // e.g. "x", "y", "n_id", "edge_index"
	Offset int64  // from the start of the slot
	Bytes  int64  // capacity
	DType  string // element type, e.g. "float32", "int64"
}

// Layout is the arrangement of one slot; every slot of a ring has the same.
// What the regions are is the sampling mode's business (package batch); a
// layout only places them, in the order given, each Alignment-aligned.
type Layout struct {
	SlotBytes int64
	Regions   []Region
}

// NewLayout lays out a slot holding regions (their Name, Bytes and DType;
// Offset is computed).
func NewLayout(regions []Region) (Layout, error) {
	l := Layout{Regions: make([]Region, len(regions))}
	var off int64
	for i, r := range regions {
		if r.Bytes < 0 || r.Name == "" {
			return Layout{}, fmt.Errorf("pingpong: region %q of %d bytes", r.Name, r.Bytes)
		}
		r.Offset = off
		l.Regions[i] = r
		off += alignUp(max(r.Bytes, 1), Alignment)
	}
	if off == 0 {
		return Layout{}, fmt.Errorf("pingpong: a slot with no regions")
	}
	l.SlotBytes = off
	return l, nil
}

// Region returns the named region; it panics for a name the layout lacks.
func (l *Layout) Region(name string) Region {
	for _, r := range l.Regions {
		if r.Name == name {
			return r
		}
	}
	panic("pingpong: no region " + name)
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }
