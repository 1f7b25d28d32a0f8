package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/internal/bench/gatherbench"
)

func init() {
	registerBench("gather", "the GPU gather against pinned memcpy, the CPU gather and a naive kernel (docs/gpu.md)", benchGather)
}

func benchGather(ctx context.Context, e *env, args []string) error {
	var (
		rows     int64
		rowBytes int
		device   int
		caps     string
		cfg      gatherbench.Config
	)
	example := "loaderd bench gather                      # 16M x 512 B table, 600K-row batches, 3-batch sweeps\n" +
		"loaderd bench gather --rows 111059956 --batch-rows 700000   # papers100M-sized (57 GB of host memory)"
	fs := benchFlags(e, "gather", example, func(fs *flag.FlagSet) {
		fs.Int64Var(&rows, "rows", 16<<20, "rows of the feature table")
		fs.IntVar(&rowBytes, "row-bytes", 512, "bytes a row (512 = 128 x float32)")
		fs.IntVar(&cfg.BatchRows, "batch-rows", 600_000, "distinct rows one sampled batch gathers")
		fs.IntVar(&cfg.SweepBatches, "sweep", 3, "batches one sorted sweep covers (0 = no sweep)")
		fs.IntVar(&cfg.Reps, "reps", 7, "timed repetitions (the median is reported)")
		fs.StringVar(&caps, "sms", "-1", "comma-separated SM caps to run besides the default (-1 = every SM)")
		fs.BoolVar(&cfg.Variants, "variants", false, "also run the any-size kernel variants")
		fs.IntVar(&cfg.CPUWorkers, "cpu-workers", 0, "goroutines of the CPU gather baseline (0 = all cores)")
		fs.Uint64Var(&cfg.Seed, "seed", 42, "seed of the sampled batches")
		fs.IntVar(&device, "device", 0, "GPU ordinal")
	})
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", pos[0])}
	}
	if rows <= 0 || rowBytes <= 0 || cfg.BatchRows <= 0 || int64(cfg.BatchRows) > rows || cfg.SweepBatches < 0 || cfg.SweepBatches > gather.MaxSweepParts {
		return usageError{fmt.Sprintf("need rows > 0, row-bytes > 0, 0 < batch-rows <= rows and 0 <= sweep <= %d", gather.MaxSweepParts)}
	}
	if cfg.Caps, err = parseSignedInts(caps); err != nil {
		return usageError{"--sms: " + err.Error()}
	}
	d, err := cudaext.GetDevice(device)
	if err != nil {
		return fmt.Errorf("no GPU: %w", err)
	}
	cc, err := d.RetainPrimaryContext()
	if err != nil {
		return err
	}
	defer cc.Release()
	name, _ := d.Name()
	sms, _ := d.Attribute(cudaext.AttrMultiprocessorCount) // under MPS: the share this client gets
	st, err := gatherbench.FillTable(cc, rows, rowBytes)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintf(e.stdout, "gather benchmark on cuda:%d (%s, %d SMs visible, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%q): table %d x %d B = %.1f GB (fill %.1f s, cuMemHostRegister %.2f s), batches of %d rows, sweeps of %d\n",
		device, name, sms, os.Getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), rows, rowBytes, float64(len(st.Rows))/1e9, st.LoadTime.Seconds(), st.RegisterTime.Seconds(), cfg.BatchRows, cfg.SweepBatches)
	_, err = gatherbench.Run(ctx, cc, st, cfg, e.stdout)
	return err
}

func parseSignedInts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}
