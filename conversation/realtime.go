package conversation

import (
	"context"
	"strings"

	"koe/agent"
	"koe/tts"
)

// What package realtime (the OpenAI Realtime API) asks of a session. Its
// client keeps the conversation as items and asks for each response
// itself, so a session there is opened for a named character, speaks or
// not per response, plays its audio on its own clock (PlaysItself) and
// answers through the same turns as any client: one stream, one history.

// OpenFor starts a session for one client with the character model names:
// a conf_uid, else a character's conf_name or name (case-insensitive);
// "" or a name no character has is the default character, and found
// reports which it was. It returns nil once the hub is closing.
func (h *Hub) OpenFor(ctx context.Context, out Sender, opts SessionOptions, model string) (s *Session, found bool) {
	char, found := h.characterNamed(model)
	return h.open(ctx, out, opts, char), found
}

// characterNamed finds the character model names (see OpenFor).
func (h *Hub) characterNamed(model string) (Character, bool) {
	chars := h.deps.Characters
	model = strings.TrimSpace(model)
	if model == "" {
		return chars.Default(), false
	}
	if c, ok := chars.Find(model); ok {
		return c, true
	}
	if d := chars.Default(); strings.EqualFold(d.ConfName, model) || strings.EqualFold(d.Name, model) {
		return d, true
	}
	files, err := chars.List()
	if err != nil {
		h.log.Warn("cannot list the characters; the default one answers", "err", err)
		return chars.Default(), false
	}
	for _, f := range files {
		if !strings.EqualFold(f.Name, model) {
			continue
		}
		if c, err := chars.Load(f.Filename); err == nil {
			return c, true
		}
	}
	return chars.Default(), false
}

// Response is one answer a Realtime client asks for.
type Response struct {
	// Text is the user's words the answer is to (the user items not yet
	// answered); "" makes the character speak on its own, told
	// Instructions or else conversation.proactive_prompt.
	Text string
	// Reply changes the turn's LLM requests.
	Reply agent.ReplyOptions
	// TextOnly: the answer is not spoken, though the session speaks.
	TextOnly bool
	// Recording, if set, is a 16 kHz mono WAV of the user's words, which
	// koe's speech recognition hears first (the turn's text is what it
	// heard, after Text if there is any).
	Recording []byte
	// Tools, if set, are the client's own tools offered in this turn
	// instead of the session's (see clienttools.go).
	Tools *agent.ClientTools
}

// Respond stops the running turn, if any, and starts one for r. It fails
// with koe.ErrRestarting once the session drains.
func (s *Session) Respond(r Response) error {
	in := turnInput{text: r.Text, reply: r.Reply, silent: r.TextOnly, recording: r.Recording, tools: r.Tools}
	switch {
	case strings.TrimSpace(r.Text) == "" && r.Recording == nil && s.resultsGiven():
		// The client gave its calls' results: the turn goes on from them.
		in.resume = true
	case strings.TrimSpace(r.Text) == "" && r.Recording == nil:
		in.proactive = true
		in.text = r.Reply.Instructions
		if in.text == "" {
			in.text = strings.ReplaceAll(s.deps.Config.ProactivePrompt, "{idle_time}", "0")
		}
	}
	return s.startInput(in)
}

// Interrupt stops the running turn at once, as the user's interrupt does:
// memory and history keep heard, what the user got of the reply. It
// returns once the turn has stored its records; it reports whether a turn
// was running.
func (s *Session) Interrupt(heard string) bool {
	return s.turns.stop(interruptCause{heard: heard})
}

// ClientUID is the session's client_uid: what watchers name to follow it.
func (s *Session) ClientUID() string { return s.clientUID }

// CharacterOf returns the session's character's conf_uid and name.
func (s *Session) CharacterOf() (confUID, name string) {
	c := s.Character()
	return c.ConfUID, c.Name
}

// SetVoice makes the session's character speak with voice where its
// speech engine names voices as the Realtime API does (the
// OpenAI-compatible engine); it reports whether it did. The next turn
// takes it; the running one keeps its voice. Other engines name voices
// otherwise (espeak-ng's are languages): the character keeps its own.
func (s *Session) SetVoice(voice string) bool {
	c, _ := s.current()
	if c.char.TTS.Engine != tts.EngineOpenAI || s.deps.NewTTS == nil || s.textOnly {
		return false
	}
	if c.char.TTS.OpenAI.Voice == voice {
		return true
	}
	cfg := c.char.TTS
	cfg.OpenAI.Voice = voice
	engine, err := s.deps.NewTTS(cfg)
	if err != nil {
		s.log.Warn("realtime: the voice could not be set; the character keeps its own", "voice", voice, "err", err)
		return false
	}
	s.mu.Lock()
	same := s.cast.agent == c.agent // no character switch since
	if same {
		s.cast.tts, s.cast.ttsErr = engine, nil
		s.cast.char.TTS = cfg
	}
	s.mu.Unlock()
	return same
}

// CallEnded is what one LLM call of a turn reported. It is no wire
// message: a PlaysItself session's Sender (the Realtime API's) gets it, in
// the turn's order, so that a response reports its usage once its audio
// is sent, before the reply is stored; no other client and no watcher
// sees it.
type CallEnded struct{ agent.CycleResult }
