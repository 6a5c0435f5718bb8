package asr

import (
	"math"
	"time"
)

// Detector decides, one frame of 16 kHz audio at a time, whether the frame
// is speech. Implementations may adapt to the stream (a noise floor), so a
// Detector belongs to one stream and is not safe for concurrent use. One
// that also has a Reset() method is reset by Segmenter.Reset.
type Detector interface {
	Speech(frame []int16) bool
}

// EnergyConfig tunes the energy detector. Zero fields take the defaults in
// brackets, which suit a browser microphone in a room.
type EnergyConfig struct {
	// FrameMillis is the frame length the detector is fed: 10, 20 or 30 ms
	// [20]. Its time constants follow the length of the frames it actually
	// gets, so a mismatch only changes the stationarity window.
	FrameMillis int
	// MarginDB is how far above the noise floor a frame's level must be to
	// count as speech [10 dB]: well above the ±1–3 dB wander of steady
	// noise's frame levels, well below the 20–40 dB a voice rises over it.
	MarginDB float64
	// MinDBFS is the level a frame must reach to be speech at all, however
	// quiet the room [-50 dBFS]. Over digital silence the floor drops to
	// nothing and this alone decides; speech into a working microphone
	// sits around -35 to -15 dBFS.
	MinDBFS float64
	// HissZCR is the zero-crossing rate (crossings per sample pair) above
	// which a frame sounds like hiss rather than voice [0.35]: white noise
	// crosses at 0.5, voiced speech at 16 kHz at 0.01–0.15, and only
	// fricatives approach hiss. Such frames need HissMarginDB more level.
	HissZCR float64
	// HissMarginDB is the extra margin for hiss-like frames [10 dB]: a
	// breath, a rustle or static must be much louder than a voiced sound
	// to start an utterance, while a loud "s" still counts.
	HissMarginDB float64
}

// Defaults and fixed constants of the energy detector.
const (
	energyDefaultFrameMillis = 20
	energyDefaultMarginDB    = 10.0
	energyDefaultMinDBFS     = -50.0
	energyDefaultHissZCR     = 0.35
	energyDefaultHissMargin  = 10.0

	// energySilenceDBFS is the level given to digital silence (and the
	// lowest level reported): below the -90 dBFS of one LSB of 16 bits.
	energySilenceDBFS = -100.0
	// The noise floor falls quickly when the level drops below it
	// (energyFallTau) and rises slowly towards non-speech frames above it
	// (energyRiseTau), so it sits at the bottom of the noise and a pause of
	// a few frames re-anchors it, while short loud events hardly move it.
	energyFallTau = 60 * time.Millisecond
	energyRiseTau = 2 * time.Second
	// energyFallSpan is how many recent frames the falling floor follows
	// the loudest of: a single dropout frame does not pull it down.
	energyFallSpan = 3
	// A stream whose frame levels have all stayed within energyStationaryDB
	// of each other for energyStationaryWindow is noise, not voice (speech
	// swings by 10 dB and more between syllables): the floor jumps up to
	// it. This recovers from a noise that starts or steps up mid-stream,
	// which the slow rise alone would take tens of seconds to follow
	// because frames over the margin do not raise the floor.
	energyStationaryDB     = 4.0
	energyStationaryWindow = time.Second
	// energyHighPassHz is the corner of the 2nd-order Butterworth high-pass
	// filter the levels are measured through. Below it lie DC offsets,
	// mains hum, handling and HVAC rumble and the slow swell of room
	// noise, which would otherwise move frame levels by several dB; a
	// voice has little there (its fundamental is 85–300 Hz and most of
	// its energy sits in the harmonics above).
	energyHighPassHz = 100.0
)

// NewEnergyDetector returns an adaptive energy and zero-crossing detector.
// Per frame it measures, through a 100 Hz high-pass filter, the RMS level
// (dBFS) and the zero-crossing rate; a frame is speech when its level is
// at least MinDBFS and MarginDB above the tracked noise floor (HissMarginDB
// more for hiss-like frames). The floor starts at the first frame's level,
// so a stream should begin before the speaker does (a microphone stream
// does); if it begins mid-word, the onset is found at the next pause.
func NewEnergyDetector(cfg EnergyConfig) Detector {
	if cfg.FrameMillis <= 0 {
		cfg.FrameMillis = energyDefaultFrameMillis
	}
	cfg.FrameMillis = max(10, min(30, cfg.FrameMillis))
	if cfg.MarginDB <= 0 {
		cfg.MarginDB = energyDefaultMarginDB
	}
	if cfg.MinDBFS == 0 {
		cfg.MinDBFS = energyDefaultMinDBFS
	}
	if cfg.HissZCR <= 0 {
		cfg.HissZCR = energyDefaultHissZCR
	}
	if cfg.HissMarginDB <= 0 {
		cfg.HissMarginDB = energyDefaultHissMargin
	}
	window := int(energyStationaryWindow / (time.Duration(cfg.FrameMillis) * time.Millisecond))
	return &energyDetector{
		cfg:    cfg,
		hp:     newEnergyHighPass(energyHighPassHz),
		levels: make([]float64, max(window, energyFallSpan)),
	}
}

type energyDetector struct {
	cfg    EnergyConfig
	hp     energyHighPass
	buf    []float64 // the current frame, high-passed
	floor  float64   // dBFS
	primed bool      // floor holds a measurement
	levels []float64 // ring of the latest frame levels
	next   int       // where the next level goes in levels
	seen   int       // levels filled, up to len(levels)
}

// Reset forgets the noise floor, for a new stream.
func (d *energyDetector) Reset() {
	d.primed, d.next, d.seen = false, 0, 0
	d.hp.reset()
}

func (d *energyDetector) Speech(frame []int16) bool {
	if len(frame) == 0 {
		return false
	}
	d.buf = d.hp.filter(d.buf[:0], frame)
	level, zcr := energyFrameStats(d.buf)
	if !d.primed {
		d.floor, d.primed = level, true
	}
	d.levels[d.next] = level
	d.next = (d.next + 1) % len(d.levels)
	d.seen = min(d.seen+1, len(d.levels))

	margin := d.cfg.MarginDB
	if zcr > d.cfg.HissZCR {
		margin += d.cfg.HissMarginDB
	}
	speech := level >= d.cfg.MinDBFS && level >= d.floor+margin

	dt := time.Duration(len(frame)) * time.Second / SampleRate
	if recent := d.loudestRecent(energyFallSpan); recent < d.floor {
		d.floor += (recent - d.floor) * (1 - math.Exp(-float64(dt)/float64(energyFallTau)))
	} else if !speech && level > d.floor {
		d.floor += (level - d.floor) * (1 - math.Exp(-float64(dt)/float64(energyRiseTau)))
	}
	if d.seen == len(d.levels) {
		lo, hi := d.levels[0], d.levels[0]
		for _, l := range d.levels[1:] {
			lo, hi = min(lo, l), max(hi, l)
		}
		if hi-lo <= energyStationaryDB && lo > d.floor {
			d.floor = lo
		}
	}
	return speech
}

// loudestRecent is the highest of the last n frame levels.
func (d *energyDetector) loudestRecent(n int) float64 {
	n = min(n, d.seen)
	hi := math.Inf(-1)
	for i := 1; i <= n; i++ {
		hi = max(hi, d.levels[(d.next-i+len(d.levels))%len(d.levels)])
	}
	return hi
}

// energyFrameStats returns a frame's RMS level in dBFS (full scale = 32768)
// and its zero-crossing rate: sign changes per pair of adjacent samples.
func energyFrameStats(frame []float64) (level, zcr float64) {
	var sum float64
	crossings := 0
	prevNeg := frame[0] < 0
	for _, v := range frame {
		sum += v * v
		neg := v < 0
		if neg != prevNeg {
			crossings++
		}
		prevNeg = neg
	}
	level = energySilenceDBFS
	if ms := sum / float64(len(frame)); ms > 0 {
		level = max(energySilenceDBFS, 10*math.Log10(ms/(32768*32768)))
	}
	if len(frame) > 1 {
		zcr = float64(crossings) / float64(len(frame)-1)
	}
	return level, zcr
}

// energyHighPass is a 2nd-order Butterworth high-pass biquad at 16 kHz
// (direct form I), carrying its state from frame to frame.
type energyHighPass struct {
	b0, b1, b2, a1, a2 float64 // normalised so that a0 = 1
	x1, x2, y1, y2     float64
}

// newEnergyHighPass designs the filter by the bilinear transform (the
// audio-EQ cookbook form) with Q = 1/√2.
func newEnergyHighPass(corner float64) energyHighPass {
	w := 2 * math.Pi * corner / SampleRate
	cos, alpha := math.Cos(w), math.Sin(w)/math.Sqrt2
	a0 := 1 + alpha
	return energyHighPass{
		b0: (1 + cos) / 2 / a0,
		b1: -(1 + cos) / a0,
		b2: (1 + cos) / 2 / a0,
		a1: -2 * cos / a0,
		a2: (1 - alpha) / a0,
	}
}

func (h *energyHighPass) reset() { h.x1, h.x2, h.y1, h.y2 = 0, 0, 0, 0 }

// filter appends the filtered frame to dst.
func (h *energyHighPass) filter(dst []float64, frame []int16) []float64 {
	for _, s := range frame {
		x := float64(s)
		y := h.b0*x + h.b1*h.x1 + h.b2*h.x2 - h.a1*h.y1 - h.a2*h.y2
		h.x2, h.x1 = h.x1, x
		h.y2, h.y1 = h.y1, y
		dst = append(dst, y)
	}
	return dst
}

// SegmenterConfig tunes how a stream is cut into utterances. Zero or
// negative fields take the defaults in brackets.
type SegmenterConfig struct {
	FrameMillis   int // analysis frame: 10, 20 or 30 ms [20]
	StartMillis   int // speech must last this long to start an utterance [100]
	HangMillis    int // silence this long ends it [600]
	PreRollMillis int // audio kept before the detected start [200]
	// MaxMillis: an utterance this long is cut [30000]. It is raised to
	// what an utterance needs to start and go on for one more frame (the
	// pre-roll, StartMillis and a frame) when it is set below that.
	MaxMillis int
}

// Segmenter defaults.
const (
	segmentDefaultFrameMillis = 20
	segmentDefaultStartMillis = 100
	segmentDefaultHangMillis  = 600
	segmentDefaultPreRoll     = 200
	segmentDefaultMaxMillis   = 30000
)

// EventKind says what a segmenter Event reports.
type EventKind int

const (
	// SpeechStart: an utterance began (sent once speech has lasted
	// StartMillis; At is its start, pre-roll included).
	SpeechStart EventKind = iota + 1
	// SpeechEnd: the utterance ended (after HangMillis of silence, at
	// MaxMillis, or at Flush); At is where, and Audio holds it.
	SpeechEnd
)

func (k EventKind) String() string {
	switch k {
	case SpeechStart:
		return "speech-start"
	case SpeechEnd:
		return "speech-end"
	}
	return "unknown"
}

// Event is what the segmenter reports.
type Event struct {
	Kind EventKind
	// At is the stream position (time since the first sample fed) of the
	// utterance's start, pre-roll included, for SpeechStart; for SpeechEnd
	// it is where the utterance was closed: HangMillis after the last
	// speech frame, the MaxMillis cut, or the end of the stream.
	At time.Duration
	// Audio, for SpeechEnd only, is the whole utterance: the samples from
	// the start event's At up to this event's At, trailing silence (the
	// hang-over) included. The slice belongs to the receiver.
	Audio []int16
}

// Segmenter cuts a continuous 16 kHz mono stream into utterances with a
// Detector: an utterance starts when StartMillis of consecutive frames are
// speech (its audio then reaches PreRollMillis further back, so the first
// syllable's onset is kept) and ends after HangMillis of consecutive
// non-speech frames, or when it reaches MaxMillis; if speech is still going
// on at the cut, the next utterance starts right there, so no audio is
// lost. Events depend only on the samples, never on how they were chunked.
// A Segmenter is not safe for concurrent use.
type Segmenter struct {
	d           Detector
	frame       int // samples per analysis frame
	startFrames int // consecutive speech frames that start an utterance
	hangFrames  int // consecutive non-speech frames that end it
	preRoll     int // samples
	maxLen      int // samples

	pending []int16 // samples of an incomplete frame
	pos     int64   // samples analysed (in complete frames)

	inSpeech bool
	run      int // consecutive speech frames (idle) or non-speech frames (in speech)

	// While idle, recent holds the last samples back to recentStart, no
	// further than the end of the previous utterance: enough for the
	// pre-roll and the frames of a starting run. While in an utterance it
	// holds the utterance from recentStart.
	recent      []int16
	recentStart int64
}

// NewSegmenter returns a Segmenter that asks d about each frame.
func NewSegmenter(d Detector, cfg SegmenterConfig) *Segmenter {
	def := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	frameMs := max(10, min(30, def(cfg.FrameMillis, segmentDefaultFrameMillis)))
	startMs := def(cfg.StartMillis, segmentDefaultStartMillis)
	hangMs := def(cfg.HangMillis, segmentDefaultHangMillis)
	preMs := def(cfg.PreRollMillis, segmentDefaultPreRoll)
	maxMs := def(cfg.MaxMillis, segmentDefaultMaxMillis)
	const perMs = SampleRate / 1000
	s := &Segmenter{
		d:           d,
		frame:       frameMs * perMs,
		startFrames: (startMs + frameMs - 1) / frameMs,
		hangFrames:  (hangMs + frameMs - 1) / frameMs,
		preRoll:     preMs * perMs,
	}
	// An utterance must be able to hold its pre-roll, its starting run and
	// one more frame before a cut.
	s.maxLen = max(maxMs*perMs, s.preRoll+(s.startFrames+1)*s.frame)
	return s
}

// Feed analyses the next samples of the stream, of any length, and returns
// the events they complete (usually none).
func (s *Segmenter) Feed(samples []int16) []Event {
	var events []Event
	for len(samples) > 0 {
		if len(s.pending) == 0 && len(samples) >= s.frame {
			// Whole frames straight from the input, no copy.
			events = s.step(samples[:s.frame], events)
			samples = samples[s.frame:]
			continue
		}
		n := min(s.frame-len(s.pending), len(samples))
		s.pending = append(s.pending, samples[:n]...)
		samples = samples[n:]
		if len(s.pending) == s.frame {
			events = s.step(s.pending, events)
			s.pending = s.pending[:0]
		}
	}
	return events
}

// Flush ends the stream: an open utterance ends at the last sample (a
// partial last frame included) and the Segmenter starts over at position 0.
// If the partial frame takes the utterance past MaxMillis, it is cut there
// as Feed would cut it, and what follows the cut becomes an utterance of
// its own if the last whole frame was speech (it is trailing silence
// otherwise, dropped like any silence).
func (s *Segmenter) Flush() []Event {
	var events []Event
	if s.inSpeech {
		tail := s.pending
		if room := s.maxLen - len(s.recent); len(tail) > room {
			s.recent = append(s.recent, tail[:room]...)
			cut := s.pos + int64(room)
			speaking := s.run == 0 // no non-speech frame since the last speech
			events = append(events, s.endEvent(cut))
			tail = tail[room:]
			if speaking {
				s.inSpeech = true
				events = append(events, Event{Kind: SpeechStart, At: segmentAt(cut)})
			}
		}
		if s.inSpeech {
			s.recent = append(s.recent, tail...)
			events = append(events, s.endEvent(s.pos+int64(len(s.pending))))
		}
	}
	s.Reset()
	return events
}

// Reset forgets the stream, and the detector's adaptation if it has a
// Reset method: the next sample fed is position 0 of a new stream.
func (s *Segmenter) Reset() {
	s.pending = s.pending[:0]
	s.pos = 0
	s.inSpeech = false
	s.run = 0
	s.recent = s.recent[:0]
	s.recentStart = 0
	if r, ok := s.d.(interface{ Reset() }); ok {
		r.Reset()
	}
}

// step analyses one whole frame at s.pos.
func (s *Segmenter) step(frame []int16, events []Event) []Event {
	speech := s.d.Speech(frame)
	frameStart := s.pos
	s.pos += int64(len(frame))

	if !s.inSpeech {
		s.recent = append(s.recent, frame...)
		if speech {
			s.run++
		} else {
			s.run = 0
		}
		if s.run >= s.startFrames {
			onset := frameStart - int64((s.run-1)*s.frame)
			start := max(s.recentStart, onset-int64(s.preRoll))
			s.recent = s.recent[:copy(s.recent, s.recent[start-s.recentStart:])]
			s.recentStart = start
			s.inSpeech, s.run = true, 0
			events = append(events, Event{Kind: SpeechStart, At: segmentAt(start)})
		} else if keep := s.preRoll + s.startFrames*s.frame; len(s.recent) >= 2*keep {
			drop := len(s.recent) - keep
			s.recent = s.recent[:copy(s.recent, s.recent[drop:])]
			s.recentStart += int64(drop)
		}
		return events
	}

	if speech {
		s.run = 0
	} else {
		s.run++
	}
	if room := s.maxLen - len(s.recent); room <= len(frame) {
		// The utterance reaches MaxMillis within this frame: cut it there.
		s.recent = append(s.recent, frame[:room]...)
		cut := frameStart + int64(room)
		events = append(events, s.endEvent(cut))
		rest := frame[room:]
		s.recent = append(s.recent[:0], rest...)
		s.recentStart = cut
		if speech {
			s.inSpeech, s.run = true, 0
			events = append(events, Event{Kind: SpeechStart, At: segmentAt(cut)})
		}
		return events
	}
	s.recent = append(s.recent, frame...)
	if s.run >= s.hangFrames {
		events = append(events, s.endEvent(s.pos))
	}
	return events
}

// endEvent closes the utterance in s.recent at end and leaves the Segmenter
// idle, with nothing before end available as pre-roll.
func (s *Segmenter) endEvent(end int64) Event {
	audio := make([]int16, len(s.recent))
	copy(audio, s.recent)
	s.recent = s.recent[:0]
	s.recentStart = end
	s.inSpeech, s.run = false, 0
	return Event{Kind: SpeechEnd, At: segmentAt(end), Audio: audio}
}

// segmentAt converts a sample position to a stream time, exactly (one
// sample is 62.5 µs).
func segmentAt(samples int64) time.Duration {
	return time.Duration(samples) * time.Second / SampleRate
}
