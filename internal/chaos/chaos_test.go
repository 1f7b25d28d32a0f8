package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/sampler"
	"github.com/gnnloader/gnnloader/serve"
)

const trainerEnv = "GNNLOADER_CHAOS_TRAINER"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(trainerEnv); cfg != "" {
		var tc TrainerConfig
		if err := json.Unmarshal([]byte(cfg), &tc); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := RunTrainer(tc); err != nil {
			fmt.Fprintln(os.Stderr, "trainer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const (
	dataset   = "synthetic:cora:1:0"
	world     = 3
	batchSize = 16
	seed      = 11
	// shutdownTimeout is the daemon's --shutdown-timeout: a SIGTERMed
	// daemon must be gone within twice that, whatever its clients do.
	shutdownTimeout = 2 * time.Second
)

type harness struct {
	t        *testing.T
	dir      string
	loaderd  string
	socket   string
	daemon   *exec.Cmd
	trainers [world]*exec.Cmd
	rss      []int64 // of the current daemon, sampled
	kills    map[string]int
	stops    []time.Duration // SIGTERM to exit
}

func (h *harness) startDaemon() {
	h.t.Helper()
	logf, _ := os.OpenFile(filepath.Join(h.dir, "loaderd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	cmd := exec.Command(h.loaderd, "serve", "--dataset", dataset, "--socket", h.socket, "--prefetch", "2",
		"--write-timeout", "300ms", "--handshake-timeout", "300ms", "--shutdown-timeout", shutdownTimeout.String())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with an interrupted test
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.daemon = cmd
	h.rss = h.rss[:0]
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, err := os.Stat(h.socket); err == nil && st.Mode()&os.ModeSocket != 0 && canDial(h.socket) {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatal("loaderd did not start (see loaderd.log)")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) startTrainer(rank int) {
	cfg, _ := json.Marshal(TrainerConfig{Socket: h.socket, Log: h.logPath(rank), Rank: rank, World: world,
		BatchSize: batchSize, Epochs: 1 << 20, Seed: seed})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), trainerEnv+"="+string(cfg))
	logf, _ := os.OpenFile(filepath.Join(h.dir, fmt.Sprintf("trainer%d.err", rank)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.trainers[rank] = cmd
}

func (h *harness) logPath(rank int) string {
	return filepath.Join(h.dir, fmt.Sprintf("rank%d.log", rank))
}

// killTrainer SIGKILLs a trainer; a trainer that had already exited on its
// own (it gave up, or failed a check) fails the test.
func (h *harness) killTrainer(r int) {
	h.t.Helper()
	err := kill(h.trainers[r], syscall.SIGKILL)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return
		}
	}
	msg, _ := os.ReadFile(filepath.Join(h.dir, fmt.Sprintf("trainer%d.err", r)))
	h.t.Fatalf("trainer %d had exited on its own (%v):\n%s", r, err, msg)
}

func kill(cmd *exec.Cmd, sig syscall.Signal) error {
	cmd.Process.Signal(sig)
	return cmd.Wait()
}

// stopDaemon SIGTERMs the daemon: it must exit 0 within twice its shutdown
// timeout, non-reading and stalled clients notwithstanding.
func (h *harness) stopDaemon() {
	h.t.Helper()
	start := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- kill(h.daemon, syscall.SIGTERM) }()
	select {
	case err := <-exited:
		if err != nil {
			h.t.Fatalf("loaderd exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(2 * shutdownTimeout):
		h.daemon.Process.Kill()
		h.t.Fatalf("loaderd still running %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	}
	h.stops = append(h.stops, time.Since(start))
}

// checkNoLeaks waits until the daemon, its trainers gone, holds no slot
// memfd and exactly the descriptors it had before any client came
// (baseline); it fails listing what is left.
func (h *harness) checkNoLeaks(baseline map[string]int) {
	h.t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		fds := fdsOf(h.daemon.Process.Pid)
		extra := map[string]int{}
		for l, n := range fds {
			if n > baseline[l] {
				extra[l] = n - baseline[l]
			}
		}
		if len(extra) == 0 && memfds(h.daemon.Process.Pid) == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("loaderd still holds descriptors 3 s after its clients went away: %v", extra)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestChaos runs for GNNLOADER_CHAOS (a duration; default 6s). With
// GNNLOADER_CHAOS_DAEMON=keep only trainers are killed, so one daemon lives
// through the whole run and its memory can be watched.
func TestChaos(t *testing.T) {
	dur := 6 * time.Second
	if v := os.Getenv("GNNLOADER_CHAOS"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("GNNLOADER_CHAOS=%q: %v", v, err)
		}
		dur = d
	}
	h := &harness{t: t, dir: t.TempDir(), kills: map[string]int{}}
	h.socket = filepath.Join(h.dir, "loaderd.sock")
	// LOADERD: a daemon already built (the GPU machines have no Go: there
	// scripts/gpu-check.sh passes .gpu/bin/loaderd); otherwise built here.
	if h.loaderd = os.Getenv("LOADERD"); h.loaderd != "" {
		if st, err := os.Stat(h.loaderd); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			t.Fatalf("LOADERD=%q is not an executable file (a relative path is taken from %s): %v", h.loaderd, mustGetwd(t), err)
		}
	} else {
		h.loaderd = filepath.Join(h.dir, "loaderd")
		build := exec.Command("go", "build", "-o", h.loaderd, "github.com/gnnloader/gnnloader/cmd/loaderd")
		build.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building loaderd: %v\n%s", err, out)
		}
	}
	killDaemons := os.Getenv("GNNLOADER_CHAOS_DAEMON") != "keep"
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	start := time.Now()

	// Phase 1, the first half of the run (at least 3 s): one daemon lives
	// throughout while trainers are killed and hostile clients (non-readers,
	// stalled handshakes) come and go. Then its clients go, and it must
	// hold exactly the descriptors it had before them, and its memory must
	// not have grown.
	h.startDaemon()
	time.Sleep(200 * time.Millisecond)
	baseline := fdsOf(h.daemon.Process.Pid)
	for r := 0; r < world; r++ {
		h.startTrainer(r)
	}
	hostile := startHostiles(h.socket)
	phase1 := max(dur/2, 3*time.Second)
	if !killDaemons {
		phase1 = dur
	}
	for time.Since(start) < phase1 {
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		if rss := rssOf(h.daemon.Process.Pid); rss > 0 {
			h.rss = append(h.rss, rss)
		}
		if rng.IntN(10) < 6 {
			r := rng.IntN(world)
			h.killTrainer(r)
			h.kills["trainer SIGKILL"]++
			h.startTrainer(r)
		}
	}
	hostile.end()
	for r := 0; r < world; r++ {
		h.killTrainer(r)
	}
	h.checkNoLeaks(baseline)
	life := time.Since(start)
	first, last := h.rss[min(1, len(h.rss)-1)], h.rss[len(h.rss)-1]
	growth := float64(last-first) / float64(max(first, 1))
	if growth > 0.25 && last-first > 32<<20 {
		t.Fatalf("daemon RSS grew from %d to %d bytes over %v", first, last, life)
	}
	t.Logf("phase 1: one daemon for %v: RSS %.1f -> %.1f MB (%+.1f%%); descriptors back to its %d; "+
		"%d stalled handshakes closed, %d non-reading trainers cut off",
		life.Round(time.Millisecond), float64(first)/1e6, float64(last)/1e6, 100*growth, len(baseline),
		hostile.stalledClosed.Load(), hostile.readersCut.Load())
	if hostile.stalledClosed.Load() == 0 || hostile.readersCut.Load() == 0 {
		t.Fatal("the hostile clients were never cut off: the test did not exercise the daemon's limits")
	}

	// Phase 2: the daemon is killed too (SIGKILL or SIGTERM), with the
	// hostile clients still at it.
	for r := 0; r < world; r++ {
		h.startTrainer(r)
	}
	hostile = startHostiles(h.socket)
	daemonStarts := 1
	for time.Since(start) < dur {
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		switch x := rng.IntN(10); {
		case x < 6: // kill a trainer
			r := rng.IntN(world)
			h.killTrainer(r)
			h.kills["trainer SIGKILL"]++
			h.startTrainer(r)
		case x < 8 && killDaemons: // kill the daemon, SIGKILL or SIGTERM
			if rng.IntN(2) == 0 {
				h.stopDaemon()
				h.kills["daemon SIGTERM"]++
			} else {
				kill(h.daemon, syscall.SIGKILL)
				h.kills["daemon SIGKILL"]++
			}
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
			h.startDaemon() // a SIGKILLed daemon's stale socket must not stop it
			daemonStarts++
		default: // let it run
		}
	}
	// Calm down: no more kills; let the trainers reconnect and progress.
	time.Sleep(1500 * time.Millisecond)
	for r := 0; r < world; r++ {
		h.killTrainer(r)
	}
	hostile.end()
	// With every trainer gone the daemon must free every slot ring.
	deadline := time.Now().Add(2 * time.Second)
	for memfds(h.daemon.Process.Pid) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("loaderd still holds %d slot memfds 2 s after its trainers died", memfds(h.daemon.Process.Pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The last SIGTERM comes with hostile clients connected.
	hostile = startHostiles(h.socket)
	time.Sleep(500 * time.Millisecond)
	h.stopDaemon()
	hostile.end()
	if _, err := os.Stat(h.socket); !os.IsNotExist(err) {
		t.Fatal("socket left behind after SIGTERM")
	}
	// Slots are memfds, which die with their last holder; nothing may appear
	// in /dev/shm either.
	if ents, _ := os.ReadDir("/dev/shm"); len(ents) > 0 {
		for _, e := range ents {
			if strings.Contains(e.Name(), "gnnloader") {
				t.Fatalf("/dev/shm/%s left behind", e.Name())
			}
		}
	}

	// Every rank's log must be exactly the batches of its plan, in order,
	// each once: nothing lost, nothing repeated, identical seeds.
	src, err := serve.OpenSource(dataset, true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	train := src.Data.Splits[datasets.SplitTrain]
	var total, epochs int
	for r := 0; r < world; r++ {
		recs, err := ReadLog(h.logPath(r))
		if err != nil {
			t.Fatal(err)
		}
		e, i := 0, 0
		var plan *sampler.Plan
		for k, rec := range recs {
			if plan == nil || rec.Epoch != e {
				if plan != nil && i != plan.NumBatches() {
					t.Fatalf("rank %d epoch %d: %d of %d batches before epoch %d", r, e, i, plan.NumBatches(), rec.Epoch)
				}
				if plan != nil {
					e, i = e+1, 0
				}
				plan, _ = sampler.NewPlan(train, sampler.EpochConfig{BatchSize: batchSize, Shuffle: true, Seed: seed, Rank: r, WorldSize: world}, e)
			}
			if rec.Epoch != e || rec.Index != i {
				t.Fatalf("rank %d record %d: batch %d/%d, want %d/%d (lost or repeated)", r, k, rec.Epoch, rec.Index, e, i)
			}
			if !slices.Equal(rec.Seeds, plan.Batch(i)) {
				t.Fatalf("rank %d batch %d/%d: seeds differ from the plan: logged %d %v, planned %d %v", r, e, i,
					len(rec.Seeds), rec.Seeds[:min(8, len(rec.Seeds))], len(plan.Batch(i)), plan.Batch(i)[:min(8, len(plan.Batch(i)))])
			}
			i++
			total++
		}
		epochs += e
	}
	slowest := slices.Max(h.stops)
	t.Logf("chaos: %s, %v, daemon starts %d, batches delivered %d (%d whole epochs over %d ranks), lost 0, repeated 0, leaked memfds 0; "+
		"slowest SIGTERM to exit %v of %d",
		dur, h.kills, daemonStarts, total, epochs, world, slowest.Round(time.Millisecond), len(h.stops))
	if total == 0 {
		t.Fatal("no batch was delivered")
	}
}

func canDial(path string) bool {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	return syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}) == nil
}

// fdsOf counts a process's descriptors by what they point to (sockets and
// anonymous inodes by kind only).
func fdsOf(pid int) map[string]int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	out := map[string]int{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if k, _, ok := strings.Cut(l, ":["); ok {
			l = k // socket:[123] -> socket
		}
		out[l]++
	}
	return out
}

// memfds counts the gnnloader slot memfds a process holds.
func memfds(pid int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.Contains(l, "memfd:gnnloader") {
			n++
		}
	}
	return n
}

func rssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
