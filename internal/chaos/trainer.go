package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gnnloader/gnnloader/ipc"
)

// TrainerConfig is what a chaos trainer process does.
type TrainerConfig struct {
	Socket    string
	Log       string // append-only record of delivered batches
	Rank      int
	World     int
	BatchSize int
	Epochs    int
	Seed      uint64
}

// Record is one delivered batch as the trainer logged it.
type Record struct {
	Epoch, Index int
	Seeds        []int64
}

// ReadLog parses a trainer's log. A torn last line (the process was killed
// inside the write) is ignored: that batch was not delivered.
func ReadLog(path string) ([]Record, error) {
	recs, _, _, err := readLog(path)
	return recs, err
}

// readLog is ReadLog, the length of the log's whole lines (what is left
// when the torn last line is cut off) and the log's size.
func readLog(path string) (recs []Record, whole, size int64, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, 0, nil
	}
	if err != nil {
		return nil, 0, 0, err
	}
	recs, err = parseLog(path, b)
	return recs, int64(bytes.LastIndexByte(b, '\n') + 1), int64(len(b)), err
}

// resumeLog reads a trainer's log for its restart and cuts off a torn last
// line: a write that a SIGKILL cut short (a write to a file may stop
// between pages when a fatal signal is pending) must not run into the
// next record appended after it.
func resumeLog(path string) ([]Record, error) {
	recs, whole, size, err := readLog(path)
	if err != nil {
		return nil, err
	}
	if size > whole {
		if err := os.Truncate(path, whole); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

func parseLog(path string, b []byte) ([]Record, error) {
	var out []Record
	lines := strings.Split(string(b), "\n")
	for _, line := range lines[:len(lines)-1] { // the part after the last \n is torn or empty
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		r := Record{}
		r.Epoch, _ = strconv.Atoi(f[0])
		r.Index, _ = strconv.Atoi(f[1])
		for _, s := range f[2:] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: bad seed %q", path, s)
			}
			r.Seeds = append(r.Seeds, v)
		}
		out = append(out, r)
	}
	return out, nil
}

// RunTrainer is a trainer that survives its own and the daemon's deaths: it
// resumes after the last batch its log records, reconnecting with bounded
// exponential backoff while the daemon is away. A batch counts as delivered
// once its record is written (one write call); only then is it released.
func RunTrainer(cfg TrainerConfig) error {
	recs, err := resumeLog(cfg.Log)
	if err != nil {
		return err
	}
	epoch, next := 0, 0
	if len(recs) > 0 {
		last := recs[len(recs)-1]
		epoch, next = last.Epoch, last.Index+1
	}
	logf, err := os.OpenFile(cfg.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	backoff := 10 * time.Millisecond
	deadline := time.Now().Add(60 * time.Second)
	for epoch < cfg.Epochs {
		before := [2]int{epoch, next}
		done, err := session(cfg, logf, &epoch, &next)
		if err == nil && done {
			return nil
		}
		if [2]int{epoch, next} != before { // progress: the daemon is back
			backoff, deadline = 10*time.Millisecond, time.Now().Add(60*time.Second)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rank %d: gave up reconnecting: %v", cfg.Rank, err)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 500*time.Millisecond)
	}
	return nil
}

// session is one connection: it resumes at (epoch, next) and advances them
// as batches are delivered. It returns done when all epochs are delivered.
func session(cfg TrainerConfig, logf *os.File, epoch, next *int) (bool, error) {
	c, err := ipc.Dial(cfg.Socket, ipc.DefaultLimits)
	if err != nil {
		return false, err
	}
	defer c.Close()
	recv := func() (ipc.Msg, error) {
		m, fds, err := c.ReadMsg()
		ipc.CloseFDs(fds) // the seeds come from BatchReady's slot; no need to map it here
		if e, ok := m.(*ipc.Error); ok {
			return nil, e.AsError()
		}
		if _, ok := m.(*ipc.Goodbye); ok {
			return nil, io.EOF
		}
		return m, err
	}
	if err := c.WriteMsg(&ipc.Hello{Version: ipc.Version, PID: uint32(os.Getpid()), Name: "chaos"}); err != nil {
		return false, err
	}
	if _, err := recv(); err != nil {
		return false, err
	}
	open := &ipc.Open{Job: "chaos", Split: "train", BatchSize: uint32(cfg.BatchSize), Fanouts: []int32{4, 3},
		Shuffle: true, Seed: cfg.Seed, Rank: uint32(cfg.Rank), WorldSize: uint32(cfg.World), Device: "cpu",
		StartEpoch: uint32(*epoch), StartBatch: uint32(*next)}
	if err := c.WriteMsg(open); err != nil {
		return false, err
	}
	m, fds, err := c.ReadMsg()
	if err != nil {
		return false, err
	}
	opened, ok := m.(*ipc.Opened)
	if !ok { // an Error, or a Goodbye from a daemon that is stopping
		ipc.CloseFDs(fds)
		if e, isErr := m.(*ipc.Error); isErr {
			return false, e.AsError()
		}
		return false, fmt.Errorf("daemon answered Open with %T", m)
	}
	mem, err := mapSlots(fds[0], opened)
	ipc.CloseFDs(fds)
	if err != nil {
		return false, err
	}
	defer mem.unmap()
	nb := int(opened.NumBatches)
	if *next >= nb { // the log ends with an epoch's last batch
		*epoch, *next = *epoch+1, 0
	}
	for *epoch < cfg.Epochs {
		if err := c.WriteMsg(&ipc.StartEpoch{Epoch: uint32(*epoch)}); err != nil {
			return false, err
		}
		for {
			m, err := recv()
			if err != nil {
				return false, err
			}
			if _, ok := m.(*ipc.EpochEnd); ok {
				break
			}
			b, ok := m.(*ipc.BatchReady)
			if !ok {
				return false, fmt.Errorf("rank %d: unexpected %T inside an epoch", cfg.Rank, m)
			}
			if int(b.Epoch) != *epoch || int(b.Index) != *next {
				return false, fmt.Errorf("rank %d: got batch %d/%d, want %d/%d", cfg.Rank, b.Epoch, b.Index, *epoch, *next)
			}
			seeds := mem.seeds(opened, b)
			var sb strings.Builder
			fmt.Fprintf(&sb, "%d %d", b.Epoch, b.Index)
			for _, s := range seeds {
				fmt.Fprintf(&sb, " %d", s)
			}
			sb.WriteByte('\n')
			if _, err := logf.WriteString(sb.String()); err != nil { // one write: delivered
				return false, err
			}
			*next++
			if err := c.WriteMsg(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index}); err != nil {
				return false, err
			}
		}
		*epoch, *next = *epoch+1, 0
	}
	c.WriteMsg(&ipc.Goodbye{Reason: "done"})
	return true, nil
}
