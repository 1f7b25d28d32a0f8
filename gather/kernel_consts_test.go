package gather

// The constants the kernels and this package must agree on.

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestKernelConstants reads the #defines of the kernel sources and checks
// them against the Go constants that launch and decode for them: a kernel
// that packs deliveries with another PART_SHIFT, or walks more parts than
// a launch passes, would deliver rows to the wrong batch without an error.
func TestKernelConstants(t *testing.T) {
	want := map[string]map[string]int{
		"gather.cu": {"MAX_PARTS": MaxSweepParts, "PART_SHIFT": partShift},
		"plan.cu": {"MAX_PARTS": MaxSweepParts, "PART_SHIFT": partShift, "WORDS_PER_BLOCK": wordsPerBlock,
			"SCAN_THREADS": scanThreads, "SHARED_ROW": sharedRow},
	}
	def := regexp.MustCompile(`(?m)^#define ([A-Z_]+) (0x[0-9a-fA-F]+|[0-9]+)u?\b`)
	for file, consts := range want {
		src, err := os.ReadFile("../cudaext/kernels/" + file)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, m := range def.FindAllStringSubmatch(string(src), -1) {
			v, err := strconv.ParseInt(m[2], 0, 64)
			if err != nil {
				t.Fatalf("%s: #define %s %s: %v", file, m[1], m[2], err)
			}
			got[m[1]] = int(v)
		}
		for name, w := range consts {
			if g, ok := got[name]; !ok {
				t.Errorf("%s defines no %s", file, name)
			} else if g != w {
				t.Errorf("%s: %s is %d, the Go side uses %d", file, name, g, w)
			}
		}
	}
}
