package conversation

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"koe/asr"
	"koe/protocol"
)

// Transcriber is the speech recogniser as a session uses it.
type Transcriber interface {
	Transcribe(ctx context.Context, wav []byte) (string, error)
}

// proactiveName marks a stored proactive instruction.
const proactiveName = "proactive"

// micBuffer collects one utterance sent as mic-audio-data chunks.
type micBuffer struct {
	samples []int16
}

// AppendMic adds a mic-audio-data chunk (float samples, 16 kHz mono). Bad
// samples refuse the chunk; an utterance over the configured length is
// dropped whole, with an error, rather than cut at a random point.
func (s *Session) AppendMic(samples []float64) error {
	pcm, err := asr.FloatsToPCM16(samples)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	max := s.deps.Config.MaxUtterance.Seconds() * asr.SampleRate
	if float64(len(s.mic.samples)+len(pcm)) > max {
		s.mic.samples = nil
		return fmt.Errorf("%w: the recording is longer than %s (conversation.max_utterance); it was dropped", asr.ErrBadAudio, s.deps.Config.MaxUtterance)
	}
	s.mic.samples = append(s.mic.samples, pcm...)
	return nil
}

// EndMic ends the utterance collected by AppendMic: it is transcribed and
// answered in a new turn.
func (s *Session) EndMic(images []protocol.Image) error {
	imgs, err := validateImages(images, s.deps.Config)
	if err != nil {
		return err
	}
	s.mu.Lock()
	samples := s.mic.samples
	s.mic.samples = nil
	s.mu.Unlock()
	if len(samples) == 0 {
		return fmt.Errorf("%w: mic-audio-end without any mic-audio-data before it", asr.ErrBadAudio)
	}
	s.start(turnInput{recording: asr.EncodeWAV(samples, asr.SampleRate), images: imgs})
	return nil
}

// Speak asks the AI to speak on its own (ai-speak-signal).
func (s *Session) Speak(idleSeconds float64, images []protocol.Image) error {
	imgs, err := validateImages(images, s.deps.Config)
	if err != nil {
		return err
	}
	prompt := strings.ReplaceAll(s.deps.Config.ProactivePrompt, "{idle_time}", strconv.FormatFloat(idleSeconds, 'f', 0, 64))
	s.start(turnInput{text: prompt, images: imgs, proactive: true})
	return nil
}

// transcribe turns the turn's recording into text and tells the client.
// It reports false when the turn should not go on: stopped, failed, or
// nothing was said (the client is then told it can listen again).
func (s *Session) transcribe(ctx context.Context, wav []byte) (string, bool) {
	s.mu.Lock()
	engine, engineErr := s.deps.ASR, s.deps.ASRErr
	s.mu.Unlock()
	if engine == nil {
		msg := "speech input is off: type your message instead"
		if engineErr != nil {
			msg = "speech input is off (" + engineErr.Error() + "): type your message instead"
		}
		s.failTurn(ctx, msg)
		return "", false
	}
	if slots := s.deps.ASRSlots; slots != nil {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-ctx.Done():
			return "", false
		}
	}
	text, err := engine.Transcribe(ctx, wav)
	if ctx.Err() != nil {
		return "", false
	}
	if err != nil {
		s.log.Warn("transcription failed", "err", err)
		s.failTurn(ctx, "koe could not understand the recording: "+err.Error())
		return "", false
	}
	text = strings.TrimSpace(text)
	s.send(ctx, protocol.Text{Type: protocol.TypeUserInputTranscription, Text: text})
	if text == "" {
		// Nothing was said: end the chain so the client listens again.
		s.send(ctx, protocol.FullText(""))
		s.endChain(ctx)
		return "", false
	}
	return text, true
}

// rawStream is the server-side VAD path: a continuous microphone stream,
// resampled to 16 kHz and cut into utterances.
type rawStream struct {
	rate      int
	resampler *asr.Resampler
	segmenter *asr.Segmenter
	// last is the latest utterance, kept while its turn is still being
	// transcribed; carry is what a resumed utterance continues.
	last, carry []int16
}

// ResetRaw ends the continuous stream (the client turned its microphone
// off or changed its format): a half-heard utterance is dropped, not
// joined to whatever comes next.
func (s *Session) ResetRaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw = nil
}

// FeedRaw takes a chunk of the continuous microphone stream at rate Hz.
// Speech starting while a reply is under way interrupts it (barge-in);
// speech ending starts a turn with the utterance.
func (s *Session) FeedRaw(samples []int16, rate int) error {
	s.mu.Lock()
	rs := s.raw
	if rs == nil || rs.rate != rate {
		var res *asr.Resampler
		if rate != asr.SampleRate {
			r, err := asr.NewResampler(rate, asr.SampleRate)
			if err != nil {
				s.mu.Unlock()
				return fmt.Errorf("%w: %v", asr.ErrBadAudio, err)
			}
			res = r
		}
		rs = &rawStream{
			rate:      rate,
			resampler: res,
			segmenter: asr.NewSegmenter(asr.NewEnergyDetector(asr.EnergyConfig{}), s.deps.Config.VAD.segmenter(s.deps.Config.MaxUtterance)),
		}
		s.raw = rs
	}
	s.mu.Unlock()

	if rs.resampler != nil {
		samples = rs.resampler.Process(samples)
	}
	for _, ev := range rs.segmenter.Feed(samples) {
		switch ev.Kind {
		case asr.SpeechStart:
			s.speechStarted(rs)
		case asr.SpeechEnd:
			audio := append(rs.carry, ev.Audio...)
			if max := int(s.deps.Config.MaxUtterance.Seconds() * asr.SampleRate); len(audio) > max {
				audio = audio[len(audio)-max:]
			}
			rs.carry, rs.last = nil, audio
			s.send(s.ctx, protocol.Control(protocol.ControlMicAudioEnd))
			s.start(turnInput{recording: asr.EncodeWAV(audio, asr.SampleRate)})
		}
	}
	return nil
}

// speechStarted handles the user starting to talk. If the previous
// utterance is still being transcribed, they only paused: that turn is
// dropped and the utterances are heard again as one. If a reply is under
// way, they are talking over it: barge-in.
func (s *Session) speechStarted(rs *rawStream) {
	s.mu.Lock()
	t := s.turn
	s.mu.Unlock()
	if t != nil && !t.replying.Load() && rs.last != nil {
		s.stopTurn(errSuperseded)
		rs.carry, rs.last = rs.last, nil
		return
	}
	rs.last = nil
	s.bargeIn()
}

// bargeIn stops a reply the user starts talking over: the client is told
// to stop playing, and memory keeps what was probably heard (see
// heardText; the client does not report it here).
func (s *Session) bargeIn() {
	s.mu.Lock()
	t := s.turn
	s.mu.Unlock()
	if t == nil {
		return
	}
	s.send(s.ctx, protocol.Control(protocol.ControlInterrupt))
	s.stopTurn(interruptCause{heard: t.heardText()})
}
