package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/gnnloader/gnnloader/datasets"
)

// newProgress returns a datasets.Progress that draws a progress bar when
// stderr is a terminal and logs a line every interval otherwise.
func newProgress(log *slog.Logger, interval time.Duration) progress {
	if term.IsTerminal(int(os.Stderr.Fd())) {
		return &barProgress{}
	}
	return &logProgress{log: log, interval: interval}
}

type progress interface {
	datasets.Progress
	Finish()
}

// barProgress draws one progress bar per stage on stderr.
type barProgress struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

func (p *barProgress) Begin(stage string, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finishLocked()
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(fmt.Sprintf("%-10s", stage)),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }),
	}
	if isBytesStage(stage) {
		opts = append(opts, progressbar.OptionShowBytes(true))
	}
	p.bar = progressbar.NewOptions64(total, opts...)
}

func (p *barProgress) Add(n int64) {
	p.mu.Lock()
	bar := p.bar
	p.mu.Unlock()
	if bar != nil {
		bar.Add64(n)
	}
}

func (p *barProgress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finishLocked()
}

func (p *barProgress) finishLocked() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
}

func isBytesStage(stage string) bool {
	for _, s := range []string{"write", "verify", "read", "inflate"} {
		if strings.HasPrefix(stage, s) {
			return true
		}
	}
	return false
}

// logProgress logs the current stage's progress every interval: what a
// service log or a CI log wants instead of a bar.
type logProgress struct {
	log      *slog.Logger
	interval time.Duration

	mu    sync.Mutex
	stage string
	total int64
	start time.Time
	done  atomic.Int64
	stop  chan struct{}
}

func (p *logProgress) Begin(stage string, total int64) {
	p.Finish()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stage, p.total, p.start = stage, total, time.Now()
	p.done.Store(0)
	p.stop = make(chan struct{})
	stop := p.stop
	go func() {
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.report("progress")
			}
		}
	}()
}

func (p *logProgress) Add(n int64) { p.done.Add(n) }

func (p *logProgress) report(msg string) {
	p.mu.Lock()
	stage, total, start := p.stage, p.total, p.start
	p.mu.Unlock()
	done := p.done.Load()
	attrs := []any{"stage", stage, "done", done, "elapsed", time.Since(start).Round(time.Millisecond)}
	if total > 0 {
		attrs = append(attrs, "total", total, "percent", fmt.Sprintf("%.1f", 100*float64(done)/float64(total)))
	}
	p.log.Info(msg, attrs...)
}

func (p *logProgress) Finish() {
	p.mu.Lock()
	stop := p.stop
	p.stop = nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		p.report("stage done")
	}
}
