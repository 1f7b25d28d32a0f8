package chaos

// The trainer's log across its own SIGKILL: a record cut short by the kill.

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestResumeCutsTornRecord: a trainer killed inside a record's write leaves
// a line without its newline; the restarted trainer delivers that batch
// again and appends its record, which must be a line of its own, not the
// rest of the torn one (TestChaos once read "seeds differ from the plan"
// there).
func TestResumeCutsTornRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rank0.log")
	if err := os.WriteFile(path, []byte("0 0 1 2\n0 1 3"), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := resumeLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Index != 0 {
		t.Fatalf("resumed after %+v, want the one whole record", recs)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("0 1 3 4\n"); err != nil { // batch 1 delivered again
		t.Fatal(err)
	}
	f.Close()
	recs, err = ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[1].Epoch != 0 || recs[1].Index != 1 || !slices.Equal(recs[1].Seeds, []int64{3, 4}) {
		t.Fatalf("log after the restart: %+v, want batch 0/1 with seeds [3 4]", recs)
	}
	// A log of whole lines, and no log at all, are left as they are.
	before, _ := os.ReadFile(path)
	if _, err := resumeLog(path); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatalf("a whole log changed: %q -> %q", before, after)
	}
	if recs, err := resumeLog(filepath.Join(t.TempDir(), "none.log")); err != nil || recs != nil {
		t.Fatalf("no log: %v, %v", recs, err)
	}
}
