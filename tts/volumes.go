package tts

import "math"

// Volumes returns one value per slice of sliceMillis, for lip sync: the RMS
// of the slice divided by the RMS of the loudest slice, so 0..1 with the
// loudest slice at exactly 1 (all zeros for silence). The last, partial
// slice counts, so there are ceil(duration / slice) values, as Open-LLM-
// VTuber clients expect.
//
// It never returns nil: the result goes into JSON, where clients expect an
// array. It is empty when there are no samples, and also for parameters that
// do not describe slices of at least one sample (a non-positive rate or
// slice length, or a slice shorter than one sample), which would otherwise
// ask for more values than there are samples.
func Volumes(samples []int16, sampleRate, sliceMillis int) []float64 {
	if len(samples) == 0 || sampleRate <= 0 || sliceMillis <= 0 ||
		sampleRate > math.MaxInt32 || sliceMillis > math.MaxInt32 {
		return []float64{}
	}
	// Slice boundaries are computed in thousandths of a sample, so slice
	// lengths that are not whole samples (20 ms at 11025 Hz is 220.5) do
	// not drift over a long sentence.
	per := int64(sampleRate) * int64(sliceMillis) // sample-thousandths per slice
	if per < 1000 {
		return []float64{}
	}
	n := int64(len(samples))
	count := (n*1000 + per - 1) / per
	out := make([]float64, count)
	loudest := 0.0
	for i := range count {
		start, end := i*per/1000, min((i+1)*per/1000, n)
		var sum int64
		for _, s := range samples[start:end] {
			sum += int64(s) * int64(s)
		}
		if end > start {
			out[i] = math.Sqrt(float64(sum) / float64(end-start))
		}
		loudest = max(loudest, out[i])
	}
	if loudest == 0 {
		return out
	}
	for i := range out {
		out[i] /= loudest
	}
	return out
}
