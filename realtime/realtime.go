// Package realtime serves the OpenAI Realtime API's event protocol over
// koe's conversations: a client written for that API (the official SDKs,
// agent frameworks, telephony bridges) talks to a koe character, with its
// memory, tools and voice.
//
// It is a renderer, not a pipeline. Each connection opens one
// conversation.Session through the hub, as a WebSocket client does, and
// is that session's Sender: the turn's frames (token deltas, a WAV per
// sentence, the stored messages, the chain's end) are translated here into
// Realtime events, while watchers, the overlay, the metrics and the stored
// history see the same turn as for any other client.
//
// Files by idea: events.go (the wire: ids, dialects, error events),
// session.go (the session's settings and session.update), items.go (the
// conversation's items), response.go (response.create, cancel and the
// response's events), translate.go (the turn's frames into events),
// output_audio.go (speech into audio deltas), g711.go (the G.711 codecs).
// See docs/realtime.md for what clients get.
package realtime

import (
	"context"
	"log/slog"

	"koe/conversation"
)

// Writer is the connection's single writer (the server's outbox): it
// writes messages in the order they are queued and drops those whose
// context has ended before their turn came.
type Writer interface {
	Send(ctx context.Context, msg any) error
	SendWait(ctx context.Context, msg any) error
	// SendThen is Send that runs then once msg is written or dropped, in
	// the writer's order; a nil msg writes nothing and keeps the place.
	SendThen(ctx context.Context, msg any, then func()) error
}

// Options describe one connection.
type Options struct {
	// Model is the ?model= of the URL: a character's conf_uid or name;
	// anything else is the default character.
	Model string
	// Beta: the client speaks the beta dialect (it sent "OpenAI-Beta:
	// realtime=v1" or offered the openai-beta.realtime-v1 subprotocol).
	Beta bool
	// MaxItemBytes bounds the words a connection's items hold
	// (server.max_message_bytes; 0: no bound): items no response has
	// answered are refused past it, answered ones forgotten oldest first.
	MaxItemBytes int
	// MaxItems bounds the items a connection remembers
	// (server.realtime_max_items; 0: defaultMaxItems).
	MaxItems int
	Logger   *slog.Logger
}

// Service opens Realtime connections on the hub's sessions.
type Service struct {
	hub *conversation.Hub
	log *slog.Logger
}

// New returns the service of hub.
func New(hub *conversation.Hub, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{hub: hub, log: log}
}

// Open starts the conversation of one connection, writing to out, and
// greets it (session.created, conversation.created). ctx bounds its life.
// It returns nil once koe is shutting down.
func (s *Service) Open(ctx context.Context, out Writer, o Options) *Conn {
	log := o.Logger
	if log == nil {
		log = s.log
	}
	c := newConn(ctx, out, o, log)
	c.initAudio(s.hub.VoiceInput())
	sess, found := s.hub.OpenFor(ctx, c.sink(), conversation.SessionOptions{
		ClientUID: c.sessionID, KoeEvents: true, PlaysItself: true, Logger: log,
	}, o.Model)
	if sess == nil {
		return nil
	}
	c.sess = sess
	conf, name := sess.CharacterOf()
	if !found && o.Model != "" {
		log.Info("realtime: no character is named by the model; the default character answers", "model", o.Model, "conf_uid", conf)
	}
	c.cfg.model = o.Model
	if c.cfg.model == "" {
		c.cfg.model = conf
	}
	log.Info("realtime session opened", "session", c.sessionID, "conf_uid", conf, "character", name, "beta", o.Beta)
	c.greet()
	return c
}
