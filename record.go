package koe

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Roles of a Record, as used by Open-LLM-VTuber.
const (
	RoleMetadata = "metadata"
	RoleHuman    = "human"
	RoleAI       = "ai"
	RoleSystem   = "system"
	// koe's own roles, kept out of what OLV clients are shown: a cycle of
	// a turn that called tools (Content is what it said, ToolCalls its
	// calls), and one call's result.
	RoleToolCall = "tool_call"
	RoleTool     = "tool"
	// A file attached at this point of the conversation: Name is the
	// file's, Content its text, Meta its number and facts (see
	// conversation's files.go).
	RoleFile = "file"
)

// NameProactive marks a stored proactive instruction: a system record that
// starts a turn the way a human message does.
const NameProactive = "proactive"

// TimestampLayout is the layout of Record.Timestamp (and of
// SummaryRecord.CreatedAt): local time to the second, no zone, and a fixed
// width, so that timestamps compare correctly as plain strings, which
// listing histories by activity relies on.
const TimestampLayout = "2006-01-02T15:04:05"

// Record is one entry of a history. Everything but image bytes is stored
// exactly as Open-LLM-VTuber stores it; the JSON tags here are for clients.
type Record struct {
	// Seq is the record's sequence number in its history, set by reads and
	// ignored by writes. It grows with every record, so it orders records
	// and is the cursor for a store's Page.
	Seq         uint64 `json:"-"`
	Role        string `json:"role"`
	Timestamp   string `json:"timestamp"` // TimestampLayout
	Content     string `json:"content"`   // empty for metadata
	Name        string `json:"name,omitempty"`
	Avatar      string `json:"avatar,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"` // AI reply cut off by the user; Content is what they heard
	// Images the user attached to this message, kept so the history shows
	// them and the memory knows they were there.
	Images []Image `json:"images,omitempty"`
	// ToolCalls are a tool_call record's calls; ToolCallID is the call a
	// tool record answers (its Name is the tool's).
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Meta is free metadata kept with the record (e.g. an imported
	// dialogue's own id); koe shows it nowhere.
	Meta map[string]string `json:"metadata,omitempty"`
}

// Shown reports whether the record is part of the chat people read (not
// metadata, system records or tool steps).
func (r Record) Shown() bool { return r.Role == RoleHuman || r.Role == RoleAI }

// StartsTurn reports whether r begins a turn: a human message, or a
// proactive instruction standing in for one. Turn numbers (1, 2, …) count
// these records from a history's start; summaries and recall use them.
func (r Record) StartsTurn() bool {
	return r.Role == RoleHuman || (r.Role == RoleSystem && r.Name == NameProactive)
}

// ToolCall is one function call the model made.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Image is a picture attached to a message. Writes give Data; reads give
// Ref and Size instead, and the bytes are fetched by ref from the store
// (its Image method), so reading a history never loads its pictures.
type Image struct {
	Source   string `json:"source"`
	MimeType string `json:"mime_type"`
	// Data is the picture as standard base64 (a data: URL is accepted too).
	// Required when writing; always empty in what reads return.
	Data string `json:"data,omitempty"`
	// Size is the picture's length in bytes, set by reads.
	Size int `json:"size,omitempty"`
	// Ref names the picture within its history for the store's Image
	// method, set by reads and ignored by writes.
	Ref string `json:"ref,omitempty"`
}

// DecodeData returns the picture's bytes, decoded from Data. An image
// without bytes is an error: it could never be served, and refusing it
// beats a history that shows a picture it cannot load.
func (img Image) DecodeData() ([]byte, error) {
	data := img.Data
	if rest, ok := strings.CutPrefix(data, "data:"); ok {
		header, payload, found := strings.Cut(rest, ",")
		if !found || !strings.HasSuffix(header, ";base64") {
			return nil, errors.New("data URL is not base64")
		}
		data = payload
	}
	if data == "" {
		return nil, errors.New("no data")
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, fmt.Errorf("data is not base64: %w", err)
	}
	return raw, nil
}

// ListedHistory is one entry of a character's list of histories.
type ListedHistory struct {
	UID           string `json:"uid"`
	LatestMessage Record `json:"latest_message"` // last record that is not metadata or a tool step
	Timestamp     string `json:"timestamp"`      // = LatestMessage.Timestamp
	// Opening is the start of the history's first human message (at most
	// OpeningRunes runes of it), "" when none is among its first
	// OpeningRecords records: what a list titles the history by. Stores
	// read those few records only, never the whole history.
	Opening string `json:"opening,omitempty"`
}

// A listed history's opening: the first human message among the first
// OpeningRecords records (the metadata record included), cut to
// OpeningRunes runes. The bounds keep a listing's cost per history fixed,
// whatever the history's length or the first message's.
const (
	OpeningRecords = 16
	OpeningRunes   = 120
)

// Opening cuts a first message to OpeningRunes runes, as a store lists it.
func Opening(content string) string {
	n := 0
	for i := range content {
		if n == OpeningRunes {
			return content[:i]
		}
		n++
	}
	return content
}

// CheckPageLimit refuses a read of records (a page, or records since a
// point) that asks for fewer than one.
func CheckPageLimit(limit int) error {
	if limit < 1 {
		return fmt.Errorf("limit %d, want at least 1: %w", limit, ErrInvalidPage)
	}
	return nil
}
