package samplerbench

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/datasets"
)

func TestRun(t *testing.T) {
	d, err := datasets.Generate(datasets.GenOptions{Like: "arxiv", Scale: 0.3, Seed: 1, NoFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	g, seeds := &d.Graph, d.Splits[datasets.SplitTrain]
	var buf bytes.Buffer
	res, err := Run(context.Background(), g, seeds, Config{Fanouts: []int{5, 5}, BatchSize: 256, Workers: 2, Batches: 6, Duration: time.Minute}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + buf.String())
	for _, r := range res.Rows() {
		if r.Batches != 6 || r.EdgesPerSec <= 0 || r.NodesPerBatch <= 256 {
			t.Errorf("row %+v", r)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, g, seeds[:300], Config{Batches: 3}, nil); err != context.Canceled {
		t.Errorf("cancelled bench: %v", err)
	}
}
