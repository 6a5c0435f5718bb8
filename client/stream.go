package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"

	"koe/protocol"
)

// Event is one event of a turn's stream. Type says which field is set:
//
//   - protocol.EventToken: Token, a piece of the answer as it is written;
//   - protocol.EventStatus: Status, a task (task_id "llm:1", "tool:<call
//     id>") starting, going on, ending or failing;
//   - protocol.EventMessage: Message, a finished message: the human
//     message (its additional_kwargs name the history it is stored in),
//     an ai message with tool calls, each tool result, the final answer;
//   - protocol.EventCitations: Citations, the documents the answer just
//     before it cites as [n];
//   - protocol.EventError: Error, a failure of the turn a person can act
//     on (the stream still ends with end);
//   - protocol.EventEnd: nothing; always the last event.
//
// Content is the event's content as sent, for types this package does
// not know yet.
type Event struct {
	Type      string
	Token     string
	Status    *protocol.StatusBody
	Message   *protocol.ChatMessage
	Citations *protocol.CitationsBody
	Error     string
	Content   json.RawMessage
}

// ErrNoEnd is what a stream that stopped before its end event fails with:
// the connection broke or a proxy cut it.
var ErrNoEnd = errors.New("client: the event stream ended before its end event")

// Stream runs one turn and yields its events as koe sends them, ending
// after the end event. A failure yields a zero Event with the error, once,
// and ends the sequence: an *APIError when koe refused the request,
// ErrNoEnd (wrapped) when the stream broke, ctx's error when it was
// cancelled. Leaving the loop early, or cancelling ctx, closes the
// response, and koe then stops the turn.
func (c *Client) Stream(ctx context.Context, req protocol.ChatRequest) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		resp, err := c.send(ctx, http.MethodPost, pathStream, req, "text/event-stream")
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer resp.Body.Close()
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
			yield(Event{}, fmt.Errorf("client: POST /api/chat/stream answered %q, not text/event-stream (is %s a koe?)", resp.Header.Get("Content-Type"), c.base))
			return
		}
		events := newSSEReader(resp.Body, c.maxEvent)
		for {
			data, err := events.next()
			if err != nil {
				switch {
				case ctx.Err() != nil:
					err = ctx.Err()
				case err == io.EOF:
					err = ErrNoEnd
				case !errors.Is(err, errLimit):
					// The connection broke mid-stream (a cut chunk, a
					// reset): the same for the caller as a clean close.
					err = fmt.Errorf("%w: %w", ErrNoEnd, err)
				}
				yield(Event{}, fmt.Errorf("client: chat stream: %w", err))
				return
			}
			ev, err := decodeEvent(data)
			if err != nil {
				yield(Event{}, err)
				return
			}
			if !yield(ev, nil) || ev.Type == protocol.EventEnd {
				return
			}
		}
	}
}

// decodeEvent reads the JSON of one event.
func decodeEvent(data []byte) (Event, error) {
	var raw struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Event{}, fmt.Errorf("client: chat stream: an event is not JSON (%w): %.200q", err, data)
	}
	if raw.Type == "" {
		return Event{}, fmt.Errorf("client: chat stream: an event has no type: %.200q", data)
	}
	ev := Event{Type: raw.Type, Content: raw.Content}
	var err error
	switch raw.Type {
	case protocol.EventToken:
		err = json.Unmarshal(raw.Content, &ev.Token)
	case protocol.EventError:
		err = json.Unmarshal(raw.Content, &ev.Error)
	case protocol.EventStatus:
		ev.Status = new(protocol.StatusBody)
		err = json.Unmarshal(raw.Content, ev.Status)
	case protocol.EventMessage:
		ev.Message = new(protocol.ChatMessage)
		err = json.Unmarshal(raw.Content, ev.Message)
	case protocol.EventCitations:
		ev.Citations = new(protocol.CitationsBody)
		err = json.Unmarshal(raw.Content, ev.Citations)
	}
	if err != nil {
		return Event{}, fmt.Errorf("client: chat stream: the content of a %s event: %w", raw.Type, err)
	}
	return ev, nil
}
