package realtime

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
)

// ev is one server event as it goes on the wire. A map, not a struct per
// event type: the two dialects name the same event differently and some
// fields only one of them has, and the writer marshals it once either way.
type ev map[string]any

// ids makes the ids of one connection: a random stem per kind and a
// counter, so ids are unique across connections and tell their order.
type ids struct {
	stem string
	n    atomic.Uint64
}

func newIDs() *ids {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &ids{stem: hex.EncodeToString(b[:])}
}

// next returns a new id of the given prefix ("event", "item", "resp").
func (i *ids) next(prefix string) string {
	return prefix + "_" + i.stem + strconv.FormatUint(i.n.Add(1), 36)
}

// Event names where the beta dialect's differ from the GA ones; "" means
// the beta API has no such event and it is not sent.
var betaNames = map[string]string{
	"response.output_audio.delta":            "response.audio.delta",
	"response.output_audio.done":             "response.audio.done",
	"response.output_audio_transcript.delta": "response.audio_transcript.delta",
	"response.output_audio_transcript.done":  "response.audio_transcript.done",
	"response.output_text.delta":             "response.text.delta",
	"response.output_text.done":              "response.text.done",
	"conversation.item.added":                "conversation.item.created",
	"conversation.item.done":                 "",
}

// dialect is the event vocabulary a connection speaks.
type dialect struct{ beta bool }

// name returns the event type ga (a GA name) in this dialect; ok is false
// when the dialect has no such event.
func (d dialect) name(ga string) (string, bool) {
	if !d.beta {
		return ga, true
	}
	if b, ok := betaNames[ga]; ok {
		return b, b != ""
	}
	return ga, true
}

// contentType is an item's content type: GA prefixes the output ones
// ("output_audio", "output_text"); beta does not ("audio", "text").
func (d dialect) contentType(kind string) string {
	if d.beta {
		return kind
	}
	return "output_" + kind
}

// Error codes koe answers client events with. Their type is always
// invalid_request_error: every one is about what the client sent.
const (
	codeInvalidJSON      = "invalid_json"
	codeUnknownEvent     = "unknown_event"
	codeMissing          = "missing_required_parameter"
	codeInvalidValue     = "invalid_value"
	codeActiveResponse   = "conversation_already_has_active_response"
	codeNoActiveResponse = "response_cancel_not_active"
	codeItemNotFound     = "item_not_found"
	codeUnsupported      = "unsupported"
	codeInvalidMessage   = "invalid_message" // too large, or binary
	codeRestarting       = "server_restarting"
)

// clientError is a client event refused: what the error event says.
type clientError struct {
	code    string
	message string
	param   string
}

func (e *clientError) Error() string { return e.message }

func refuse(code, param, message string) *clientError {
	return &clientError{code: code, param: param, message: message}
}

// errorEvent is the error event answering the client event eventID ("" if
// it had none or could not be read).
func errorEvent(e *clientError, eventID string) ev {
	body := ev{"type": "invalid_request_error", "code": e.code, "message": e.message, "param": nil, "event_id": nil}
	if e.param != "" {
		body["param"] = e.param
	}
	if eventID != "" {
		body["event_id"] = eventID
	}
	return ev{"type": "error", "error": body}
}
