package histories

import (
	"encoding/json"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"koe"
	"koe/protocol"
)

// Stored records as clients see them. A turn sends its messages in these
// shapes as it stores them (conversation uses them), and a history read
// later shows the same.

// ImagePath is where a history's image is served over HTTP (Image answers
// it).
func ImagePath(confUID, historyUID, ref string) string {
	return "/api/histories/" + url.PathEscape(confUID) + "/" + url.PathEscape(historyUID) + "/images/" + url.PathEscape(ref)
}

// recordMessage is a stored record as clients see it: images become
// references to fetch, never inline bytes.
func recordMessage(conf, uid string, r koe.Record) protocol.HistoryRecord {
	out := protocol.HistoryRecord{
		ID:          r.Seq,
		Role:        r.Role,
		Timestamp:   r.Timestamp,
		Content:     r.Content,
		Name:        r.Name,
		Avatar:      r.Avatar,
		Interrupted: r.Interrupted,
	}
	for _, img := range r.Images {
		out.Images = append(out.Images, protocol.HistoryImage{Source: img.Source, MimeType: img.MimeType, URL: ImagePath(conf, uid, img.Ref)})
	}
	return out
}

// visibleRecords converts the records a client shows (not metadata or
// system records).
func visibleRecords(conf, uid string, records []koe.Record) []protocol.HistoryRecord {
	out := make([]protocol.HistoryRecord, 0, len(records))
	for _, r := range records {
		if r.Shown() {
			out = append(out, recordMessage(conf, uid, r))
		}
	}
	return out
}

// Data is history-data: the newest limit visible messages of a history's
// records, and whether there are older ones.
func Data(conf, uid string, records []koe.Record, limit int) protocol.HistoryData {
	msgs := visibleRecords(conf, uid, records)
	more := len(msgs) > limit
	if more {
		msgs = msgs[len(msgs)-limit:]
	}
	return protocol.HistoryData{Type: protocol.TypeHistoryData, Messages: msgs, More: more}
}

// ToolCallMessage is the ai message of a stored cycle that called tools,
// of turn run.
func ToolCallMessage(r koe.Record, run string, meta protocol.ResponseMetadata) protocol.ChatMessage {
	m := protocol.ChatMessage{Type: protocol.MessageAI, Content: r.Content, Name: r.Name, RunID: run, ResponseMetadata: meta}
	for _, c := range r.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, protocol.ChatToolCall{ID: c.ID, Name: c.Name, Args: toolArgs(c.Arguments), Type: "tool_call"})
	}
	return m
}

// ToolResultMessage is the tool message of one stored call's result, of
// turn run.
func ToolResultMessage(r koe.Record, run string) protocol.ChatMessage {
	return protocol.ChatMessage{Type: protocol.MessageTool, Content: r.Content, ToolCallID: r.ToolCallID, Name: r.Name,
		Status: protocol.ToolSuccess, RunID: run}
}

// toolArgs is a call's arguments as JSON: the object the model wrote, or
// the text as a JSON string when it is not valid JSON.
func toolArgs(args string) json.RawMessage {
	if args == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	quoted, _ := json.Marshal(args)
	return quoted
}

// A turn's reply is stored whole in its AI record, what the cycles that
// called tools said included; each such cycle's words are stored with its
// calls too. The answer is what the AI record says after them.

// AfterSaid is a reply's text without what its tool cycles said (said),
// which the stored reply and the streamed text begin with.
func AfterSaid(text, said string) string {
	return strings.TrimLeftFunc(strings.TrimPrefix(text, said), unicode.IsSpace)
}

// JoinSaid joins what two cycles said the way the reply's text joins them.
func JoinSaid(before, cycle string) string {
	if cycle == "" {
		return before
	}
	return before + Separator(before, cycle) + cycle
}

// Separator is what the reply's text puts between what one cycle said,
// before, and what the next one says: a space, unless either side brings
// its own.
func Separator(before, next string) string {
	if before == "" || endsInSpace(before) || startsWithSpace(next) {
		return ""
	}
	return " "
}

func endsInSpace(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return unicode.IsSpace(r)
}

func startsWithSpace(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsSpace(r)
}
