package datasets

// Import throughput benchmarks (OGB CSV and NPZ layouts, PyG npz) over
// generated inputs.

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// impCPU is the process's user+system CPU time.
func impCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// impBenchLoop runs fn b.N times and reports, besides b.SetBytes's MB/s,
// MB per CPU-second (steadier than wall time on a shared machine) and
// the CPU cores kept busy.
func impBenchLoop(b *testing.B, bytes int64, fn func() error) {
	b.SetBytes(bytes)
	b.ResetTimer()
	cpu0 := impCPU()
	for b.Loop() {
		if err := fn(); err != nil {
			b.Fatal(err)
		}
	}
	cpu := (impCPU() - cpu0).Seconds()
	b.ReportMetric(float64(bytes)*float64(b.N)/cpu/1e6, "MB/cpu-s")
	b.ReportMetric(cpu/b.Elapsed().Seconds(), "cores")
}

// impGenOGB writes an OGB-shaped dataset of n nodes, deg out-edges each and
// dim features in the chosen layout and returns the bytes of the raw files.
func impGenOGB(b *testing.B, dir string, layout string, n, deg, dim int) int64 {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	os.MkdirAll(filepath.Join(dir, "raw"), 0o755)
	os.MkdirAll(filepath.Join(dir, "split", "s"), 0o755)
	var src, dst, feat = make([]int64, 0, n*deg), make([]int64, 0, n*deg), make([]float64, 0, n*dim)
	for v := 0; v < n; v++ {
		for k := 0; k < deg; k++ {
			src = append(src, int64(v))
			dst = append(dst, rng.Int64N(int64(n)))
		}
		for k := 0; k < dim; k++ {
			feat = append(feat, float64(float32(rng.NormFloat64())))
		}
	}
	labels := make([]int64, n)
	for v := range labels {
		labels[v] = rng.Int64N(40)
	}
	for i, s := range SplitNames {
		var sb strings.Builder
		for v := i; v < n; v += 3 {
			fmt.Fprintf(&sb, "%d\n", v)
		}
		impWriteGz(b, filepath.Join(dir, "split", "s", s+".csv.gz"), sb.String())
	}
	if layout == "npz" {
		var lab []float64
		for _, y := range labels {
			lab = append(lab, float64(y))
		}
		impWriteNPZ(b, filepath.Join(dir, "raw", "data.npz"), false,
			impMember{"edge_index", impNPY("<i8", []int64{2, int64(len(src))}, impI64(append(src, dst...)...))},
			impMember{"node_feat", impNPY("<f4", []int64{int64(n), int64(dim)}, impF32(feat...))})
		impWriteNPZ(b, filepath.Join(dir, "raw", "node-label.npz"), false,
			impMember{"node_label", impNPY("<f8", []int64{int64(n), 1}, impF64(lab...))})
	} else {
		var sb strings.Builder
		for i := range src {
			fmt.Fprintf(&sb, "%d,%d\n", src[i], dst[i])
		}
		impWriteGz(b, filepath.Join(dir, "raw", "edge.csv.gz"), sb.String())
		sb.Reset()
		for v := 0; v < n; v++ {
			for k := 0; k < dim; k++ {
				if k > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(strconv.FormatFloat(feat[v*dim+k], 'f', 6, 32))
			}
			sb.WriteByte('\n')
		}
		impWriteGz(b, filepath.Join(dir, "raw", "node-feat.csv.gz"), sb.String())
		sb.Reset()
		for _, y := range labels {
			fmt.Fprintf(&sb, "%d\n", y)
		}
		impWriteGz(b, filepath.Join(dir, "raw", "node-label.csv.gz"), sb.String())
		impWriteGz(b, filepath.Join(dir, "raw", "num-node-list.csv.gz"), fmt.Sprintf("%d\n", n))
		impWriteGz(b, filepath.Join(dir, "raw", "num-edge-list.csv.gz"), fmt.Sprintf("%d\n", len(src)))
	}
	var total int64
	filepath.WalkDir(filepath.Join(dir, "raw"), func(p string, de fs.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			if fi, err := de.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total
}

// BenchmarkImportOGBCSV imports a generated csv.gz OGB dataset (100 K nodes,
// 10 edges each, 100 features: about 60 MB of text, 25 MB gzipped). MB/s
// counts the compressed input; text-MB/s the inflated text.
func BenchmarkImportOGBCSV(b *testing.B) {
	dir := b.TempDir()
	size := impGenOGB(b, dir, "csv", 100_000, 10, 100)
	var text int64
	for _, f := range []string{"edge.csv.gz", "node-feat.csv.gz", "node-label.csv.gz"} {
		text += int64(len(impReadGz(b, filepath.Join(dir, "raw", f))))
	}
	impBenchLoop(b, size, func() error { _, err := ImportOGB(dir, ImportOptions{}); return err })
	b.ReportMetric(float64(text)*float64(b.N)/b.Elapsed().Seconds()/1e6, "text-MB/s")
}

// BenchmarkImportOGBNPZ imports a generated npz-layout dataset (200 K
// nodes, 10 edges each, 64 float32 features: about 83 MB).
func BenchmarkImportOGBNPZ(b *testing.B) {
	dir := b.TempDir()
	size := impGenOGB(b, dir, "npz", 200_000, 10, 64)
	impBenchLoop(b, size, func() error { _, err := ImportOGB(dir, ImportOptions{}); return err })
}

// BenchmarkImportNPZ imports a generated gnn-benchmark .npz (200 K nodes, 10
// edges each, 200 sparse features with 20 nonzeros per node): about 40 MB.
func BenchmarkImportNPZ(b *testing.B) {
	const n, deg, dim, nnz = 200_000, 10, 200, 20
	rng := rand.New(rand.NewPCG(3, 4))
	var indptr, idx, aptr, aidx []int64
	var adata []float64
	indptr, aptr = append(indptr, 0), append(aptr, 0)
	labels := make([]byte, n)
	for v := 0; v < n; v++ {
		for k := 0; k < deg; k++ {
			idx = append(idx, rng.Int64N(n))
		}
		for k := 0; k < nnz; k++ {
			aidx = append(aidx, int64(k*dim/nnz)+rng.Int64N(dim/nnz))
			adata = append(adata, 1)
		}
		indptr, aptr = append(indptr, int64(len(idx))), append(aptr, int64(len(aidx)))
		labels[v] = byte(rng.IntN(7))
	}
	path := filepath.Join(b.TempDir(), "gen.npz")
	impWriteNPZ(b, path, false,
		impMember{"adj_data", impNPY("<f4", []int64{int64(len(idx))}, impF32(make([]float64, len(idx))...))},
		impMember{"adj_indices", impNPY("<i4", []int64{int64(len(idx))}, impI32(idx...))},
		impMember{"adj_indptr", impNPY("<i4", []int64{n + 1}, impI32(indptr...))},
		impMember{"adj_shape", impNPY("<i8", []int64{2}, impI64(n, n))},
		impMember{"attr_data", impNPY("<f4", []int64{int64(len(aidx))}, impF32(adata...))},
		impMember{"attr_indices", impNPY("<i4", []int64{int64(len(aidx))}, impI32(aidx...))},
		impMember{"attr_indptr", impNPY("<i4", []int64{n + 1}, impI32(aptr...))},
		impMember{"attr_shape", impNPY("<i8", []int64{2}, impI64(n, dim))},
		impMember{"labels", impNPY("|i1", []int64{n}, labels)})
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	impBenchLoop(b, fi.Size(), func() error { _, err := ImportNPZ(path, ImportOptions{}); return err })
}
