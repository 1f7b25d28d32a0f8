package gather

import (
	"context"
	"fmt"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/pinned"
)

// Dest is where a Gather writes its rows: row i at byte i*RowBytes.
// A CPU backend writes Host; a CUDA backend writes device memory at Device.
type Dest struct {
	Host []byte
	// Device is the device address of row 0 (CUDA backends).
	Device cudaext.DevicePtr
	// DeviceBytes, if not 0, is the size of the region at Device; Gather
	// checks that the rows fit.
	DeviceBytes int64
}

// Backend gathers rows of one table into destinations. Gather writes row
// nid[i] of the table to row i of dst, reading rows in the order order lists
// (positions of nid in ascending id order; nil means sampled order). When it
// returns, nid and order may be reused; the rows are written (CPU) or enqueued
// on the backend's stream (CUDA: see (*CUDA).Stream and Sync). A Backend may
// be used by one goroutine at a time unless its docs say otherwise.
type Backend interface {
	Gather(ctx context.Context, dst Dest, nid []int64, order []int32) error
	Table() Table
	Close() error
}

// Sweeper is a Backend that can also gather several batches in one sorted
// pass over its table, reading each row they share once (a sparse batch
// alone reads a large table slowly; the union of a few reads it at PCIe
// speed). A caller finds the capability by type assertion and falls back to
// one Gather per batch without it.
type Sweeper interface {
	Backend
	// Sweep writes parts[j].Nid's rows to parts[j].Dst for every j, at most
	// MaxSweepParts parts, like one Gather each.
	Sweep(ctx context.Context, parts []SweepPart) (*SweepPlan, error)
}

var (
	_ Backend = (*CPUBackend)(nil)
	_ Sweeper = (*CUDA)(nil)
)

// TableOf is the Table view of a pinned store.
func TableOf(s *pinned.Store) Table {
	return Table{Rows: s.Rows, RowBytes: s.RowBytes, NumRows: s.NumRows}
}

// CPUBackend is the CPU gather bound to one table. Safe for concurrent use.
type CPUBackend struct {
	CPU CPU
	T   Table
}

// NewCPUBackend binds t to a CPU gather with the given workers (0: GOMAXPROCS).
func NewCPUBackend(t Table, workers int) *CPUBackend {
	return &CPUBackend{CPU: CPU{Workers: workers}, T: t}
}

// Gather implements Backend with (*CPU).Gather into dst.Host.
func (b *CPUBackend) Gather(ctx context.Context, dst Dest, nid []int64, order []int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dst.Host == nil && len(nid) > 0 {
		return fmt.Errorf("gather: the CPU backend needs a host destination")
	}
	return b.CPU.Gather(dst.Host, b.T, nid, order)
}

// Table is the bound table.
func (b *CPUBackend) Table() Table { return b.T }

// Close does nothing.
func (b *CPUBackend) Close() error { return nil }
