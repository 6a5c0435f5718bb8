package conversation

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"koe/asr"
	"koe/internal/quote"
	"koe/protocol"
)

// Transcriber is the speech recogniser as a session uses it.
type Transcriber interface {
	Transcribe(ctx context.Context, wav []byte) (string, error)
}

// defaultRawRate is the rate of the continuous stream until the client
// declares another with raw-audio-config.
const defaultRawRate = asr.SampleRate

// voice is a session's microphone input: the utterance being recorded
// (mic-audio-data chunks) and the continuous stream with server-side voice
// detection (raw-audio-data, binary PCM frames). Only the connection's
// read loop touches it, so it has no lock; what it decides (start a turn,
// barge in) goes through its session's turn state machine.
type voice struct {
	s    *Session
	mic  []int16 // the utterance so far, 16 kHz
	rate int     // the continuous stream's rate, from raw-audio-config only
	raw  *rawStream
}

// rawStream is the continuous stream resampled to 16 kHz and cut into
// utterances.
type rawStream struct {
	resampler *asr.Resampler // nil at 16 kHz
	segmenter *asr.Segmenter
	// last is the latest utterance, kept while its turn is still being
	// transcribed; carry is what a resumed utterance continues.
	last, carry []int16
}

// appendMic adds a mic-audio-data chunk (float samples, 16 kHz mono). Bad
// samples refuse the chunk; an utterance over the configured length is
// dropped whole, with an error, rather than cut at a random point.
func (v *voice) appendMic(samples []float64) error {
	pcm, err := asr.FloatsToPCM16(samples)
	if err != nil {
		return refused(err)
	}
	cfg := v.s.deps.Config
	if float64(len(v.mic)+len(pcm)) > cfg.MaxUtterance.Seconds()*asr.SampleRate {
		v.mic = nil
		return invalid("the recording is longer than %s (conversation.max_utterance); it was dropped", cfg.MaxUtterance)
	}
	v.mic = append(v.mic, pcm...)
	return nil
}

// endMic ends the utterance collected by appendMic: it is transcribed and
// answered in a new turn.
func (v *voice) endMic(images []protocol.Image) error {
	imgs, err := validateImages(images, v.s.deps.Config)
	if err != nil {
		return err
	}
	samples := v.mic
	v.mic = nil
	if len(samples) == 0 {
		return invalid("mic-audio-end without any mic-audio-data before it")
	}
	if v.s.answerSpoken(asr.EncodeWAV(samples, asr.SampleRate)) {
		return nil // it answers the question the turn waits on (ask.go)
	}
	return v.s.startInput(turnInput{recording: asr.EncodeWAV(samples, asr.SampleRate), images: imgs})
}

// speak asks the AI to speak on its own (ai-speak-signal).
func (s *Session) speak(idleSeconds float64, images []protocol.Image) error {
	imgs, err := validateImages(images, s.deps.Config)
	if err != nil {
		return err
	}
	prompt := strings.ReplaceAll(s.deps.Config.ProactivePrompt, "{idle_time}", strconv.FormatFloat(idleSeconds, 'f', 0, 64))
	return s.startInput(turnInput{text: prompt, images: imgs, proactive: true})
}

// configureRaw declares the rate of the continuous stream (raw-audio-config)
// and ends the stream so far: the client turned its microphone off and on
// or changed its format, and a half-heard word must not be joined to what
// follows.
func (v *voice) configureRaw(rate int) error {
	if err := checkRate(rate); err != nil {
		return err
	}
	v.rate = rate
	v.raw = nil
	return nil
}

// feedFloats takes a raw-audio-data chunk: float samples at the rate
// raw-audio-config declared.
func (v *voice) feedFloats(samples []float64) error {
	pcm, err := asr.FloatsToPCM16(samples)
	if err != nil {
		return refused(err)
	}
	return v.feed(pcm)
}

// FeedPCM takes a binary frame: 16-bit little-endian mono PCM at the rate
// raw-audio-config declared.
func (s *Session) FeedPCM(data []byte) error {
	pcm, err := asr.PCM16FromBytes(data)
	if err != nil {
		return refused(err)
	}
	return s.voice.feed(pcm)
}

// feed runs the continuous stream's voice detection. Speech starting
// while a reply is under way interrupts it (barge-in); speech ending starts
// a turn with the utterance.
func (v *voice) feed(samples []int16) error {
	s, cfg := v.s, v.s.deps.Config
	rs := v.raw
	if rs == nil {
		var res *asr.Resampler
		if v.rate != asr.SampleRate {
			r, err := asr.NewResampler(v.rate, asr.SampleRate)
			if err != nil {
				return refused(err)
			}
			res = r
		}
		rs = &rawStream{
			resampler: res,
			segmenter: asr.NewSegmenter(asr.NewEnergyDetector(asr.EnergyConfig{}), cfg.VAD.segmenter(cfg.MaxUtterance)),
		}
		v.raw = rs
	}
	if rs.resampler != nil {
		samples = rs.resampler.Process(samples)
	}
	for _, ev := range rs.segmenter.Feed(samples) {
		switch ev.Kind {
		case asr.SpeechStart:
			v.speechStarted(rs)
		case asr.SpeechEnd:
			audio := append(rs.carry, ev.Audio...)
			if max := int(cfg.MaxUtterance.Seconds() * asr.SampleRate); len(audio) > max {
				audio = audio[len(audio)-max:]
			}
			rs.carry, rs.last = nil, audio
			s.reply(protocol.Control(protocol.ControlMicAudioEnd))
			if s.answerSpoken(asr.EncodeWAV(audio, asr.SampleRate)) {
				rs.last = nil
				continue // it answers the question the turn waits on (ask.go)
			}
			if err := s.startInput(turnInput{recording: asr.EncodeWAV(audio, asr.SampleRate)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// speechStarted handles the user starting to talk. If the previous
// utterance is still being transcribed, they only paused: that turn is
// dropped and the utterances are heard again as one. If a reply is under
// way, they are talking over it: barge-in.
func (v *voice) speechStarted(rs *rawStream) {
	s := v.s
	t := s.turns.running()
	if t != nil && !t.replying.Load() && rs.last != nil {
		s.turns.stop(errSuperseded)
		rs.carry, rs.last = rs.last, nil
		return
	}
	rs.last = nil
	if t == nil || s.asks.pending() {
		// While the turn waits on a question, the user is answering it.
		return
	}
	// Barge-in: the client is told to stop playing, and memory keeps what
	// was probably heard (see heardText; the client does not report it).
	s.reply(protocol.Control(protocol.ControlInterrupt))
	s.turns.stop(interruptCause{heard: t.heardText()})
}

// transcribe turns the turn's recording into text and tells the client.
// It reports false when the turn should not go on: stopped, failed, or
// nothing was said (the client is then told it can listen again) and
// nothing was typed with it (typed: the turn has words of its own).
func (s *Session) transcribe(ctx context.Context, wav []byte, watch *turnWatch, typed bool) (string, bool) {
	engine := s.deps.ASR
	if engine == nil {
		msg := "speech input is off: type your message instead"
		if err := s.deps.ASRErr; err != nil {
			msg = "speech input is off (" + err.Error() + "): type your message instead"
		}
		watch.end(TurnFailed)
		s.failTurn(ctx, msg)
		return "", false
	}
	if s.hub.asr.acquire(ctx, false) != nil {
		return "", false
	}
	text, err := engine.Transcribe(ctx, wav)
	s.hub.asr.release()
	if ctx.Err() != nil {
		return "", false
	}
	if err != nil {
		s.log.Warn("transcription failed", "err", err)
		s.deps.Observer.DependencyFailed(ServiceASR, err)
		watch.end(TurnFailed)
		msg := "koe could not transcribe the recording; the reason is in its log"
		if errors.Is(err, asr.ErrBadAudio) {
			msg = "koe could not transcribe the recording: " + quote.Shorten(err.Error(), 200)
		}
		s.failTurn(ctx, msg)
		return "", false
	}
	text = strings.TrimSpace(text)
	s.send(ctx, protocol.Text{Type: protocol.TypeUserInputTranscription, Text: text})
	if text == "" && !typed {
		// Nothing was said: end the chain so the client listens again.
		watch.end(TurnCompleted)
		s.send(ctx, protocol.FullText(""))
		s.endChain(ctx)
		return "", false
	}
	return text, true
}

// checkRate refuses a stream rate koe does not resample from.
func checkRate(rate int) error {
	if err := asr.CheckRate(rate); err != nil {
		return invalid("sample_rate %d: %v", rate, err)
	}
	return nil
}
