package ring

// The test oracles of the ring: a float64 all-reduce and the rounding
// bound the ring's result must stay within.

// reference64 is the exact-ish all-reduce in float64 (the sum of every rank's
// element, divided by the number of ranks for Avg), for checking results
// within the dtype's rounding.
func reference64(bufs [][]byte, n int64, dt DType, op Op) []float64 {
	out := make([]float64, n)
	for _, b := range bufs {
		for i := range out {
			out[i] += dt.Load(b, i)
		}
	}
	if op == Avg {
		for i := range out {
			out[i] /= float64(len(bufs))
		}
	}
	return out
}

// tolerance is the error bound of the ring's result for element i against
// reference64: every one of the ranks-1 additions (and the division) rounds
// once to dt, each by at most half an ulp of a partial sum no larger than
// sum|x|.
func tolerance(bufs [][]byte, i int, dt DType, op Op) float64 {
	var abs float64
	for _, b := range bufs {
		v := dt.Load(b, i)
		if v < 0 {
			v = -v
		}
		abs += v
	}
	u := map[DType]float64{Float32: 0x1p-24, BFloat16: 0x1p-8, Float16: 0x1p-11}[dt]
	tol := float64(len(bufs)+1) * u * abs
	if op == Avg {
		tol /= float64(len(bufs))
	}
	return tol + 0x1p-24 // float16 subnormals
}
