package conversation

import (
	"strings"
	"sync"

	"koe/agent"
	"koe/conversation/sentence"
	"koe/internal/quote"
	"koe/protocol"
)

// A question the turn puts to its user while tools run (agent.AskEmitter)
// is said and shown like a sentence of the reply, offered to koe's
// clients as an ask event (buttons on koe's page), and shown in an OLV
// client's tool entry. The user's next words answer it, typed or spoken,
// instead of starting a new turn; an interrupt cancels it. Only the
// session's own client can answer: watchers see the question, the model
// and servers never reach the answer. A chat API turn and the live chat
// have nobody to answer, so their questions are declined at once.

// pendingAsk is the question waiting for the user.
type pendingAsk struct {
	id      string
	answers chan agent.Answer // room for one
}

// asking holds a session's pending question.
type asking struct {
	mu sync.Mutex
	p  *pendingAsk
	// none: the session has no user to ask (the chat API).
	none bool
}

func (a *asking) set(p *pendingAsk) {
	a.mu.Lock()
	a.p = p
	a.mu.Unlock()
}

func (a *asking) clear(p *pendingAsk) {
	a.mu.Lock()
	if a.p == p {
		a.p = nil
	}
	a.mu.Unlock()
}

func (a *asking) pending() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.p != nil
}

// answer hands ans to the pending question (to the one named id, when id
// is set) and reports whether there was one.
func (a *asking) answer(id string, ans agent.Answer) bool {
	a.mu.Lock()
	p := a.p
	if p == nil || id != "" && p.id != id {
		a.mu.Unlock()
		return false
	}
	a.p = nil
	a.mu.Unlock()
	p.answers <- ans // room for one, and it is taken off a.p first
	return true
}

// Ask puts q to the user: see agent.AskEmitter. It runs on Reply's
// goroutine, which owns the speaker.
func (e *turnEmitter) Ask(q agent.Question) (<-chan agent.Answer, func(agent.Answer)) {
	s := e.s
	if s.headless || s.asks.none {
		return nil, nil
	}
	p := &pendingAsk{id: q.ID, answers: make(chan agent.Answer, 1)}
	s.asks.set(p)
	e.toolStatus(q.Call, protocol.ToolRunning, "Waiting for your answer: "+q.Text)
	e.inOrder(protocol.Ask{Type: protocol.TypeAsk, AskID: q.ID, Kind: q.Kind, Text: q.Text,
		ToolID: q.Call.ID, ToolName: q.Call.Name, Source: q.Source, Options: q.Options,
		TimeoutMillis: e.st.cast.agent.AskTimeout().Milliseconds()})
	display := q.Text
	if e.reply.Len() > 0 || e.speaker.count > 0 {
		display = " " + display
	}
	e.speaker.add(sentence.Piece{Display: display, Speech: q.Speech})
	return p.answers, func(ans agent.Answer) {
		s.asks.clear(p)
		e.now(protocol.AskEnd{Type: protocol.TypeAskEnd, AskID: q.ID, Action: ans.Action, Reason: ans.Reason})
	}
}

// answerText answers the pending question with typed words, if one waits.
func (s *Session) answerText(text string) bool {
	if !s.asks.pending() || strings.TrimSpace(text) == "" {
		return false
	}
	return s.asks.answer("", agent.Answer{Text: text})
}

// answerClick answers a question by a button of koe's page.
func (s *Session) answerClick(id, action, text string) error {
	ans := agent.Answer{Action: action}
	switch {
	case strings.TrimSpace(text) != "":
		ans = agent.Answer{Text: text}
	case action == agent.Accept, action == agent.Decline, action == agent.Cancel:
	default:
		return invalid("ask-answer: action %q is not accept, decline or cancel", quote.Shorten(action, 40))
	}
	if !s.asks.answer(id, ans) {
		return invalid("ask-answer: no question %q is waiting for an answer", quote.Shorten(id, 60))
	}
	return nil
}

// answerSpoken transcribes a recording that answers the pending question,
// in the running turn's goroutine of its own: the read loop goes on. The
// turn's end ends it. One is heard at a time: a recording sent while one
// is being transcribed is refused with an error frame.
func (s *Session) answerSpoken(wav []byte) bool {
	t := s.turns.running()
	if t == nil || !s.asks.pending() || s.deps.ASR == nil {
		return false
	}
	if !s.hearing.CompareAndSwap(false, true) {
		s.send(t.ctx, protocol.NewError("koe is still hearing your last answer; wait for it"))
		return true
	}
	go func() {
		defer s.hearing.Store(false)
		ctx := t.ctx
		if s.hub.asr.acquire(ctx, false) != nil {
			return
		}
		text, err := s.deps.ASR.Transcribe(ctx, wav)
		s.hub.asr.release()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.log.Warn("transcription of an answer failed", "err", err)
			s.send(ctx, protocol.NewError("koe could not transcribe your answer; type it or say it again"))
			return
		}
		text = strings.TrimSpace(text)
		s.send(ctx, protocol.Text{Type: protocol.TypeUserInputTranscription, Text: text})
		if text != "" {
			s.answerText(text)
		}
	}()
	return true
}
