package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gnnloader/gnnloader/datasets"
)

func init() {
	register(&command{
		name:    "gen",
		summary: "write a synthetic dataset shaped like papers100M, products, arxiv, citation2 (with link splits), cora or mag (heterogeneous)",
		usage:   "--like NAME [--scale S] [--seed K] --out DIR",
		example: "loaderd gen --like products --scale 0.01 --seed 1 --out /tmp/products-1pct",
		run:     runGen,
	})
	register(&command{
		name:    "import",
		summary: "import a gnn-benchmark .npz file or an OGB node- or link-property dataset directory",
		usage:   "npz FILE --out DIR | ogb DIR --out DIR",
		example: "loaderd import npz testdata/cora.npz --out /tmp/cora\nloaderd import ogb ~/ogbn_arxiv --undirected --out /tmp/arxiv",
		run:     runImport,
	})
	register(&command{
		name:    "verify",
		summary: "check a dataset's files against the sizes and checksums of its manifest",
		usage:   "DIR",
		example: "loaderd verify /tmp/cora",
		run:     runVerify,
	})
}

func runGen(ctx context.Context, e *env, args []string) error {
	c := commands["gen"]
	var (
		opts       datasets.GenOptions
		out, dtype string
		edgeDType  string
		undirected string
		overwrite  bool
	)
	fs := c.flags(e.stderr, func(fs *flag.FlagSet) {
		var names []string
		for _, p := range datasets.Presets() {
			names = append(names, p.Name)
		}
		names = append(names, "mag (heterogeneous)")
		fs.StringVar(&opts.Like, "like", "", "dataset to imitate: "+strings.Join(names, ", "))
		fs.Float64Var(&opts.Scale, "scale", 1, "multiplies node, edge and split counts")
		fs.Uint64Var(&opts.Seed, "seed", 0, "random seed: the same seed gives the same bytes")
		fs.StringVar(&dtype, "dtype", "float32", "feature type: float32, float16, bfloat16, float64, int64, int32, uint8 or bool")
		fs.IntVar(&opts.EdgeDim, "edge-dim", 0, "edge attributes per edge (edge_attr); 0 = none")
		fs.StringVar(&edgeDType, "edge-dtype", "float32", "edge_attr type (the types of --dtype)")
		fs.BoolVar(&opts.EdgeWeights, "edge-weights", false, "add edge_weight (float32, higher between nodes of one class)")
		fs.BoolVar(&opts.Time, "time", false, "add node_time and edge_time (int64)")
		fs.StringVar(&undirected, "undirected", "", "true or false: symmetrise the graph (default: the imitated dataset's)")
		fs.IntVar(&opts.Workers, "workers", 0, "goroutines (0 = all cores)")
		fs.StringVar(&out, "out", "", "output dataset directory (must not exist)")
		fs.BoolVar(&overwrite, "overwrite", false, "replace the dataset at --out (only a gnnloader dataset directory: anything else there is refused and left alone)")
	})
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", pos[0])}
	}
	if opts.Like == "" || out == "" {
		return usageError{"--like and --out are required"}
	}
	if opts.FeatureDType, err = datasets.ParseDType(dtype); err != nil {
		return usageError{err.Error()}
	}
	if opts.EdgeDim > 0 {
		if opts.EdgeDType, err = datasets.ParseDType(edgeDType); err != nil {
			return usageError{"--edge-dtype: " + err.Error()}
		}
	}
	switch undirected {
	case "":
	case "true", "false":
		u := undirected == "true"
		opts.Undirected = &u
	default:
		return usageError{fmt.Sprintf("--undirected must be true or false, not %q", undirected)}
	}
	if err := datasets.CheckWritable(out, overwrite); err != nil { // before the work, and again by the write
		return err
	}
	p := newProgress(e.log, 5*time.Second)
	defer p.Finish()
	opts.Progress = p
	start := time.Now()
	if datasets.IsHeteroPreset(opts.Like) {
		return genHetero(ctx, e, opts, out, overwrite, p)
	}
	d, err := datasets.Generate(opts)
	if err != nil {
		return err
	}
	genTime := time.Since(start)
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := datasets.WriteContext(ctx, out, d, &datasets.WriteOptions{Overwrite: overwrite, Progress: p}); err != nil {
		return err
	}
	p.Finish()
	fmt.Fprintf(e.stdout, "wrote %s: %d nodes, %d edges, %d x %s features, %d classes%s (generated in %s, total %s)\n",
		out, d.Graph.NumNodes, d.Graph.NumEdges(), d.FeatureDim, d.FeatureDType, d.NumClasses, linkSummary(d),
		genTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return nil
}

func runImport(ctx context.Context, e *env, args []string) error {
	c := commands["import"]
	var (
		opts      datasets.ImportOptions
		out       string
		ratios    string
		direction string
		reduce    string
		overwrite bool
		dtype     string
	)
	fs := c.flags(e.stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&out, "out", "", "output dataset directory (must not exist)")
		fs.StringVar(&opts.Name, "name", "", "dataset name (default: from the input's name)")
		fs.StringVar(&dtype, "dtype", "", "store float node features as this type: float16, bfloat16, float32 or float64 (default: as read); float16 halves the table in memory and the bytes a GPU reads over PCIe")
		fs.StringVar(&ratios, "split", "0.6,0.2,0.2", "train,valid,test ratios of the stratified split (npz only)")
		fs.Uint64Var(&opts.SplitSeed, "split-seed", 0, "seed of the stratified split")
		fs.BoolVar(&opts.Undirected, "undirected", false, "add reverse edges, drop duplicates and self loops")
		fs.StringVar(&reduce, "undirected-reduce", "", "with --undirected, how the copies of an edge merge their edge_attr and edge_weight: first (the default: the first copy's) or sum (PyG's ToUndirected)")
		fs.StringVar(&direction, "edge-direction", "", "in (the default for node datasets): input row i (edge i,j) lists node i's incoming neighbours (j -> i), as before; out (the default and only choice for OGB link datasets): edge i,j is i -> j, PyG's reading (the dataset stores the transpose)")
		fs.BoolVar(&opts.EdgeWeights, "edge-weights", false, "npz: keep adj_data as edge_weight (OGB edge files are always kept)")
		fs.StringVar(&opts.OGBSplit, "ogb-split", "", "OGB split scheme under split/ (default: the only one)")
		fs.IntVar(&opts.Workers, "workers", 0, "parsing goroutines (0 = all cores)")
		fs.BoolVar(&overwrite, "overwrite", false, "replace the dataset at --out (only a gnnloader dataset directory: anything else there is refused and left alone)")
	})
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || out == "" {
		return usageError{"want a format (npz or ogb), an input path and --out"}
	}
	if opts.SplitRatios, err = parseRatios(ratios); err != nil {
		return usageError{err.Error()}
	}
	if reduce != "" {
		if !opts.Undirected {
			return usageError{"--undirected-reduce needs --undirected"}
		}
		if opts.UndirectedReduce, err = datasets.ParseEdgeReduce(reduce); err != nil {
			return usageError{"--undirected-reduce: " + err.Error()}
		}
	}
	if direction != "" {
		if opts.EdgeDirection, err = datasets.ParseEdgeDirection(direction); err != nil {
			return usageError{"--edge-direction: " + err.Error()}
		}
	}
	var to datasets.DType
	if dtype != "" {
		if to, err = datasets.ParseDType(dtype); err != nil || !to.IsFloat() {
			return usageError{fmt.Sprintf("--dtype %q: want float16, bfloat16, float32 or float64", dtype)}
		}
	}
	if err := datasets.CheckWritable(out, overwrite); err != nil { // before the import, and again by the write
		return err
	}
	p := newProgress(e.log, 5*time.Second)
	defer p.Finish()
	opts.Progress = p
	start := time.Now()
	var d *datasets.Data
	switch pos[0] {
	case "npz":
		d, err = datasets.ImportNPZ(pos[1], opts)
	case "ogb":
		if datasets.IsOGBHetero(pos[1]) {
			h, err := datasets.ImportOGBHetero(pos[1], opts)
			if err != nil {
				return err
			}
			if err := h.ConvertFeaturesInPlace(to, opts.Workers); err != nil { // the imported table is not needed as it was
				return err
			}
			if err := datasets.WriteHetero(ctx, out, h, &datasets.WriteOptions{Overwrite: overwrite, Progress: p}); err != nil {
				return err
			}
			p.Finish()
			fmt.Fprintf(e.stdout, "wrote %s: %d node types, %d edge types (heterogeneous, %s)\n", out, len(h.NodeTypes), len(h.Relations),
				time.Since(start).Round(time.Millisecond))
			return nil
		}
		d, err = datasets.ImportOGB(pos[1], opts)
	default:
		return usageError{fmt.Sprintf("unknown format %q (want npz or ogb)", pos[0])}
	}
	if err != nil {
		return err
	}
	if err := d.ConvertFeaturesInPlace(to, opts.Workers); err != nil { // the imported table is not needed as it was
		return err
	}
	if err := datasets.WriteContext(ctx, out, d, &datasets.WriteOptions{Overwrite: overwrite, Progress: p}); err != nil {
		return err
	}
	p.Finish()
	fmt.Fprintf(e.stdout, "wrote %s: %d nodes, %d edges, %d x %s features, %d classes, split %d/%d/%d%s (%s)\n",
		out, d.Graph.NumNodes, d.Graph.NumEdges(), d.FeatureDim, d.FeatureDType, d.NumClasses,
		len(d.Splits[datasets.SplitTrain]), len(d.Splits[datasets.SplitValid]), len(d.Splits[datasets.SplitTest]), linkSummary(d),
		time.Since(start).Round(time.Millisecond))
	return nil
}

func parseRatios(s string) ([3]float64, error) {
	var r [3]float64
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return r, fmt.Errorf("--split wants three ratios like 0.6,0.2,0.2, got %q", s)
	}
	sum := 0.0
	for i, p := range parts {
		if _, err := fmt.Sscanf(strings.TrimSpace(p), "%g", &r[i]); err != nil || r[i] < 0 {
			return r, fmt.Errorf("--split: bad ratio %q", p)
		}
		sum += r[i]
	}
	if sum <= 0 || sum > 1+1e-9 {
		return r, fmt.Errorf("--split: ratios sum to %g, want (0, 1]", sum)
	}
	return r, nil
}

func runVerify(ctx context.Context, e *env, args []string) error {
	c := commands["verify"]
	var workers int
	fs := c.flags(e.stderr, func(fs *flag.FlagSet) {
		fs.IntVar(&workers, "workers", 0, "hashing goroutines (0 = all cores)")
	})
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{"want one dataset directory"}
	}
	p := newProgress(e.log, 5*time.Second)
	defer p.Finish()
	start := time.Now()
	m, err := datasets.Verify(pos[0], workers, p)
	if err != nil {
		return err
	}
	p.Finish()
	for _, w := range m.Warnings {
		e.log.Warn(w)
	}
	var bytes int64
	for _, f := range m.Files {
		bytes += f.Bytes
	}
	el := time.Since(start)
	printManifest(e.stdout, m)
	fmt.Fprintf(e.stdout, "ok: %d files, %.1f MB verified in %s (%.2f GB/s)\n", len(m.Files), float64(bytes)/1e6,
		el.Round(time.Millisecond), float64(bytes)/el.Seconds()/1e9)
	return nil
}

// genHetero is gen for a heterogeneous preset (mag).
func genHetero(ctx context.Context, e *env, opts datasets.GenOptions, out string, overwrite bool, p progress) error {
	start := time.Now()
	h, err := datasets.GenerateHetero(opts)
	if err != nil {
		return err
	}
	genTime := time.Since(start)
	if err := datasets.WriteHetero(ctx, out, h, &datasets.WriteOptions{Overwrite: overwrite, Progress: p}); err != nil {
		return err
	}
	p.Finish()
	var parts []string
	for _, t := range h.NodeTypes {
		parts = append(parts, fmt.Sprintf("%d %s", t.NumNodes, t.Name))
	}
	for _, r := range h.Relations {
		parts = append(parts, fmt.Sprintf("%d %s", r.Graph.NumEdges(), r.Rel))
	}
	fmt.Fprintf(e.stdout, "wrote %s: %s (generated in %s, total %s)\n", out, strings.Join(parts, ", "),
		genTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return nil
}

func printManifest(w io.Writer, m *datasets.Manifest) {
	if m.FormatVersion == datasets.FormatVersionHetero {
		fmt.Fprintf(w, "dataset %s (heterogeneous): %d nodes, %d edges\n", m.Name, m.NumNodes, m.NumEdges)
		for _, t := range m.NodeTypes {
			fmt.Fprintf(w, "  node type %s: %d nodes, %d x %s features, %d classes, splits %v\n", t.Name, t.NumNodes, t.FeatureDim, t.FeatureDType, t.NumClasses, t.Splits)
		}
		for _, r := range m.EdgeTypes {
			fmt.Fprintf(w, "  edge type (%s, %s, %s): %d edges\n", r.Src, r.Rel, r.Dst, r.NumEdges)
		}
		return
	}
	fmt.Fprintf(w, "dataset %s: %d nodes, %d edges (%s), %d x %s features, %d classes\n",
		m.Name, m.NumNodes, m.NumEdges, map[bool]string{true: "directed", false: "undirected"}[m.Directed],
		m.FeatureDim, m.FeatureDType, m.NumClasses)
	for _, s := range datasets.SplitNames {
		if n, ok := m.Splits[s]; ok {
			fmt.Fprintf(w, "  split %-5s %d nodes\n", s, n)
		}
	}
	for _, s := range datasets.SplitNames {
		if l, ok := m.LinkSplits[s]; ok {
			fmt.Fprintf(w, "  link split %-5s %d edges, %d negatives each\n", s, l.NumEdges, l.NumNeg)
		}
	}
	if m.EdgeDim > 0 {
		fmt.Fprintf(w, "  edge_attr %d x %s\n", m.EdgeDim, m.EdgeDType)
	}
	for _, f := range m.Files {
		switch f.Role {
		case "edge_weight", "edge_time", "node_time":
			fmt.Fprintf(w, "  %s\n", f.Role)
		}
	}
}

// linkSummary describes d's link splits, or is empty.
func linkSummary(d *datasets.Data) string {
	if len(d.LinkSplits) == 0 {
		return ""
	}
	var parts []string
	for _, s := range datasets.SplitNames {
		if l, ok := d.LinkSplits[s]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", s, l.Len()))
		}
	}
	return ", link splits " + strings.Join(parts, "/")
}
