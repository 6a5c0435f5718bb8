package conversation

import (
	"net/url"

	"koe"
	"koe/agent"
	"koe/protocol"
)

// The wire shape of what the domain packages keep: history records,
// memory state, context reports. protocol owns the shape; these convert.

func memoryStateMessage(st agent.MemoryState) protocol.MemoryState {
	out := protocol.MemoryState{
		Type:            protocol.TypeMemoryState,
		HistoryUID:      st.ThreadID,
		Policy:          st.Policy,
		CompressionRate: st.CompressionRate,
		Turns:           st.Turns,
		Summaries:       make([]protocol.SummaryRecord, 0, len(st.Summaries)),
		Pending:         st.Pending,
		Totals: protocol.MemoryTotals{
			Summaries:     st.Totals.Summaries,
			TurnsCovered:  st.Totals.TurnsCovered,
			OriginalChars: st.Totals.OriginalChars,
			SummaryChars:  st.Totals.SummaryChars,
			Saving:        st.Totals.Saving,
		},
	}
	for _, r := range st.Summaries {
		out.Summaries = append(out.Summaries, protocol.SummaryRecord{
			ThreadID:        r.ThreadID,
			Turns:           r.Turns,
			TurnLength:      r.TurnLength,
			OriginalChars:   r.OriginalChars,
			SummaryChars:    r.SummaryChars,
			CompressionRate: r.CompressionRate,
			Summary:         r.Summary,
			CreatedAt:       r.CreatedAt,
		})
	}
	return out
}

func contextMessage(rep *agent.ContextReport) protocol.Context {
	out := protocol.Context{
		Type:             protocol.TypeContext,
		Time:             rep.Time,
		Model:            rep.Model,
		Messages:         make([]protocol.ContextMessage, 0, len(rep.Messages)),
		ToolTokens:       rep.ToolTokens,
		EstimatedTokens:  rep.EstimatedTokens,
		Budget:           rep.Budget,
		ContextWindow:    rep.ContextWindow,
		Calibration:      rep.Calibration,
		Summaries:        rep.Summaries,
		RawTurns:         rep.RawTurns,
		DroppedTurns:     rep.DroppedTurns,
		DroppedSummaries: rep.DroppedSummaries,
	}
	if rep.Usage != nil {
		out.Usage = &protocol.Usage{PromptTokens: rep.Usage.PromptTokens, CompletionTokens: rep.Usage.CompletionTokens}
	}
	for _, m := range rep.Messages {
		cm := protocol.ContextMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Tokens: m.Tokens}
		for _, c := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, protocol.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		out.Messages = append(out.Messages, cm)
	}
	return out
}

// ImagePath is where a history's image is served over HTTP: the server
// routes it to Hub.Image.
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

// historyDataMessage holds the newest limit visible messages of a history.
func historyDataMessage(conf, uid string, records []koe.Record, limit int) protocol.HistoryData {
	msgs := visibleRecords(conf, uid, records)
	more := len(msgs) > limit
	if more {
		msgs = msgs[len(msgs)-limit:]
	}
	return protocol.HistoryData{Type: protocol.TypeHistoryData, Messages: msgs, More: more}
}

func historyListMessage(conf string, list []koe.ListedHistory) protocol.HistoryList {
	out := protocol.HistoryList{Type: protocol.TypeHistoryList, Histories: make([]protocol.HistoryEntry, 0, len(list))}
	for _, h := range list {
		out.Histories = append(out.Histories, protocol.HistoryEntry{UID: h.UID, LatestMessage: recordMessage(conf, h.UID, h.LatestMessage), Timestamp: h.Timestamp})
	}
	return out
}

// pageLimit bounds a page a client asks for.
func pageLimit(asked, max int) int {
	if asked <= 0 || asked > max {
		return max
	}
	return asked
}
