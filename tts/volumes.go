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
	out := sliceRMS(samples, sampleRate, sliceMillis)
	return normalize(out, loudest(out))
}

// VolumeMeter computes Volumes for the consecutive pieces of one sentence
// sent as they are synthesised: each piece is scaled by the loudest slice
// of the sentence so far rather than its own, so that a quiet piece after
// a loud one does not open the mouth as wide. Pieces are meant to hold
// whole slices (all but the last), so that slices do not straddle them.
type VolumeMeter struct{ loudest float64 }

// Volumes is Volumes of the next piece.
func (m *VolumeMeter) Volumes(samples []int16, sampleRate, sliceMillis int) []float64 {
	out := sliceRMS(samples, sampleRate, sliceMillis)
	m.loudest = max(m.loudest, loudest(out))
	return normalize(out, m.loudest)
}

func loudest(rms []float64) float64 {
	l := 0.0
	for _, v := range rms {
		l = max(l, v)
	}
	return l
}

// normalize divides rms by loudest in place (all zeros stay zeros).
func normalize(rms []float64, loudest float64) []float64 {
	if loudest == 0 {
		return rms
	}
	for i := range rms {
		rms[i] /= loudest
	}
	return rms
}

// sliceRMS is the RMS of each slice, as Volumes describes the slices.
func sliceRMS(samples []int16, sampleRate, sliceMillis int) []float64 {
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
	for i := range count {
		start, end := i*per/1000, min((i+1)*per/1000, n)
		var sum int64
		for _, s := range samples[start:end] {
			sum += int64(s) * int64(s)
		}
		if end > start {
			out[i] = math.Sqrt(float64(sum) / float64(end-start))
		}
	}
	return out
}
