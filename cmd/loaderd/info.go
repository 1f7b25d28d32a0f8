package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/ring"
)

func init() {
	register(&command{
		name:    "info",
		summary: "print this host's GPUs (PCIe, memory, NVLink/peers, driver), huge-page mode and MPS",
		usage:   "[--json]",
		example: "loaderd info\nloaderd info --json",
		run:     runInfo,
	})
}

// hostInfo is what `loaderd info` prints: the GPUs and the host settings that
// matter to the gather.
type hostInfo struct {
	cudaext.SystemInfo
	// TransparentHugePages is the mode of /sys/kernel/mm/transparent_hugepage/enabled
	// (always, madvise or never; the pinned table asks for huge pages with madvise).
	TransparentHugePages string `json:"transparent_hugepages"`
	// MPS says whether an MPS control daemon runs (nvidia-cuda-mps-control)
	// and the pipe directory it was looked for in.
	MPS     bool   `json:"mps"`
	MPSPipe string `json:"mps_pipe_directory"`
	// Ring is the gradient ring over every GPU and the link each step uses
	// (ring.TopoRing: NVLink, peer over PCIe, or pinned host memory).
	Ring []ring.TopoLink `json:"ring,omitempty"`
}

func runInfo(ctx context.Context, e *env, args []string) error {
	c := commands["info"]
	var asJSON bool
	fs := c.flags(e.stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	})
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", pos[0])}
	}
	hi := hostInfo{SystemInfo: cudaext.Info(), TransparentHugePages: thpMode()}
	hi.MPS, hi.MPSPipe = mpsRunning()
	hi.Ring = ring.TopoRing(hi.SystemInfo)
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(hi)
	}
	fmt.Fprint(e.stdout, hi.SystemInfo.String())
	if !hi.GPU {
		fmt.Fprintln(e.stdout)
	}
	for _, l := range hi.Ring {
		fmt.Fprintf(e.stdout, "ring all-reduce step: %s\n", l)
	}
	fmt.Fprintf(e.stdout, "transparent huge pages: %s\n", hi.TransparentHugePages)
	if hi.MPS {
		fmt.Fprintf(e.stdout, "MPS: control daemon running (pipe directory %s)\n", hi.MPSPipe)
	} else {
		fmt.Fprintf(e.stdout, "MPS: no control daemon (looked in %s)\n", hi.MPSPipe)
	}
	return nil
}

// thpMode is the bracketed mode of the transparent huge page setting.
func thpMode() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	s := strings.TrimSpace(string(b))
	if i := strings.Index(s, "["); i >= 0 {
		if j := strings.Index(s[i:], "]"); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return s
}

// mpsRunning looks for the MPS control daemon's pipe in
// CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps), and for a process
// named nvidia-cuda-mps-control.
func mpsRunning() (bool, string) {
	dir := os.Getenv("CUDA_MPS_PIPE_DIRECTORY")
	if dir == "" {
		dir = "/tmp/nvidia-mps"
	}
	if _, err := os.Stat(filepath.Join(dir, "control")); err == nil {
		return true, dir
	}
	if out, err := exec.Command("pgrep", "-x", "nvidia-cuda-mps-control").Output(); err == nil && len(strings.TrimSpace(string(out))) > 0 {
		return true, dir
	}
	return false, dir
}
