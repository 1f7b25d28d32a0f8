package cudaext

import (
	"bufio"
	"crypto/sha256"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// The kernels (gather.fatbin, ring.fatbin), built by scripts/build-kernels.sh
// (nvcc, on a GPU machine) and committed each with the hash of its sources.
//
//go:embed kernels/*.fatbin kernels/*.fatbin.sha256
var kernelFS embed.FS

// Kernels are the kernel files: kernels/NAME.cu builds NAME.fatbin, stamped in
// NAME.fatbin.sha256.
var Kernels = []string{"gather", "ring", "plan", "sample"}

// RingKernelsEnv names a fatbin file that RingImage loads in place of the
// embedded one.
const RingKernelsEnv = "GNNLOADER_RING_KERNELS"

// RingImage is the fatbin of cudaext/kernels/ring.cu (the ring all-reduce),
// or the file named by $GNNLOADER_RING_KERNELS.
func RingImage() ([]byte, error) {
	if p := os.Getenv(RingKernelsEnv); p != "" {
		return os.ReadFile(p)
	}
	b, err := kernelFS.ReadFile("kernels/ring.fatbin")
	if err == nil && len(b) == 0 {
		err = fmt.Errorf("cudaext: the embedded ring.fatbin is empty: run scripts/build-kernels.sh")
	}
	if err != nil {
		return nil, fmt.Errorf("cudaext: no ring kernels (%v): build them with scripts/build-kernels.sh on a GPU machine, or set %s", err, RingKernelsEnv)
	}
	return b, nil
}

//go:embed kernels/*.cu kernels/nvcc.flags
var kernelSources embed.FS

// KernelsEnv names a fatbin file that GatherImage loads in place of the
// embedded one (for trying freshly built kernels before committing them).
const KernelsEnv = "GNNLOADER_KERNELS"

// PlanKernelsEnv names a fatbin file that PlanImage loads in place of the
// embedded one.
const PlanKernelsEnv = "GNNLOADER_PLAN_KERNELS"

// PlanImage is the fatbin of cudaext/kernels/plan.cu (sweeps planned on the
// GPU), or the file named by $GNNLOADER_PLAN_KERNELS.
func PlanImage() ([]byte, error) {
	if p := os.Getenv(PlanKernelsEnv); p != "" {
		return os.ReadFile(p)
	}
	b, err := kernelFS.ReadFile("kernels/plan.fatbin")
	if err == nil && len(b) == 0 {
		err = fmt.Errorf("cudaext: the embedded plan.fatbin is empty: run scripts/build-kernels.sh")
	}
	if err != nil {
		return nil, fmt.Errorf("cudaext: no plan kernels (%v): build them with scripts/build-kernels.sh on a GPU machine, or set %s", err, PlanKernelsEnv)
	}
	return b, nil
}

// SampleKernelsEnv names a fatbin file that SampleImage loads in place of
// the embedded one.
const SampleKernelsEnv = "GNNLOADER_SAMPLE_KERNELS"

// SampleImage is the fatbin of cudaext/kernels/sample.cu (neighbour
// sampling on the GPU), or the file named by $GNNLOADER_SAMPLE_KERNELS.
func SampleImage() ([]byte, error) {
	if p := os.Getenv(SampleKernelsEnv); p != "" {
		return os.ReadFile(p)
	}
	b, err := kernelFS.ReadFile("kernels/sample.fatbin")
	if err == nil && len(b) == 0 {
		err = fmt.Errorf("cudaext: the embedded sample.fatbin is empty: run scripts/build-kernels.sh")
	}
	if err != nil {
		return nil, fmt.Errorf("cudaext: no sampling kernels (%v): build them with scripts/build-kernels.sh on a GPU machine, or set %s", err, SampleKernelsEnv)
	}
	return b, nil
}

// GatherImage is the fatbin of cudaext/kernels/gather.cu (sm_80, sm_90 and
// compute_90 PTX), or the file named by $GNNLOADER_KERNELS.
func GatherImage() ([]byte, error) {
	if p := os.Getenv(KernelsEnv); p != "" {
		return os.ReadFile(p)
	}
	b, err := kernelFS.ReadFile("kernels/gather.fatbin")
	if err == nil && len(b) == 0 {
		err = fmt.Errorf("cudaext: the embedded gather.fatbin is empty: run scripts/build-kernels.sh")
	}
	return b, err
}

// KernelStamp is the stamp committed with the fatbin: the hash of its
// sources and of the fatbin itself.
type KernelStamp struct {
	Sources string // sha256 over the sources, as scripts/build-kernels.sh computes it
	Fatbin  string // sha256 of gather.fatbin
	NVCC    string // the compiler that built it
}

// ReadKernelStamp parses the embedded gather.fatbin.sha256.
func ReadKernelStamp() (KernelStamp, error) { return ReadKernelStampOf("gather") }

// ReadKernelStampOf parses the embedded NAME.fatbin.sha256.
func ReadKernelStampOf(name string) (KernelStamp, error) {
	var st KernelStamp
	f, err := kernelFS.Open("kernels/" + name + ".fatbin.sha256")
	if err != nil {
		return st, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		switch k {
		case "sources":
			st.Sources = v
		case "fatbin":
			st.Fatbin = v
		case "nvcc":
			st.NVCC = v
		}
	}
	return st, sc.Err()
}

// KernelSourcesHash computes the sources hash the way build-kernels.sh does:
// sha256 of the `sha256sum` listing of *.cu, *.cuh and nvcc.flags, in name order.
func KernelSourcesHash(fsys fs.FS) (string, error) {
	return sourcesHash(fsys, "*.cu")
}

// KernelSourcesHashOf is the sources hash of one kernel file: NAME.cu, *.cuh
// and nvcc.flags, as scripts/build-kernels.sh computes it for NAME.fatbin.
func KernelSourcesHashOf(fsys fs.FS, name string) (string, error) {
	return sourcesHash(fsys, name+".cu")
}

func sourcesHash(fsys fs.FS, cu string) (string, error) {
	var names []string
	for _, pat := range []string{cu, "*.cuh", "nvcc.flags"} {
		m, err := fs.Glob(fsys, pat)
		if err != nil {
			return "", err
		}
		names = append(names, m...)
	}
	sort.Strings(names)
	var list strings.Builder
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&list, "%x  %s\n", sha256.Sum256(b), n)
	}
	return fmt.Sprintf("%x", sha256.Sum256([]byte(list.String()))), nil
}

// CheckKernelStamp reports whether each embedded fatbin was built from the
// embedded sources (its stamp's sources hash matches NAME.cu, *.cuh and
// nvcc.flags) and is the file its stamp names. A kernel whose .cu file is
// there must have its fatbin and stamp.
func CheckKernelStamp() error {
	sub, err := fs.Sub(kernelSources, "kernels")
	if err != nil {
		return err
	}
	for _, name := range Kernels {
		if _, err := fs.Stat(sub, name+".cu"); err != nil {
			continue
		}
		st, err := ReadKernelStampOf(name)
		if err != nil {
			return fmt.Errorf("cudaext: %s.cu has no stamp (%v): build it with scripts/build-kernels.sh on a GPU machine", name, err)
		}
		h, err := KernelSourcesHashOf(sub, name)
		if err != nil {
			return err
		}
		if h != st.Sources {
			return fmt.Errorf("cudaext: %s kernel sources hash %s, stamp says %s: rebuild with scripts/build-kernels.sh on a GPU machine", name, h, st.Sources)
		}
		b, err := kernelFS.ReadFile("kernels/" + name + ".fatbin")
		if err != nil {
			return err
		}
		if fh := fmt.Sprintf("%x", sha256.Sum256(b)); fh != st.Fatbin {
			return fmt.Errorf("cudaext: %s.fatbin hash %s, stamp says %s", name, fh, st.Fatbin)
		}
	}
	return nil
}
