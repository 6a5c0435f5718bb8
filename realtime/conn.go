package realtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"koe"
	"koe/conversation"
)

// Conn is one Realtime connection: its settings, its items, its response,
// and the session its turns run in. Handle, Reject and Close are called
// from the connection's read loop; the session's frames arrive from the
// turn's goroutines (translate.go). Its lock guards the state and is never
// held while writing.
type Conn struct {
	ctx       context.Context
	out       Writer
	log       *slog.Logger
	dialect   dialect
	ids       *ids
	sessionID string
	convID    string
	expires   int64
	sess      *conversation.Session

	// audio is the input audio buffer and its voice detection: the
	// read loop's own (input_events.go).
	audio audioIn

	mu    sync.Mutex
	cfg   sessionConfig
	items itemList
	cur   *response // the response running, nil when none
}

func newConn(ctx context.Context, out Writer, o Options, log *slog.Logger) *Conn {
	d := dialect{beta: o.Beta}
	i := newIDs()
	return &Conn{
		ctx: ctx, out: out, log: log, dialect: d, ids: i,
		sessionID: i.next("sess"), convID: i.next("conv"),
		// The API's sessions last 30 minutes; koe's last as long as the
		// connection, which this only reports.
		expires: time.Now().Add(30 * time.Minute).Unix(),
		cfg:     defaultConfig(d),
		items:   itemList{limit: o.MaxItemBytes, max: cmp.Or(o.MaxItems, defaultMaxItems)},
	}
}

// SessionID is the session's id, which is also its client_uid: watchers
// follow it with /client-ws?watch=<id>.
func (c *Conn) SessionID() string { return c.sessionID }

// greet sends what the API sends on connecting.
func (c *Conn) greet() {
	c.mu.Lock()
	cfg := c.cfg
	c.mu.Unlock()
	c.send(c.ctx, ev{"type": "session.created", "session": cfg.render(c.dialect, c.sessionID, c.expires)})
	c.send(c.ctx, ev{"type": "conversation.created", "conversation": ev{"id": c.convID, "object": "realtime.conversation"}})
}

// handler handles one client event: raw is the whole event, eventID its
// event_id ("" if none). An error is answered with an error event.
type handler func(c *Conn, raw []byte, eventID string) error

// handlers are the client events served, by type. Each file registers its
// own in an init function, so the parts of the package stay apart.
var handlers = map[string]handler{}

func handle(typ string, h handler) {
	if _, dup := handlers[typ]; dup {
		panic("realtime: two handlers for " + typ)
	}
	handlers[typ] = h
}

func init() {
	handle("session.update", (*Conn).sessionUpdate)
}

// Handle takes one text message of the client. Nothing a client sends
// ends the connection: a message that cannot be served is answered with an
// error event naming its event_id.
func (c *Conn) Handle(data []byte) {
	var head struct {
		Type    *string `json:"type"`
		EventID string  `json:"event_id"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		c.fail(refuse(codeInvalidJSON, "", "the message is not a JSON object: "+err.Error()), "")
		return
	}
	if head.Type == nil || *head.Type == "" {
		c.fail(refuse(codeMissing, "type", `the event has no "type"`), head.EventID)
		return
	}
	h, ok := handlers[*head.Type]
	if !ok {
		c.fail(refuse(codeUnknownEvent, "type", fmt.Sprintf("koe does not serve client events of type %q", short(*head.Type))), head.EventID)
		return
	}
	if err := h(c, data, head.EventID); err != nil {
		c.fail(err, head.EventID)
	}
}

// Reject answers a message the server could not hand over (too large, a
// binary frame).
func (c *Conn) Reject(message string) {
	c.fail(refuse(codeInvalidMessage, "", message), "")
}

// Drain makes the session start no response from now on (koe is
// restarting): response.create is answered with an error. It reports
// whether a response is running; idle is called once it has ended.
func (c *Conn) Drain(idle func()) bool { return c.sess.Drain(idle) }

// Close stops the running response (its reply is stored as far as it was
// heard) and ends the session.
func (c *Conn) Close() {
	c.sess.Close()
}

// fail answers a refused client event.
func (c *Conn) fail(err error, eventID string) {
	var ce *clientError
	switch {
	case errors.As(err, &ce):
	case errors.Is(err, koe.ErrRestarting):
		ce = refuse(codeRestarting, "", "koe is restarting; connect again")
	default:
		p := conversation.Explain(err)
		ce = refuse(codeInvalidValue, "", p.Message)
		if p.Kind == koe.Internal {
			c.log.Error("realtime: client event failed", "err", err)
		}
	}
	c.log.Debug("realtime: client event refused", "code", ce.code, "message", ce.message)
	c.send(c.ctx, errorEvent(ce, eventID))
}

// decode reads a client event into v, or says what is wrong with it.
func decode(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return refuse(codeInvalidValue, te.Field, fmt.Sprintf("%s has the wrong type (%s where %s was expected)", te.Field, te.Value, te.Type))
		}
		return refuse(codeInvalidJSON, "", "the event does not read: "+err.Error())
	}
	return nil
}

// send writes events in order on ctx, each stamped with a new event_id,
// and reports whether every one was queued. Events a dialect lacks are
// left out.
func (c *Conn) send(ctx context.Context, events ...ev) bool {
	return c.sendThen(ctx, nil, events...)
}

// sendThen is send that runs then once the last event is written or
// dropped (if nothing is sent, in its place in the order). then runs
// exactly once, at once if the writer would not take the events: a turn
// waiting on it (SendWait) must not wait for nothing.
func (c *Conn) sendThen(ctx context.Context, then func(), events ...ev) bool {
	events = c.named(events)
	var err error
	switch {
	case len(events) == 0 && then != nil:
		err = c.out.SendThen(ctx, nil, then)
	case len(events) == 0:
		return true
	}
	for i, e := range events {
		e["event_id"] = c.ids.next("event")
		if i == len(events)-1 && then != nil {
			err = c.out.SendThen(ctx, e, then)
		} else {
			err = c.out.Send(ctx, e)
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		if ctx.Err() == nil && c.ctx.Err() == nil {
			c.log.Debug("realtime: event not queued", "err", err)
		}
		if then != nil {
			then()
		}
		return false
	}
	return true
}

// named puts events into the connection's dialect.
func (c *Conn) named(events []ev) []ev {
	if !c.dialect.beta {
		return events
	}
	out := events[:0:0]
	for _, e := range events {
		typ, _ := e["type"].(string)
		name, ok := c.dialect.name(typ)
		if !ok {
			continue
		}
		e["type"] = name
		out = append(out, e)
	}
	return out
}

// sessionUpdate serves session.update: the whole update applies, or none
// of it.
func (c *Conn) sessionUpdate(raw []byte, _ string) error {
	var e struct {
		Session *sessionUpdate `json:"session"`
	}
	if err := decode(raw, &e); err != nil {
		return err
	}
	if e.Session == nil {
		return refuse(codeMissing, "session", `session.update has no "session"`)
	}
	c.mu.Lock()
	prev := c.cfg
	next, err := c.cfg.apply(*e.Session)
	if err == nil {
		c.cfg = next
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if next.voice != prev.voice || e.Session.givesVoice() {
		// Reported as set either way: the API has no way to say a voice
		// is kept but not used.
		used := c.sess.SetVoice(next.voice)
		c.log.Info("realtime: voice set", "voice", next.voice, "speaks_with_it", used)
	}
	c.send(c.ctx, ev{"type": "session.updated", "session": next.render(c.dialect, c.sessionID, c.expires)})
	return nil
}

// config returns a copy of the settings.
func (c *Conn) config() sessionConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}
