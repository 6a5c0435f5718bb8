package conversation

import (
	"bytes"
	"encoding/json"

	"koe/protocol"
)

// The later parts of a sentence streamed in parts carry no display text
// (speech_stream.go): a client shows the sentence when its first part
// starts. A watcher that joins while a later part plays would then show
// nothing until the next sentence, so the state it joins with gives that
// part its sentence's display text (and nothing else changes).

// caption is the display text of an audio piece: its own, or, for a
// later part of a streamed sentence, that of its sentence's first part.
type caption struct {
	text  protocol.DisplayText
	later bool // the piece has none of its own
}

// captionOf reads p's display text; prev is the caption of the piece
// before it in the turn.
func captionOf(p airPiece, prev caption) caption {
	if m, ok := p.msg.(protocol.Audio); ok {
		if m.DisplayText == (protocol.DisplayText{}) {
			return caption{text: prev.text, later: true}
		}
		return caption{text: m.DisplayText}
	}
	// A relayed frame: koe leaves display_text out of later parts only,
	// so most frames need no decoding here.
	if !bytes.Contains(p.data, []byte(`"display_text"`)) {
		return caption{text: prev.text, later: true}
	}
	var f struct {
		DisplayText protocol.DisplayText `json:"display_text"`
	}
	if json.Unmarshal(p.data, &f) != nil {
		return caption{}
	}
	return caption{text: f.DisplayText}
}

// captioned is p as a joining watcher's first piece: with its sentence's
// display text when it has none of its own.
func captioned(p airPiece) airPiece {
	if !p.caption.later || p.caption.text == (protocol.DisplayText{}) {
		return p
	}
	if m, ok := p.msg.(protocol.Audio); ok {
		m.DisplayText = p.caption.text
		p.msg = m
		return p
	}
	var f map[string]json.RawMessage
	if json.Unmarshal(p.data, &f) != nil {
		return p
	}
	dt, err := json.Marshal(p.caption.text)
	if err != nil {
		return p
	}
	f["display_text"] = dt
	if data, err := json.Marshal(f); err == nil {
		p.data = data
	}
	return p
}
