package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/internal/bench/ringbench"
	"github.com/gnnloader/gnnloader/ring"
)

func init() {
	registerBench("ring", "the GPU ring all-reduce: time, algbw and busbw from 1 KiB to 1 GiB (nccl-tests' columns)", benchRing)
}

func benchRing(ctx context.Context, e *env, args []string) error {
	var (
		gpus             int
		minB, maxB       int64
		dtype, op        string
		reps, piece, blk int
		host             bool
	)
	fs := benchFlags(e, "ring", "loaderd bench ring --gpus 2\n(NCCL beside it: scripts/ring-bench.sh)", func(fs *flag.FlagSet) {
		fs.IntVar(&gpus, "gpus", 0, "GPUs in the ring (0: all)")
		fs.Int64Var(&minB, "min-bytes", 1<<10, "smallest bucket")
		fs.Int64Var(&maxB, "max-bytes", 1<<30, "largest bucket")
		fs.StringVar(&dtype, "dtype", "float32", "float32, bfloat16 or float16")
		fs.StringVar(&op, "op", "sum", "sum or avg")
		fs.IntVar(&reps, "reps", 9, "timed repetitions per size (median)")
		fs.IntVar(&piece, "piece-bytes", 0, "largest piece per block and step (0: default)")
		fs.IntVar(&blk, "blocks", 0, "blocks per rank (0: the SM count)")
		fs.BoolVar(&host, "host-links", false, "send every link through pinned host memory")
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	dt, err := ring.ParseDType(dtype)
	if err != nil {
		return usageError{err.Error()}
	}
	o, err := ring.ParseOp(op)
	if err != nil {
		return usageError{err.Error()}
	}
	n, err := cudaext.DeviceCount()
	if err != nil {
		return err
	}
	if gpus <= 0 || gpus > n {
		gpus = n
	}
	var ctxs []*cudaext.Context
	for i := 0; i < gpus; i++ {
		d, err := cudaext.GetDevice(i)
		if err != nil {
			return err
		}
		c, err := d.RetainPrimaryContext()
		if err != nil {
			return err
		}
		defer c.Release()
		ctxs = append(ctxs, c)
	}
	fmt.Fprintf(e.stdout, "# %d GPUs\n", gpus)
	_, err = ringbench.Run(e.stdout, ctxs, ringbench.Config{MinBytes: minB, MaxBytes: maxB, DType: dt, Op: o, Reps: reps,
		Options: ring.GPUOptions{PieceBytes: piece, MaxBlocks: blk, HostLinks: host}})
	return err
}
