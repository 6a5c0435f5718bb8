package asr

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// levelDetector calls a frame speech when its mean magnitude reaches 4000:
// a detector without memory, so a test can tell which frames are speech
// without running the segmenter.
type levelDetector struct{}

func (levelDetector) Speech(frame []int16) bool { return levelSpeech(frame) }

func levelSpeech(frame []int16) bool {
	var sum int
	for _, v := range frame {
		sum += max(int(v), -int(v))
	}
	return len(frame) > 0 && sum >= 4000*len(frame)
}

// levelStream expands a fuzz input into a stream: each byte is a run of
// 1–1017 samples, loud (speech) when its top bit is set. Sample values
// follow the position, so misplaced audio does not compare equal.
func levelStream(spec []byte) []int16 {
	var out []int16
	for _, b := range spec {
		n := int(b&0x7f)*8 + 1
		for range n {
			i := len(out)
			v := int16(i % 1000)
			if b&0x80 != 0 {
				v = int16(8000 + i%8000)
				if i%2 == 1 {
					v = -v
				}
			}
			out = append(out, v)
		}
	}
	return out
}

// segmenterLimits applies NewSegmenter's documented defaults and bounds:
// the frame and start run in samples, and the longest utterance.
func segmenterLimits(cfg SegmenterConfig) (frame, startFrames, maxLen int) {
	def := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	frameMs := max(10, min(30, def(cfg.FrameMillis, 20)))
	frame = frameMs * vadMs
	startFrames = (def(cfg.StartMillis, 100) + frameMs - 1) / frameMs
	preRoll := def(cfg.PreRollMillis, 200) * vadMs
	maxLen = max(def(cfg.MaxMillis, 30000)*vadMs, preRoll+(startFrames+1)*frame)
	return frame, startFrames, maxLen
}

// feedSegmenter feeds stream in chunks whose sizes cycle through cuts
// (all at once when cuts is empty) and returns every event, Flush included.
func feedSegmenter(s *Segmenter, stream []int16, cuts []byte) []Event {
	var events []Event
	for i, rest := 0, stream; len(rest) > 0; i++ {
		n := len(rest)
		if len(cuts) > 0 {
			n = min(n, 1+int(cuts[i%len(cuts)])*13)
		}
		events = append(events, s.Feed(rest[:n])...)
		rest = rest[n:]
	}
	return append(events, s.Flush()...)
}

// checkSegments checks the segmenter's invariants on one stream's events.
func checkSegments(t *testing.T, cfg SegmenterConfig, stream []int16, events []Event) {
	t.Helper()
	frame, startFrames, maxLen := segmenterLimits(cfg)
	sample := func(at time.Duration) int { return int(at / (time.Second / SampleRate)) }
	covered := make([]bool, len(stream))
	prevEnd := 0
	for i := 0; i < len(events); i += 2 {
		start := events[i]
		if start.Kind != SpeechStart || start.Audio != nil {
			t.Fatalf("event %d is %v with %d samples, want a start without audio:\n%s", i, start.Kind, len(start.Audio), vadFormat(events))
		}
		if i+1 == len(events) {
			t.Fatalf("the last start has no end after Flush:\n%s", vadFormat(events))
		}
		end := events[i+1]
		if end.Kind != SpeechEnd {
			t.Fatalf("event %d is %v, want the end of the utterance:\n%s", i+1, end.Kind, vadFormat(events))
		}
		from, to := sample(start.At), sample(end.At)
		if segmentAt(int64(from)) != start.At || segmentAt(int64(to)) != end.At {
			t.Fatalf("utterance %d: %v..%v is not on a sample", i/2, start.At, end.At)
		}
		if from < prevEnd || to < from || to > len(stream) {
			t.Fatalf("utterance %d: samples %d..%d, after an end at %d in a stream of %d:\n%s", i/2, from, to, prevEnd, len(stream), vadFormat(events))
		}
		if len(end.Audio) > maxLen {
			t.Fatalf("utterance %d: %d samples, over the maximum of %d (MaxMillis %d):\n%s", i/2, len(end.Audio), maxLen, cfg.MaxMillis, vadFormat(events))
		}
		if !slices.Equal(end.Audio, stream[from:to]) {
			t.Fatalf("utterance %d: %d samples of audio, not the %d of the stream from %v to %v", i/2, len(end.Audio), to-from, start.At, end.At)
		}
		for j := from; j < to; j++ {
			covered[j] = true
		}
		prevEnd = to
	}
	// No speech is lost: every whole frame in a run of speech frames long
	// enough to start an utterance lies inside one.
	run := 0
	for k := 0; (k+1)*frame <= len(stream); k++ {
		if !levelSpeech(stream[k*frame : (k+1)*frame]) {
			run = 0
			continue
		}
		if run++; run < startFrames {
			continue
		}
		first := k // the frames before k were checked with the run's start
		if run == startFrames {
			first = k - run + 1
		}
		for f := first; f <= k; f++ {
			for j := f * frame; j < (f+1)*frame; j++ {
				if !covered[j] {
					t.Fatalf("speech frame %d (samples %d..%d, in a run of %d) is in no utterance:\n%s", f, f*frame, (f+1)*frame, run, vadFormat(events))
				}
			}
		}
	}
}

// TestSegmenterFlushKeepsMaxMillis is the case the fuzzer found: the
// utterance was 48 samples short of MaxMillis when the stream ended 162
// samples into a frame, and Flush returned all 1922 samples for a limit of
// 1808 (113 ms).
func TestSegmenterFlushKeepsMaxMillis(t *testing.T) {
	cfg := SegmenterConfig{StartMillis: 40, HangMillis: 240, PreRollMillis: 10, MaxMillis: 113}
	const frame = 20 * vadMs
	loud := levelStream([]byte{0x80 | 39})[:frame] // one frame of speech
	stream := make([]int16, 5*frame)
	for range 5 {
		stream = append(stream, loud...)
	}
	stream = append(stream, loud[:162]...)

	s := NewSegmenter(levelDetector{}, cfg)
	events := s.Feed(stream)
	if len(events) != 1 || events[0].Kind != SpeechStart || events[0].At != vadDur(5*frame-10*vadMs) {
		t.Fatalf("Feed gave\n%swant one start 10 ms before the speech", vadFormat(events))
	}
	events = append(events, s.Flush()...)
	// 10 ms pre-roll + 5 frames = 1760 samples; 48 more reach the maximum,
	// and the last frame was speech: the other 114 are an utterance too.
	want := []struct {
		kind EventKind
		at   int
		n    int
	}{{SpeechStart, 5*frame - 160, 0}, {SpeechEnd, 5*frame - 160 + 1808, 1808}, {SpeechStart, 5*frame - 160 + 1808, 0}, {SpeechEnd, len(stream), 114}}
	if len(events) != len(want) {
		t.Fatalf("events:\n%swant 2 utterances of 1808 and 114 samples", vadFormat(events))
	}
	for i, w := range want {
		if e := events[i]; e.Kind != w.kind || e.At != vadDur(w.at) || len(e.Audio) != w.n {
			t.Errorf("event %d: %v at %v with %d samples; want %v at %v with %d", i, e.Kind, e.At, len(e.Audio), w.kind, vadDur(w.at), w.n)
		}
	}
	checkSegments(t, cfg, stream, events)

	// After a cut in the hang-over, the rest of the stream is silence and
	// no utterance of its own.
	quiet := make([]int16, 4*frame)
	stream = append(append(append(make([]int16, 5*frame), loud...), loud...), quiet...)
	cfg = SegmenterConfig{StartMillis: 40, HangMillis: 1000, PreRollMillis: 10, MaxMillis: 113}
	s = NewSegmenter(levelDetector{}, cfg)
	events = append(s.Feed(stream[:len(stream)-frame+100]), s.Flush()...)
	if len(events) != 2 || len(events[1].Audio) != 1808 {
		t.Errorf("cut in the hang-over gave\n%swant one utterance of 1808 samples", vadFormat(events))
	}
	checkSegments(t, cfg, stream[:len(stream)-frame+100], events)
}

// FuzzSegmenter checks the segmenter's invariants for any stream, config
// and chunking: events alternate start, end; utterances follow each other,
// hold exactly the stream between their events and never exceed the
// maximum; no speech run long enough to start one is left out; the events
// do not depend on the chunking; Flush leaves the segmenter as new.
func FuzzSegmenter(f *testing.F) {
	// The Flush case of TestSegmenterFlushKeepsMaxMillis: 1600 samples of
	// silence, then 1762 of speech; 20 ms frames, StartMillis 40,
	// HangMillis 240, PreRollMillis 10, MaxMillis 113 (each field is the
	// fuzzed value less 50).
	f.Add([]byte{28, 28, 28, 28, 28, 28, 28, 3, 0x80 | 110, 0x80 | 110}, []byte{}, uint8(2), uint16(90), uint16(290), uint16(60), uint16(163))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0x10, 0x7f, 0x7f, 0xff, 0x7f}, []byte{3, 200, 7}, uint8(1), uint16(0), uint16(0), uint16(0), uint16(500))
	f.Add([]byte{0x05, 0xc0, 0x01, 0xc0, 0x40, 0xff, 0x00, 0xff}, []byte{24}, uint8(3), uint16(30), uint16(60), uint16(300), uint16(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte{255, 1}, uint8(0), uint16(10), uint16(10), uint16(0), uint16(20))
	f.Fuzz(func(t *testing.T, spec, cuts []byte, frameSel uint8, startMs, hangMs, preMs, maxMs uint16) {
		if len(spec) > 128 {
			return // 8 s of audio at most: enough, and fast to minimise
		}
		cfg := SegmenterConfig{
			FrameMillis:   []int{0, 10, 20, 30, 5, 40}[frameSel%6],
			StartMillis:   int(startMs%700) - 50,
			HangMillis:    int(hangMs%1200) - 50,
			PreRollMillis: int(preMs%700) - 50,
			MaxMillis:     int(maxMs%4000) - 50,
		}
		stream := levelStream(spec)
		s := NewSegmenter(levelDetector{}, cfg)
		whole := feedSegmenter(s, stream, nil)
		checkSegments(t, cfg, stream, whole)
		// The same segmenter after Flush, fed in the fuzzed chunks.
		if got := feedSegmenter(s, stream, cuts); !reflect.DeepEqual(got, whole) {
			t.Fatalf("chunks %v:\n%swhole:\n%s", cuts, vadFormat(got), vadFormat(whole))
		}
	})
}
