package asr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"koe/testkit"
)

const vadMs = SampleRate / 1000 // samples per millisecond

// vadBurst is a synthetic voiced sound: a harmonic tone (fundamental f0
// with a slight vibrato, harmonics up to 4 kHz falling at 6 dB per octave)
// under a syllable-rate envelope that swings by 8 dB, with 15 ms fades.
// levelDB is the RMS level at the envelope's peaks, in dBFS.
func vadBurst(ms int, f0, levelDB float64) []float64 {
	n := ms * vadMs
	out := make([]float64, n)
	harmonics := int(4000 / f0)
	// The sum of harmonics k with amplitude 1/k has an RMS of
	// sqrt(Σ 1/(2k²)); scale it to the requested level.
	var power float64
	for k := 1; k <= harmonics; k++ {
		power += 1 / (2 * float64(k*k))
	}
	scale := math.Pow(10, levelDB/20) / math.Sqrt(power)
	phase := 0.0
	fade := 15 * vadMs
	for i := range out {
		t := float64(i) / SampleRate
		f := f0 * (1 + 0.03*math.Sin(2*math.Pi*5*t))
		phase += 2 * math.Pi * f / SampleRate
		// sin(kθ) by the recurrence sin(kθ) = 2cos θ sin((k-1)θ) - sin((k-2)θ).
		s1, c1 := math.Sincos(phase)
		v, prev, cur := 0.0, 0.0, s1
		for k := 1; k <= harmonics; k++ {
			v += cur / float64(k)
			prev, cur = cur, 2*c1*cur-prev
		}
		env := 0.7 + 0.3*math.Cos(2*math.Pi*4*t)
		if i < fade {
			env *= 0.5 - 0.5*math.Cos(math.Pi*float64(i)/float64(fade))
		}
		if j := n - 1 - i; j < fade {
			env *= 0.5 - 0.5*math.Cos(math.Pi*float64(j)/float64(fade))
		}
		out[i] = scale * env * v
	}
	return out
}

// vadWhite is white noise at levelDB dBFS RMS.
func vadWhite(rng *rand.Rand, n int, levelDB float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = rng.NormFloat64()
	}
	return vadScale(out, levelDB)
}

// vadPink is pink (1/f) noise at levelDB dBFS RMS, by the Voss-McCartney
// method: the sum of 16 random values, value k redrawn every 2^k samples.
func vadPink(rng *rand.Rand, n int, levelDB float64) []float64 {
	const rows = 16
	var vals [rows]float64
	var sum float64
	for k := range vals {
		vals[k] = rng.NormFloat64()
		sum += vals[k]
	}
	out := make([]float64, n)
	for i := range out {
		// Redraw the row given by the trailing zeros of the counter, so
		// row k changes every 2^(k+1) samples.
		if i > 0 {
			k := min(rows-1, bitsTrailingZeros(i))
			sum -= vals[k]
			vals[k] = rng.NormFloat64()
			sum += vals[k]
		}
		out[i] = sum + rng.NormFloat64()
	}
	return vadScale(out, levelDB)
}

func bitsTrailingZeros(i int) int {
	n := 0
	for i&1 == 0 {
		i >>= 1
		n++
	}
	return n
}

func vadScale(x []float64, levelDB float64) []float64 {
	var sum, mean float64
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		sum += (v - mean) * (v - mean)
	}
	scale := math.Pow(10, levelDB/20) / math.Sqrt(sum/float64(len(x)))
	for i := range x {
		x[i] = (x[i] - mean) * scale
	}
	return x
}

func vadToPCM(x []float64) []int16 {
	out := make([]int16, len(x))
	for i, v := range x {
		out[i] = int16(max(-32768, min(32767, math.Round(v*32768))))
	}
	return out
}

// vadPart is a piece of a test stream: silence (f0 == 0) or a burst.
type vadPart struct {
	ms int
	f0 float64
}

// vadSpan is where a burst lies in a stream, in samples.
type vadSpan struct{ on, off int }

// vadStream lays parts end to end at -18 dBFS and adds noise over the
// whole stream ("white", "pink" or "" for digital silence).
func vadStream(seed uint64, noise string, parts ...vadPart) ([]int16, []vadSpan) {
	var x []float64
	var spans []vadSpan
	for _, p := range parts {
		if p.f0 == 0 {
			x = append(x, make([]float64, p.ms*vadMs)...)
			continue
		}
		on := len(x)
		x = append(x, vadBurst(p.ms, p.f0, -18)...)
		spans = append(spans, vadSpan{on, len(x)})
	}
	vadAddNoise(seed, noise, x, -40)
	return vadToPCM(x), spans
}

func vadAddNoise(seed uint64, noise string, x []float64, levelDB float64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	var n []float64
	switch noise {
	case "white":
		n = vadWhite(rng, len(x), levelDB)
	case "pink":
		n = vadPink(rng, len(x), levelDB)
	default:
		return
	}
	for i := range x {
		x[i] += n[i]
	}
}

// vadRun feeds the stream in chunks of the given size (0: all at once) to
// a fresh default segmenter and returns every event, Flush included.
func vadRun(stream []int16, chunk int, cfg SegmenterConfig) []Event {
	s := NewSegmenter(NewEnergyDetector(EnergyConfig{}), cfg)
	if chunk <= 0 {
		chunk = len(stream)
	}
	var events []Event
	for rest := stream; len(rest) > 0; {
		n := min(chunk, len(rest))
		events = append(events, s.Feed(rest[:n])...)
		rest = rest[n:]
	}
	return append(events, s.Flush()...)
}

func vadDur(samples int) time.Duration { return segmentAt(int64(samples)) }

// vadCheck matches events to bursts: one start and one end per burst,
// the start at the onset minus the pre-roll, the end a hang-over after the
// burst, each within tol; every utterance's Audio is the stream between
// its two events.
func vadCheck(t *testing.T, stream []int16, spans []vadSpan, events []Event, tol time.Duration) {
	t.Helper()
	if len(events) != 2*len(spans) {
		t.Fatalf("%d events for %d bursts, want 2 each:\n%s", len(events), len(spans), vadFormat(events))
	}
	const preRoll, hang = 200 * time.Millisecond, 600 * time.Millisecond
	prevEnd := time.Duration(0)
	for i, sp := range spans {
		start, end := events[2*i], events[2*i+1]
		if start.Kind != SpeechStart || end.Kind != SpeechEnd {
			t.Fatalf("burst %d: events %v, %v; want a start then an end", i, start.Kind, end.Kind)
		}
		wantStart := max(prevEnd, vadDur(sp.on)-preRoll)
		if d := start.At - wantStart; d < -tol || d > tol {
			t.Errorf("burst %d (%v..%v): start at %v, want %v ± %v", i, vadDur(sp.on), vadDur(sp.off), start.At, wantStart, tol)
		}
		wantEnd := vadDur(sp.off) + hang
		if d := end.At - wantEnd; d < -tol || d > tol {
			t.Errorf("burst %d (%v..%v): end at %v, want %v ± %v", i, vadDur(sp.on), vadDur(sp.off), end.At, wantEnd, tol)
		}
		if start.Audio != nil {
			t.Errorf("burst %d: SpeechStart carries audio", i)
		}
		from, to := int(start.At/(time.Second/SampleRate)), int(end.At/(time.Second/SampleRate))
		if !slices.Equal(end.Audio, stream[from:to]) {
			t.Errorf("burst %d: utterance audio has %d samples, want the %d of the stream from %v to %v",
				i, len(end.Audio), to-from, start.At, end.At)
		}
		prevEnd = end.At
	}
}

func vadFormat(events []Event) string {
	var b bytes.Buffer
	for _, e := range events {
		fmt.Fprintf(&b, "  %v at %v (%d samples)\n", e.Kind, e.At, len(e.Audio))
	}
	return b.String()
}

// vadSpeechParts is the burst pattern of the segmenter tests: bursts of
// 300–1500 ms with fundamentals of 100–300 Hz, and pauses longer than the
// hang-over (800 ms minimum).
var vadSpeechParts = []vadPart{
	{1000, 0}, {800, 120}, {1200, 0}, {1500, 220}, {900, 0}, {300, 300},
	{1000, 0}, {1000, 100}, {800, 0}, {600, 180}, {1500, 0},
}

func TestSegmenterFindsSpeech(t *testing.T) {
	for _, noise := range []string{"", "white", "pink"} {
		name := noise
		if name == "" {
			name = "silence"
		}
		// Several noise draws: one lucky stream proves little, and pink
		// noise's slow swells are what a fixed floor trips over.
		for seed := uint64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprintf("%s seed %d", name, seed), func(t *testing.T) {
				stream, spans := vadStream(seed, noise, vadSpeechParts...)
				vadCheck(t, stream, spans, vadRun(stream, 0, SegmenterConfig{}), 60*time.Millisecond)
			})
		}
	}
}

func TestSegmenterIgnoresNoise(t *testing.T) {
	const n = 10 * SampleRate
	rng := rand.New(rand.NewPCG(7, 8))
	for name, x := range map[string][]float64{
		"digital silence":  make([]float64, n),
		"white -40 dBFS":   vadWhite(rng, n, -40),
		"pink -40 dBFS":    vadPink(rng, n, -40),
		"white -55 dBFS":   vadWhite(rng, n, -55),
		"white -30 dBFS":   vadWhite(rng, n, -30),
		"hum 50 Hz -35 dB": vadHum(n, -35),
	} {
		t.Run(name, func(t *testing.T) {
			if events := vadRun(vadToPCM(x), 0, SegmenterConfig{}); len(events) != 0 {
				t.Errorf("events in a stream without speech:\n%s", vadFormat(events))
			}
		})
	}
}

// A passing truck or a door slam's boom: low-frequency rumble swelling by
// 25 dB over the room noise. Level alone would call it speech; below the
// voice band, the detector's high-pass filter takes it out.
func TestSegmenterIgnoresRumble(t *testing.T) {
	x := vadWhite(rand.New(rand.NewPCG(18, 19)), 8*SampleRate, -45)
	for i := range x {
		t := float64(i) / SampleRate
		if t < 2 || t > 6 {
			continue
		}
		swell := 0.5 - 0.5*math.Cos(2*math.Pi*(t-2)/4) // 0 → 1 → 0 over 4 s
		amp := math.Pow(10, -20.0/20) * math.Sqrt2 * swell
		x[i] += amp * (math.Sin(2*math.Pi*35*t) + 0.5*math.Sin(2*math.Pi*22*t+1))
	}
	if events := vadRun(vadToPCM(x), 0, SegmenterConfig{}); len(events) != 0 {
		t.Errorf("events for a rumble:\n%s", vadFormat(events))
	}
	stream, spans := vadStream(20, "white", vadPart{3000, 0}, vadPart{900, 110}, vadPart{1000, 0})
	vadCheck(t, stream, spans, vadRun(stream, 0, SegmenterConfig{}), 60*time.Millisecond)
}

// vadHum is mains hum: 50 Hz with a little of its third harmonic.
func vadHum(n int, levelDB float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		t := float64(i) / SampleRate
		x[i] = math.Sin(2*math.Pi*50*t) + 0.3*math.Sin(2*math.Pi*150*t)
	}
	return vadScale(x, levelDB)
}

// A noise that starts mid-stream first looks like speech (the floor was
// set by the silence before); the stationarity rule must bring the floor
// up within about a second so that later speech is segmented normally.
func TestSegmenterAdaptsToNoiseStep(t *testing.T) {
	stream, spans := vadStream(3, "", vadPart{2000, 0}, vadPart{4000, 0}, vadPart{800, 150}, vadPart{1500, 0})
	x := make([]float64, len(stream)-2*SampleRate)
	vadAddNoise(4, "white", x, -40)
	for i, v := range vadToPCM(x) {
		stream[2*SampleRate+i] += v
	}
	events := vadRun(stream, 0, SegmenterConfig{})
	if len(events) != 4 {
		t.Fatalf("want one spurious utterance at the noise step and one for the burst, got:\n%s", vadFormat(events))
	}
	if end := events[1].At; end > 4*time.Second {
		t.Errorf("the noise was taken for speech until %v; the floor should adapt within ~1.5 s of the step at 2 s", end)
	}
	vadCheck(t, stream, spans, events[2:], 60*time.Millisecond)
}

func TestSegmenterCutsAtMaxMillis(t *testing.T) {
	stream, spans := vadStream(5, "white", vadPart{1000, 0}, vadPart{2900, 150}, vadPart{1000, 0})
	cfg := SegmenterConfig{MaxMillis: 1000}
	events := vadRun(stream, 0, cfg)
	// 200 ms pre-roll + 2900 ms burst + 600 ms hang = 3.7 s: three full
	// utterances, and the burst goes on at the third cut, so a fourth one.
	if len(events) != 8 {
		t.Fatalf("want 4 utterances, got:\n%s", vadFormat(events))
	}
	first := vadDur(spans[0].on) - 200*time.Millisecond
	var audio []int16
	for i := 0; i < len(events); i += 2 {
		start, end := events[i], events[i+1]
		if start.Kind != SpeechStart || end.Kind != SpeechEnd {
			t.Fatalf("events %d, %d are %v, %v; want start, end", i, i+1, start.Kind, end.Kind)
		}
		if i > 0 && start.At != events[i-1].At {
			t.Errorf("utterance %d starts at %v, not at the cut at %v", i/2, start.At, events[i-1].At)
		}
		if i < 6 && end.At-start.At != time.Second {
			t.Errorf("utterance %d lasts %v, want the 1 s maximum", i/2, end.At-start.At)
		}
		if i < 6 && len(end.Audio) != 1000*vadMs {
			t.Errorf("utterance %d has %d samples, want %d", i/2, len(end.Audio), 1000*vadMs)
		}
		audio = append(audio, end.Audio...)
	}
	if d := events[0].At - first; d < -60*time.Millisecond || d > 60*time.Millisecond {
		t.Errorf("first start at %v, want %v ± 60 ms", events[0].At, first)
	}
	lastEnd := events[7].At
	if want := vadDur(spans[0].off) + 600*time.Millisecond; lastEnd-want < -60*time.Millisecond || lastEnd-want > 60*time.Millisecond {
		t.Errorf("last end at %v, want %v ± 60 ms", lastEnd, want)
	}
	from := int(events[0].At / (time.Second / SampleRate))
	if !slices.Equal(audio, stream[from:from+len(audio)]) || from+len(audio) != int(lastEnd/(time.Second/SampleRate)) {
		t.Error("the utterances together are not the stream from the first start to the last end")
	}

	// A cut that falls in the hang-over, after the speech, just ends it.
	stream, _ = vadStream(6, "white", vadPart{1000, 0}, vadPart{2600, 150}, vadPart{1000, 0})
	events = vadRun(stream, 0, cfg)
	if len(events) != 6 || events[5].At-events[4].At != time.Second {
		t.Errorf("a 2.6 s burst with a 1 s maximum: want 3 utterances of 1 s, got:\n%s", vadFormat(events))
	}
}

func TestSegmenterChunkingInvariance(t *testing.T) {
	stream, _ := vadStream(9, "pink", vadSpeechParts...)
	// A stream that ends in the middle of a burst, off a frame boundary.
	stream = stream[:len(stream)-1200*vadMs-7]
	whole := vadRun(stream, 0, SegmenterConfig{})
	if len(whole) == 0 {
		t.Fatal("no events at all")
	}
	for _, chunk := range []int{1, 7, 160, 320, 333, 4096} {
		if got := vadRun(stream, chunk, SegmenterConfig{}); !reflect.DeepEqual(got, whole) {
			t.Errorf("chunks of %d samples:\n%swhole:\n%s", chunk, vadFormat(got), vadFormat(whole))
		}
	}
	rng := rand.New(rand.NewPCG(10, 11))
	s := NewSegmenter(NewEnergyDetector(EnergyConfig{}), SegmenterConfig{})
	var got []Event
	for rest := stream; len(rest) > 0; {
		n := min(len(rest), rng.IntN(2000))
		got = append(got, s.Feed(rest[:n])...)
		rest = rest[n:]
	}
	if got = append(got, s.Flush()...); !reflect.DeepEqual(got, whole) {
		t.Errorf("random chunks:\n%swhole:\n%s", vadFormat(got), vadFormat(whole))
	}
}

func TestSegmenterFlushEndsOpenUtterance(t *testing.T) {
	stream, spans := vadStream(12, "white", vadPart{1000, 0}, vadPart{700, 200})
	stream = stream[:len(stream)-5] // off a frame boundary
	s := NewSegmenter(NewEnergyDetector(EnergyConfig{}), SegmenterConfig{})
	for round := range 2 { // Flush starts a new stream at position 0
		events := s.Feed(stream)
		if len(events) != 1 || events[0].Kind != SpeechStart {
			t.Fatalf("round %d: Feed gave\n%swant one start", round, vadFormat(events))
		}
		ends := s.Flush()
		if len(ends) != 1 || ends[0].Kind != SpeechEnd {
			t.Fatalf("round %d: Flush gave\n%swant one end", round, vadFormat(ends))
		}
		if want := vadDur(len(stream)); ends[0].At != want {
			t.Errorf("round %d: end at %v, want the end of the stream at %v", round, ends[0].At, want)
		}
		from := int(events[0].At / (time.Second / SampleRate))
		if !slices.Equal(ends[0].Audio, stream[from:]) {
			t.Errorf("round %d: audio of %d samples, want the %d from the start", round, len(ends[0].Audio), len(stream)-from)
		}
		if d := events[0].At - (vadDur(spans[0].on) - 200*time.Millisecond); d < -60*time.Millisecond || d > 60*time.Millisecond {
			t.Errorf("round %d: start at %v", round, events[0].At)
		}
	}
	if events := s.Flush(); len(events) != 0 {
		t.Errorf("Flush with nothing open gave\n%s", vadFormat(events))
	}
}

func TestSegmenterReset(t *testing.T) {
	stream, _ := vadStream(13, "white", vadSpeechParts...)
	want := vadRun(stream, 0, SegmenterConfig{})
	s := NewSegmenter(NewEnergyDetector(EnergyConfig{}), SegmenterConfig{})
	s.Feed(stream[:len(stream)/3]) // leave something open or half-done
	s.Reset()
	got := append(s.Feed(stream), s.Flush()...)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after Reset:\n%swant:\n%s", vadFormat(got), vadFormat(want))
	}
}

func TestEnergyDetector(t *testing.T) {
	frame := 20 * vadMs
	rng := rand.New(rand.NewPCG(14, 15))
	feed := func(d Detector, x []float64) (speech int) {
		pcm := vadToPCM(x)
		for i := 0; i+frame <= len(pcm); i += frame {
			if d.Speech(pcm[i : i+frame]) {
				speech++
			}
		}
		return speech
	}
	tone := func(levelDB float64) []float64 { // steady, no envelope swings
		x := make([]float64, 300*vadMs)
		for i := range x {
			x[i] = math.Sin(2 * math.Pi * 200 * float64(i) / SampleRate)
		}
		return vadScale(x, levelDB)
	}

	d := NewEnergyDetector(EnergyConfig{})
	if n := feed(d, make([]float64, SampleRate)); n != 0 {
		t.Errorf("digital silence: %d speech frames", n)
	}
	if n := feed(d, tone(-60)); n != 0 {
		t.Errorf("a -60 dBFS tone after silence: %d speech frames; it is below the absolute minimum", n)
	}
	if n := feed(d, tone(-30)); n != 15 {
		t.Errorf("a -30 dBFS tone after silence: %d of 15 frames speech", n)
	}

	d = NewEnergyDetector(EnergyConfig{})
	if n := feed(d, vadWhite(rng, 2*SampleRate, -40)); n != 0 {
		t.Errorf("white noise: %d speech frames", n)
	}
	// 15 dB over the floor: enough for a voiced sound, not for hiss.
	if n := feed(d, vadWhite(rng, 300*vadMs, -25)); n != 0 {
		t.Errorf("hiss 15 dB over the noise: %d speech frames", n)
	}
	feed(d, vadWhite(rng, 2*SampleRate, -40))
	if n := feed(d, tone(-25)); n != 15 {
		t.Errorf("a tone 15 dB over the noise: %d of 15 frames speech", n)
	}
	feed(d, vadWhite(rng, 2*SampleRate, -40))
	if n := feed(d, tone(-32)); n != 0 {
		t.Errorf("a tone 8 dB over the noise: %d speech frames, want none (margin 10 dB)", n)
	}
}

// TestSegmenterRealSpeech runs espeak-ng's voice (22050 Hz, through the
// Resampler) padded with a second of noise on each side: one utterance,
// bounded like the speech.
func TestSegmenterRealSpeech(t *testing.T) {
	testkit.External(t, "espeak-ng")
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("espeak-ng is not installed (apt-get install espeak-ng)")
		}
		t.Skip("espeak-ng is not installed")
	}
	path := filepath.Join(t.TempDir(), "speech.wav")
	const sentence = "Hello there. This is a short test of the voice activity detector in koe."
	if out, err := exec.Command("espeak-ng", "-w", path, sentence).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v\n%s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	samples, rate := vadReadWAV(t, data)
	r, err := NewResampler(rate, SampleRate)
	if err != nil {
		t.Fatal(err)
	}
	speech := append(r.Process(samples), r.Flush()...)

	// The speech's bounds: the first and last sample above -40 dBFS.
	on := slices.IndexFunc(speech, func(s int16) bool { return s > 328 || s < -328 })
	off := len(speech)
	for off > 0 && speech[off-1] <= 328 && speech[off-1] >= -328 {
		off--
	}
	if on < 0 || off-on < SampleRate {
		t.Fatalf("espeak-ng made %d samples at %d Hz with no second of speech", len(samples), rate)
	}

	for _, noise := range []string{"silence", "white", "pink"} {
		t.Run(noise, func(t *testing.T) {
			x := make([]float64, SampleRate+len(speech)+SampleRate)
			for i, s := range speech {
				x[SampleRate+i] = float64(s) / 32768
			}
			vadAddNoise(16, noise, x, -45)
			stream := vadToPCM(x)
			events := vadRun(stream, 320, SegmenterConfig{})
			vadCheck(t, stream, []vadSpan{{SampleRate + on, SampleRate + off}}, events, 150*time.Millisecond)
			if len(events) == 2 {
				t.Logf("speech %v..%v; utterance %v..%v", vadDur(SampleRate+on), vadDur(SampleRate+off), events[0].At, events[1].At)
			}
		})
	}
}

// vadReadWAV reads a 16-bit mono PCM WAV such as espeak-ng writes,
// tolerating the placeholder sizes of streaming writers.
func vadReadWAV(t *testing.T, b []byte) ([]int16, int) {
	t.Helper()
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		t.Fatal("not a RIFF/WAVE file")
	}
	le := binary.LittleEndian
	rate := 0
	for off := 12; off+8 <= len(b); {
		id, size := string(b[off:off+4]), int(le.Uint32(b[off+4:off+8]))
		body := b[off+8:]
		size = min(size, len(body))
		switch id {
		case "fmt ":
			if tag, ch, bits := le.Uint16(body[0:2]), le.Uint16(body[2:4]), le.Uint16(body[14:16]); tag != 1 || ch != 1 || bits != 16 {
				t.Fatalf("WAV is format %d, %d channels, %d bits; want 16-bit mono PCM", tag, ch, bits)
			}
			rate = int(le.Uint32(body[4:8]))
		case "data":
			if rate == 0 {
				t.Fatal("data chunk before fmt")
			}
			pcm, err := PCM16FromBytes(body[:size/2*2])
			if err != nil {
				t.Fatal(err)
			}
			return pcm, rate
		}
		off += 8 + size + size%2
	}
	t.Fatal("no data chunk")
	return nil, 0
}

// BenchmarkVAD measures the segmenter and energy detector on a speech-like
// stream over noise, fed in 20 ms chunks: the cost per second of audio and
// how many real-time streams that leaves one core.
func BenchmarkVAD(b *testing.B) {
	stream, _ := vadStream(17, "white", vadSpeechParts...)
	seconds := float64(len(stream)) / SampleRate
	s := NewSegmenter(NewEnergyDetector(EnergyConfig{}), SegmenterConfig{})
	chunk := 20 * vadMs
	b.ReportAllocs()
	b.ResetTimer()
	runs := 0
	for b.Loop() {
		for i := 0; i < len(stream); i += chunk {
			s.Feed(stream[i:min(i+chunk, len(stream))])
		}
		s.Flush()
		runs++
	}
	ns := float64(b.Elapsed().Nanoseconds()) / (float64(runs) * seconds)
	b.ReportMetric(ns, "ns/audio-s")
	b.ReportMetric(1e9/ns, "streams/core")
}
