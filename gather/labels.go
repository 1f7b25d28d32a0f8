package gather

import (
	"context"
	"fmt"
	"unsafe"
)

// Labels is the CPU backend of a labels table: row v is Of[v] (int32),
// written widened to int64 (a batch's y). Safe for concurrent use.
type Labels struct {
	Of []int32
}

var _ Backend = Labels{}

// Gather implements Backend: dst.Host[8i:] = Of[nid[i]] as int64. The order
// is ignored (a label is one small read).
func (l Labels) Gather(ctx context.Context, dst Dest, nid []int64, order []int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(dst.Host) < 8*len(nid) {
		return fmt.Errorf("gather: labels of %d rows into %d bytes", len(nid), len(dst.Host))
	}
	if len(nid) == 0 {
		return nil
	}
	y := unsafe.Slice((*int64)(unsafe.Pointer(&dst.Host[0])), len(nid))
	n := int64(len(l.Of))
	for i, v := range nid {
		if v < 0 || v >= n {
			return fmt.Errorf("gather: label of row %d out of range [0, %d)", v, n)
		}
		y[i] = int64(l.Of[v])
	}
	return nil
}

// Table implements Backend.
func (l Labels) Table() Table {
	var rows []byte
	if len(l.Of) > 0 {
		rows = unsafe.Slice((*byte)(unsafe.Pointer(&l.Of[0])), 4*len(l.Of))
	}
	return Table{Rows: rows, RowBytes: 4, NumRows: int64(len(l.Of))}
}

// Close does nothing.
func (Labels) Close() error { return nil }
