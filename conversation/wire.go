package conversation

import (
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
