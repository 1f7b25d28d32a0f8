package gather

import (
	"fmt"
	"runtime"
	"sync"
)

// Table is a feature table in host memory: NumRows rows of RowBytes bytes,
// row-major and contiguous in Rows.
type Table struct {
	Rows     []byte
	RowBytes int
	NumRows  int64
}

// Check reports whether the table's sizes agree.
func (t Table) Check() error {
	if t.RowBytes <= 0 {
		return fmt.Errorf("gather: row size %d must be positive", t.RowBytes)
	}
	if int64(len(t.Rows)) != t.NumRows*int64(t.RowBytes) {
		return fmt.Errorf("gather: table holds %d bytes, want %d rows x %d bytes", len(t.Rows), t.NumRows, t.RowBytes)
	}
	return nil
}

// CPU gathers rows with goroutines. The zero value uses GOMAXPROCS workers.
// A CPU may be used by many goroutines at once.
type CPU struct {
	// Workers is the number of goroutines one Gather uses; 0 means GOMAXPROCS.
	Workers int
}

// minRowsPerWorker keeps small batches on one goroutine, where the cost of
// starting workers would exceed the copy.
const minRowsPerWorker = 4096

// Gather writes row nid[i] of t to dst[i*t.RowBytes:(i+1)*t.RowBytes] for
// every i. order lists the positions of nid in ascending nid order (address
// order); rows are read in that order. order may be nil (sampled order).
// dst must hold len(nid) rows. Gather returns an error, and writes nothing,
// if an id is out of range or the sizes disagree.
func (c *CPU) Gather(dst []byte, t Table, nid []int64, order []int32) error {
	if err := t.Check(); err != nil {
		return err
	}
	rb := t.RowBytes
	if len(dst) < len(nid)*rb {
		return fmt.Errorf("gather: destination holds %d bytes, want %d rows x %d bytes", len(dst), len(nid), rb)
	}
	if order != nil && len(order) != len(nid) {
		return fmt.Errorf("gather: order has %d entries for %d rows", len(order), len(nid))
	}
	for i, v := range nid {
		if v < 0 || v >= t.NumRows {
			return fmt.Errorf("gather: row id nid[%d] = %d out of range [0, %d)", i, v, t.NumRows)
		}
	}
	workers := c.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if max := (len(nid) + minRowsPerWorker - 1) / minRowsPerWorker; workers > max {
		workers = max
	}
	copyRange := func(lo, hi int) {
		for k := lo; k < hi; k++ {
			i := k
			if order != nil {
				i = int(order[k])
			}
			src := nid[i] * int64(rb)
			copy(dst[i*rb:(i+1)*rb], t.Rows[src:src+int64(rb)])
		}
	}
	if workers <= 1 {
		copyRange(0, len(nid))
		return nil
	}
	var wg sync.WaitGroup
	per := (len(nid) + workers - 1) / workers
	for lo := 0; lo < len(nid); lo += per {
		hi := min(lo+per, len(nid))
		wg.Add(1)
		go func() {
			defer wg.Done()
			copyRange(lo, hi)
		}()
	}
	wg.Wait()
	return nil
}
