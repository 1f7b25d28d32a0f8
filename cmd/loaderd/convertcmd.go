package main

// loaderd convert: a dataset written again with its float node features in
// another type, the rest as it was.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/pinned"
)

func init() {
	register(&command{
		name:    "convert",
		summary: "write a dataset again with its float node features as another float type (float16 halves them in memory and over PCIe)",
		usage:   "DIR --dtype TYPE --out DIR",
		example: "loaderd convert /data/papers100M --dtype float16 --out /data/papers100M-f16\nloaderd convert /data/papers100M --dtype float16 --out /data/papers100M --overwrite   # in place",
		run:     runConvert,
	})
}

func runConvert(ctx context.Context, e *env, args []string) error {
	c := commands["convert"]
	var (
		out, dtype string
		overwrite  bool
		workers    int
	)
	fs := c.flags(e.stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&dtype, "dtype", "", "the node features' new type: float16, bfloat16, float32 or float64 (rounded to nearest; a value past float16's range is an error, and nothing is written)")
		fs.StringVar(&out, "out", "", "output dataset directory (must not exist, or --overwrite)")
		fs.BoolVar(&overwrite, "overwrite", false, "replace the dataset at --out, which may be the input itself (only a gnnloader dataset directory, replaced in one rename once the new one is whole)")
		fs.IntVar(&workers, "workers", 0, "reading, checking and converting goroutines (0 = all cores)")
	})
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || out == "" || dtype == "" {
		return usageError{"want a dataset directory, --dtype and --out"}
	}
	to, err := datasets.ParseDType(dtype)
	if err != nil || !to.IsFloat() {
		return usageError{fmt.Sprintf("--dtype %q: want float16, bfloat16, float32 or float64", dtype)}
	}
	if sameDir(pos[0], out) && !overwrite {
		return usageError{"--out is the input dataset: add --overwrite to convert it in place"}
	}
	// What is at --out is checked before the dataset is read (minutes, and
	// its size in memory, for a large one), and again by the write.
	if err := datasets.CheckWritable(out, overwrite); err != nil {
		return err
	}
	p := newProgress(e.log, 5*time.Second)
	defer p.Finish()
	start := time.Now()
	// The features in memory of the command's own, writable (an opened
	// dataset's is read-only), so that a conversion to a type no wider
	// writes over them (ConvertFeaturesInPlace).
	var mem featureMemory
	defer mem.freeAll()
	ds, err := datasets.Open(pos[0], &datasets.OpenOptions{AllowHetero: true, Workers: workers, Progress: p,
		AllocFeatures: mem.alloc, FreeFeatures: mem.free})
	if err != nil {
		return err
	}
	defer ds.Close()
	wopts := &datasets.WriteOptions{Overwrite: overwrite, Progress: p}
	if h := ds.Hetero; h != nil {
		n, err := heteroFeatureTypes(h, to)
		if err != nil {
			return fmt.Errorf("dataset %s: %w", pos[0], err)
		}
		if err := h.ConvertFeaturesInPlace(to, workers); err != nil {
			return fmt.Errorf("dataset %s: %w", pos[0], err)
		}
		if err := datasets.WriteHetero(ctx, out, h, wopts); err != nil {
			return err
		}
		p.Finish()
		fmt.Fprintf(e.stdout, "wrote %s: the features of %d node types as %s, the rest as in %s (%s)\n", out, n, to, pos[0],
			time.Since(start).Round(time.Millisecond))
		return nil
	}
	from := ds.FeatureDType
	switch {
	case ds.FeatureDim == 0:
		return fmt.Errorf("dataset %s has no node features to convert", pos[0])
	case from == to:
		return fmt.Errorf("dataset %s: its node features are %s already; nothing written", pos[0], to)
	}
	// In place where the new type is no wider: the table is not held
	// twice (papers100M's float32 and float16 tables: 85 GB).
	if err := ds.ConvertFeaturesInPlace(to, workers); err != nil {
		return fmt.Errorf("dataset %s: %w", pos[0], err)
	}
	if err := datasets.WriteContext(ctx, out, &ds.Data, wopts); err != nil {
		return err
	}
	p.Finish()
	fmt.Fprintf(e.stdout, "wrote %s: %d x %s features (were %s: %.1f MB, now %.1f MB), the rest as in %s (%s)\n",
		out, ds.FeatureDim, to, from, float64(len(ds.Features))*float64(from.Size())/float64(to.Size())/1e6, float64(len(ds.Features))/1e6,
		pos[0], time.Since(start).Round(time.Millisecond))
	return nil
}

// heteroFeatureTypes is how many of h's node types have features that a
// conversion to `to` changes: an error when none does (no features, or all
// of type `to` already), so that nothing is written for nothing.
func heteroFeatureTypes(h *datasets.Hetero, to datasets.DType) (int, error) {
	n, any := 0, false
	for _, t := range h.NodeTypes {
		if t.FeatureDim == 0 {
			continue
		}
		any = true
		if t.FeatureDType != to {
			n++
		}
	}
	if !any {
		return 0, errors.New("no node type has features to convert")
	}
	if n == 0 {
		return 0, fmt.Errorf("every node type's features are %s already; nothing written", to)
	}
	return n, nil
}

// sameDir reports whether a and b name one existing directory (through
// links, relative paths or another mount of it).
func sameDir(a, b string) bool {
	x, errA := os.Stat(a)
	y, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(x, y)
}

// featureMemory is writable memory for a dataset's features
// (OpenOptions.AllocFeatures): pinned.Alloc's, which refuses a size the
// machine cannot map with an error where the Go heap would end the process
// (a feature file grown sparse to terabytes: TestConvertHostileInput). Open
// may ask for several at once (a heterogeneous dataset's node types).
type featureMemory struct {
	mu   sync.Mutex
	held [][]byte
}

func (m *featureMemory) alloc(n int64) ([]byte, error) {
	b, err := pinned.Alloc(n)
	if err == nil {
		m.mu.Lock()
		m.held = append(m.held, b)
		m.mu.Unlock()
	}
	return b, err
}

// free gives back one allocation (Open, when it fails after alloc).
func (m *featureMemory) free(b []byte) error {
	m.mu.Lock()
	m.held = slices.DeleteFunc(m.held, func(h []byte) bool { return len(h) > 0 && len(b) > 0 && &h[0] == &b[0] })
	m.mu.Unlock()
	return pinned.Free(b)
}

// freeAll gives back every allocation still held (the features are not
// used afterwards).
func (m *featureMemory) freeAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.held {
		_ = pinned.Free(b)
	}
	m.held = nil
}
