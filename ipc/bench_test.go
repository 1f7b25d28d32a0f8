package ipc

import "testing"

// benchBatchReady is a BatchReady as serve sends it for a 3-hop sampler: a
// count per region (x, y, n_id, edge_index), batch_size, and per-hop node and
// edge counts.
func benchBatchReady() *BatchReady {
	return &BatchReady{Slot: 3, Epoch: 12, Index: 4711,
		Counts:  []uint32{181234, 181234, 181234, 352000},
		Scalars: []int64{1024},
		Lists:   [][]uint32{{1024, 15360, 73000, 91850}, {15360, 146000, 190640}}}
}

// BenchmarkBatchReadyMarshal is the daemon's cost per batch to encode the
// message (the frame is then written to the socket).
func BenchmarkBatchReadyMarshal(b *testing.B) {
	m := benchBatchReady()
	frame := mustMarshal(b, m)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkBatchReadyUnmarshal is a Go client's cost per batch to decode it.
func BenchmarkBatchReadyUnmarshal(b *testing.B) {
	frame := mustMarshal(b, benchBatchReady())
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Unmarshal(frame, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkBatchReadyGeneric is the table's generic codec on the same
// message: what BatchReady's hand-written codec (batchfast.go) saves.
func BenchmarkBatchReadyGeneric(b *testing.B) {
	m := benchBatchReady()
	frame := mustMarshal(b, m)
	b.Run("Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := genericFrame(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := genericDecode(TypeBatchReady, frame[HeaderSize:], DefaultLimits); err != nil {
				b.Fatal(err)
			}
		}
	})
}
