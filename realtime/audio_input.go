package realtime

import (
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"koe/asr"
)

// minCommitMillis is the least audio a commit takes, as in the API: less
// is a click, not something said.
const minCommitMillis = 100

// errInputFull begins the error of an append past the buffer's limit.
var errInputFull = errors.New("the input audio buffer is full")

// InputKind says what an InputEvent reports.
type InputKind int

const (
	// SpeechStarted: input_audio_buffer.speech_started.
	SpeechStarted InputKind = iota + 1
	// SpeechStopped: input_audio_buffer.speech_stopped.
	SpeechStopped
	// Committed: input_audio_buffer.committed; Audio holds what was
	// committed.
	Committed
)

func (k InputKind) String() string {
	switch k {
	case SpeechStarted:
		return "speech_started"
	case SpeechStopped:
		return "speech_stopped"
	case Committed:
		return "committed"
	}
	return "unknown"
}

// InputEvent is what the input buffer reports, in order.
type InputEvent struct {
	Kind InputKind
	// AudioStartMs (SpeechStarted) and AudioEndMs (SpeechStopped) are
	// positions in all the audio appended in the session, in
	// milliseconds: the start includes prefix_padding_ms, the end
	// silence_duration_ms, as the API defines them.
	AudioStartMs, AudioEndMs int
	// Audio is the committed audio, 16 kHz mono (asr.SampleRate), for a
	// Committed event; it belongs to the receiver.
	Audio []int16
}

// Input is a session's input audio buffer: appended chunks are decoded
// from the input format and resampled to koe's 16 kHz as they come. With
// turn detection off they pile up until Commit; with it on, asr's
// segmenter cuts them into utterances, each committed when its speech
// ends (non-speech in between is dropped as it goes). Only the
// connection's read loop uses it, so it has no lock.
type Input struct {
	format   audioFormat
	res      *asr.Resampler // format → 16 kHz; nil until needed
	cut      []byte         // an odd byte of PCM awaiting its pair
	limit    time.Duration  // the most the buffer holds, and an utterance lasts
	defaults VADDefaults

	td  *TurnDetection
	seg *asr.Segmenter // non-nil with turn detection

	buf  []int16 // manual: the uncommitted audio, 16 kHz
	base int64   // 16 kHz samples of the session before the segmenter's position 0
	fed  int64   // 16 kHz samples fed to the segmenter since its last reset
	open bool    // the segmenter is inside an utterance

	scratch []int16
}

// NewInput returns an empty buffer in the API's default format with turn
// detection off. limit (conversation.max_utterance) bounds what the buffer
// holds before a commit, and an utterance the detector hears: a longer
// one is cut there.
func NewInput(limit time.Duration, defaults VADDefaults) *Input {
	defaults.MaxMillis = int(limit.Milliseconds())
	return &Input{format: formatPCM, limit: limit, defaults: defaults}
}

// SetFormat changes the input format (one of session.go's). Audio already appended stays in the
// buffer, as it was heard; a byte left of a cut sample is dropped.
func (in *Input) SetFormat(f audioFormat) {
	if f == in.format {
		return
	}
	in.dropResampler()
	in.format, in.res, in.cut = f, nil, nil
}

// TurnDetection is the buffer's turn detection (nil: manual commits).
func (in *Input) TurnDetection() *TurnDetection { return in.td }

// SetTurnDetection switches turn detection on, off (nil) or to other
// settings. Whatever was buffered is dropped as by Clear: half an
// utterance heard under other settings is not carried over. It reports
// the events of the switch: none, as the API defines none.
func (in *Input) SetTurnDetection(td *TurnDetection) {
	in.Clear()
	in.td, in.seg = td, nil
	if td != nil {
		in.seg = td.segmenter(in.defaults)
	}
}

// Append decodes a base64 chunk of audio in the input format. Bad base64
// is an error and changes nothing; so is a chunk that would take an
// uncommitted buffer past the limit. The events are those the chunk
// completes with turn detection on.
func (in *Input) Append(b64 string) ([]InputEvent, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("audio is not valid base64: %w", err)
	}
	if in.td == nil {
		// What the chunk adds, at 16 kHz, rounded up.
		samples := (len(in.cut) + len(raw)) / in.format.bytesPerSample()
		add := (int64(samples)*asr.SampleRate + int64(in.format.rate) - 1) / int64(in.format.rate)
		if have := int64(len(in.buf)); float64(have+add) > in.limit.Seconds()*asr.SampleRate {
			return nil, fmt.Errorf("%w: it would hold more than %s of audio (conversation.max_utterance); commit or clear it first", errInputFull, in.limit)
		}
	}
	if len(in.cut) > 0 {
		raw = append(in.cut, raw...)
		in.cut = nil
	}
	var rest []byte
	in.scratch, rest = in.format.decode(in.scratch[:0], raw)
	if len(rest) > 0 {
		in.cut = append([]byte(nil), rest...)
	}
	return in.take(in.resample(in.scratch)), nil
}

// resample brings samples to 16 kHz.
func (in *Input) resample(samples []int16) []int16 {
	if in.format.rate == asr.SampleRate {
		return samples
	}
	if in.res == nil {
		// The API's rates (24 and 8 kHz) are among the resampler's.
		in.res, _ = asr.NewResampler(in.format.rate, asr.SampleRate)
	}
	return in.res.Process(samples)
}

// flushResampler takes the end of the stream the resampler holds back.
func (in *Input) flushResampler() []InputEvent {
	if in.res == nil {
		return nil
	}
	return in.take(in.res.Flush())
}

// dropResampler ends the resampler's stream without hearing its last few
// milliseconds, but counts them, so positions stay true.
func (in *Input) dropResampler() {
	if in.res != nil {
		in.fed += int64(len(in.res.Flush()))
	}
}

// take puts 16 kHz samples in the buffer, or through the detector.
func (in *Input) take(samples []int16) []InputEvent {
	in.fed += int64(len(samples))
	if in.seg == nil {
		in.buf = append(in.buf, samples...)
		return nil
	}
	return in.events(in.seg.Feed(samples))
}

// events turns the segmenter's events into the API's.
func (in *Input) events(evs []asr.Event) []InputEvent {
	var out []InputEvent
	for _, ev := range evs {
		at := int((time.Duration(in.base)*time.Second/asr.SampleRate + ev.At).Milliseconds())
		switch ev.Kind {
		case asr.SpeechStart:
			in.open = true
			out = append(out, InputEvent{Kind: SpeechStarted, AudioStartMs: at})
		case asr.SpeechEnd:
			in.open = false
			out = append(out,
				InputEvent{Kind: SpeechStopped, AudioEndMs: at},
				InputEvent{Kind: Committed, Audio: ev.Audio})
		}
	}
	return out
}

// Commit commits the buffer. With turn detection off that is everything
// appended since the last commit or clear (at least 100 ms of it); with it
// on, the utterance being heard, ended here (speech_stopped, then
// committed). Too little audio is an error and changes nothing.
func (in *Input) Commit() ([]InputEvent, error) {
	if in.seg == nil {
		evs := in.flushResampler()
		if ms := len(in.buf) * 1000 / asr.SampleRate; ms < minCommitMillis {
			return evs, fmt.Errorf("the input audio buffer holds %d ms of audio; a commit needs at least %d ms", ms, minCommitMillis)
		}
		audio := in.buf
		in.buf = nil
		return append(evs, InputEvent{Kind: Committed, Audio: audio}), nil
	}
	evs := in.flushResampler()
	if !in.open {
		return evs, fmt.Errorf("the input audio buffer holds no speech to commit; with turn_detection on, koe commits each utterance when its speech ends")
	}
	evs = append(evs, in.events(in.seg.Flush())...)
	in.restart()
	return evs, nil
}

// restart moves the segmenter's position 0 to where the session's audio
// is now (Flush and Reset start it over).
func (in *Input) restart() {
	in.base += in.fed
	in.fed = 0
	in.open = false
}

// Clear drops what is buffered: the audio of a manual buffer, or the
// utterance the detector is in (the detector starts over, and the next
// speech gets a new speech_started).
func (in *Input) Clear() {
	in.dropResampler()
	in.cut = nil
	in.buf = nil
	if in.seg != nil {
		in.seg.Reset()
	}
	in.restart()
}

// Speaking says whether the detector is inside an utterance.
func (in *Input) Speaking() bool { return in.open }
