package realtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"koe/asr"
	"koe/protocol"
)

// The input audio buffer on the wire: input_audio_buffer.append, commit
// and clear, the voice detection's speech_started, speech_stopped and
// committed, the user's audio message each commit makes, its transcript
// (conversation.item.input_audio_transcription.completed or .failed) and,
// with server VAD, the response to it and the barge-in over a response.
// The buffer itself is audio_input.go; the detection's settings
// turn_detection.go.

// audioIn is a connection's input audio: the read loop's own.
type audioIn struct {
	in *Input
	// turns and format are what in was last set up with: a
	// session.update changes the config, and the next buffer event
	// brings in up to date.
	turns  *TurnDetection
	format audioFormat
	// speechItem is the id speech_started gave the message being
	// spoken, which its commit creates.
	speechItem string
}

// initAudio readies the input for a hub with the given voice settings.
func (c *Conn) initAudio(startMillis int, maxUtterance time.Duration) {
	c.cfg.vad = vadDefaults(startMillis, maxUtterance)
	// The session's default, server VAD with the API's values, is valid.
	if err := c.cfg.setTurnDetection(defaultTurnDetection); err != nil {
		panic("realtime: the default turn_detection: " + err.Error())
	}
	c.audio = audioIn{in: NewInput(maxUtterance, c.cfg.vad), format: formatPCM}
}

// setTurnDetection reads a session.update's turn_detection into n; the
// session reports it back with every field filled in.
func (n *sessionConfig) setTurnDetection(raw json.RawMessage) error {
	td, err := ParseTurnDetection(raw, n.vad)
	if err != nil {
		return refuse(codeInvalidValue, "session.audio.input.turn_detection", err.Error())
	}
	rendered := json.RawMessage("null")
	if td != nil {
		rendered, _ = json.Marshal(td) // plain fields: cannot fail
	}
	n.turns, n.turnDetection = td, rendered
	return nil
}

// transcribes says whether the client asked for transcripts of its audio
// (input_audio_transcription; koe's own speech recognition makes them,
// whatever model it names).
func (c sessionConfig) transcribes() bool {
	return len(c.transcription) > 0 && string(c.transcription) != "null"
}

func init() {
	handle("input_audio_buffer.append", (*Conn).bufferAppend)
	handle("input_audio_buffer.commit", (*Conn).bufferCommit)
	handle("input_audio_buffer.clear", (*Conn).bufferClear)
	frameRenderers = append(frameRenderers, renderTranscription)
	contentMakers["input_audio"] = audioContent
}

// audioContent reads a user message's input_audio part
// (conversation.item.create): with a transcript, the message is those
// words, as the client heard them; without, its audio (base64, in the
// session's input format) is a recording the answering turn hears, like a
// committed buffer's, bounded with the others waiting by
// conversation.max_utterance.
func audioContent(c *Conn, audio, transcript string) (string, ev, []int16, error) {
	if strings.TrimSpace(transcript) != "" {
		return transcript, ev{"type": "input_audio", "transcript": transcript}, nil, nil
	}
	raw, err := base64.StdEncoding.DecodeString(audio)
	if err != nil {
		return "", nil, nil, refuse(codeInvalidValue, "item.content.audio", "the audio is not valid base64: "+err.Error())
	}
	f := c.config().inFormat
	samples, _ := f.decode(nil, raw)
	if f.rate != asr.SampleRate {
		r, err := asr.NewResampler(f.rate, asr.SampleRate)
		if err != nil {
			return "", nil, nil, fmt.Errorf("input_audio at %d Hz: %w", f.rate, err)
		}
		samples = append(r.Process(samples), r.Flush()...)
	}
	if len(samples) < minCommitMillis*asr.SampleRate/1000 {
		return "", nil, nil, refuse(codeInvalidValue, "item.content.audio", fmt.Sprintf("an input_audio part needs at least %d ms of audio, or a transcript", minCommitMillis))
	}
	c.mu.Lock()
	waiting := c.items.pendingAudio()
	c.mu.Unlock()
	if limit := c.audio.in.limit; float64(waiting+len(samples)) > limit.Seconds()*asr.SampleRate {
		return "", nil, nil, refuse(codeBufferFull, "item.content.audio", fmt.Sprintf("the audio messages waiting for a response would hold more than %s (conversation.max_utterance); ask for a response first", limit))
	}
	return "", ev{"type": "input_audio", "transcript": nil}, samples, nil
}

// Error codes of the input buffer, as the API names them.
const (
	codeCommitEmpty = "input_audio_buffer_commit_empty"
	codeBufferFull  = "input_audio_buffer_full"
)

// input returns the buffer, set up with the session's current settings.
func (c *Conn) input() *Input {
	cfg := c.config()
	a := &c.audio
	if cfg.inFormat != a.format {
		a.in.SetFormat(cfg.inFormat)
		a.format = cfg.inFormat
	}
	if cfg.turns != a.turns {
		a.in.SetTurnDetection(cfg.turns)
		a.turns, a.speechItem = cfg.turns, ""
	}
	return a.in
}

// bufferAppend serves input_audio_buffer.append.
func (c *Conn) bufferAppend(raw []byte, _ string) error {
	var e struct {
		Audio *string `json:"audio"`
	}
	if err := decode(raw, &e); err != nil {
		return err
	}
	if e.Audio == nil {
		return refuse(codeMissing, "audio", `input_audio_buffer.append has no "audio"`)
	}
	in := c.input()
	evs, err := in.Append(*e.Audio)
	if err != nil {
		code := codeInvalidValue
		if errors.Is(err, errInputFull) {
			code = codeBufferFull
		}
		return refuse(code, "audio", err.Error())
	}
	c.inputEvents(evs)
	return nil
}

// bufferCommit serves input_audio_buffer.commit.
func (c *Conn) bufferCommit(_ []byte, _ string) error {
	evs, err := c.input().Commit()
	c.inputEvents(evs)
	if err != nil {
		return refuse(codeCommitEmpty, "", err.Error())
	}
	return nil
}

// bufferClear serves input_audio_buffer.clear.
func (c *Conn) bufferClear(_ []byte, _ string) error {
	c.input().Clear()
	c.audio.speechItem = ""
	c.send(c.ctx, ev{"type": "input_audio_buffer.cleared"})
	return nil
}

// inputEvents tells the client what the buffer reported, and acts on it.
func (c *Conn) inputEvents(evs []InputEvent) {
	a := &c.audio
	for _, e := range evs {
		switch e.Kind {
		case SpeechStarted:
			a.speechItem = c.ids.next("item")
			c.send(c.ctx, ev{"type": "input_audio_buffer.speech_started", "audio_start_ms": e.AudioStartMs, "item_id": a.speechItem})
			if a.turns.Interrupts() {
				c.bargeIn()
			}
		case SpeechStopped:
			c.send(c.ctx, ev{"type": "input_audio_buffer.speech_stopped", "audio_end_ms": e.AudioEndMs, "item_id": a.speechItem})
		case Committed:
			id := a.speechItem
			if id == "" {
				id = c.ids.next("item")
			}
			a.speechItem = ""
			c.commitAudio(id, e.Audio, a.turns.Creates())
		}
	}
}

// commitAudio makes committed audio the user's message id and, if create,
// answers it.
func (c *Conn) commitAudio(id string, audio []int16, create bool) {
	c.mu.Lock()
	prev := c.items.last()
	waiting := c.items.pendingAudio()
	c.mu.Unlock()
	// The messages no response has answered yet are heard as one
	// recording, which conversation.max_utterance bounds.
	if limit := c.audio.in.limit; float64(waiting+len(audio)) > limit.Seconds()*asr.SampleRate {
		c.fail(refuse(codeBufferFull, "", fmt.Sprintf("the audio messages waiting for a response would hold more than %s (conversation.max_utterance): this one is dropped; ask for a response first", limit)), "")
		return
	}
	c.send(c.ctx, ev{"type": "input_audio_buffer.committed", "previous_item_id": nullable(prev), "item_id": id})
	it := &item{id: id, typ: "message", role: "user", recording: audio,
		rendered: ev{"type": "message", "role": "user", "content": []ev{{"type": "input_audio", "transcript": nil}}}}
	if err := c.addItem(it, nil); err != nil {
		c.fail(err, "")
		return
	}
	if !create {
		return
	}
	if c.current() != nil {
		// interrupt_response is off and a response runs: the message
		// waits for the next response.create.
		c.log.Debug("realtime: speech ended during a response; its message waits for the next one", "item", id)
		return
	}
	if err := c.startResponse(plan{cfg: c.config()}); err != nil {
		c.fail(err, "")
	}
}

// bargeIn stops what the character is saying because the user started
// talking: the running response is cancelled (response.done, status
// cancelled, reason turn_detected) and koe's turn stops, keeping what the
// client's truncate will say was heard (a reply still playing after its
// response.done stops the same way). A turn still hearing the user's
// previous words is stopped too, and those words are heard again with the
// ones that follow (the user only paused), as koe's own voice input does.
func (c *Conn) bargeIn() {
	r := c.current()
	// A written reply gets no truncate (it was read as written): only a
	// spoken one waits for the client to say how much of it played.
	if (r == nil || r.audio) && c.sess.BargeIn() {
		if r != nil {
			r.cancel()
			c.finishCancelled(r, "turn_detected")
		}
		return
	}
	if r == nil {
		return
	}
	r.cancel()
	heard := ""
	if !r.audio {
		c.mu.Lock()
		heard = r.heardText()
		c.mu.Unlock()
	}
	c.sess.Interrupt(heard)
	if heard == "" {
		c.mu.Lock()
		if i := c.items.index(r.inputItem); i >= 0 && c.items.list[i].recording != nil {
			c.items.list[i].pending = true
		}
		c.mu.Unlock()
	}
	c.finishCancelled(r, "turn_detected")
}

// pendingRecording is the recording of the pending audio messages, one
// after the other, as a 16 kHz WAV, and the id of the last of them (its
// transcript is the whole recording's); nil and "" without any. The last
// one keeps the samples until they are transcribed (a barge-in during the
// transcription hears them again); the others, and answered messages,
// drop theirs. Called locked.
func (l *itemList) pendingRecording() ([]byte, string) {
	var samples []int16
	var last *item
	for _, it := range l.list {
		if it.pending && it.recording != nil {
			samples = append(samples, it.recording...)
			last = it
		}
		it.recording = nil
	}
	if last == nil {
		return nil, ""
	}
	last.recording = samples
	return asr.EncodeWAV(samples, asr.SampleRate), last.id
}

// pendingAudio is how many 16 kHz samples the pending audio messages
// hold. Called locked.
func (l *itemList) pendingAudio() int {
	n := 0
	for _, it := range l.list {
		if it.pending {
			n += len(it.recording)
		}
	}
	return n
}

// renderTranscription renders what koe's speech recognition made of the
// response's recording: the transcript of its audio message (and the
// message shows it from then on), or the failure to make one.
func renderTranscription(c *Conn, r *response, _ context.Context, msg any) ([]ev, bool) {
	if r == nil {
		return nil, false
	}
	c.mu.Lock()
	id, done := r.inputItem, r.transcribed
	c.mu.Unlock()
	if id == "" || done {
		return nil, false
	}
	switch m := msg.(type) {
	case protocol.Text:
		if m.Type != protocol.TypeUserInputTranscription {
			return nil, false
		}
		c.mu.Lock()
		r.transcribed = true
		// The last audio message holds the whole recording the
		// transcript is of (pendingRecording): the usage is its length,
		// as the API counts a transcription it does not bill by tokens.
		seconds := 0.0
		if i := c.items.index(id); i >= 0 {
			it := c.items.list[i]
			seconds = float64(len(it.recording)) / asr.SampleRate
			it.text, it.recording = m.Text, nil
			it.rendered["content"] = []ev{{"type": "input_audio", "transcript": m.Text}}
		}
		transcribes := c.cfg.transcribes()
		c.mu.Unlock()
		if !transcribes {
			return nil, true
		}
		return []ev{{"type": "conversation.item.input_audio_transcription.completed", "item_id": id, "content_index": 0, "transcript": m.Text,
			"usage": ev{"type": "duration", "seconds": seconds}}}, true
	case protocol.Error:
		// The recording could not be heard: the response fails with it.
		c.mu.Lock()
		r.transcribed = true
		r.failure = m.Message
		if i := c.items.index(id); i >= 0 {
			c.items.list[i].recording = nil
		}
		transcribes := c.cfg.transcribes()
		c.mu.Unlock()
		if !transcribes {
			return nil, true
		}
		return []ev{{"type": "conversation.item.input_audio_transcription.failed", "item_id": id, "content_index": 0,
			"error": ev{"type": "transcription_error", "code": "asr_failed", "message": m.Message, "param": nil}}}, true
	}
	return nil, false
}
