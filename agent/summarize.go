package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"koe"
)

// summaryTimeout bounds one summarisation call.
const summaryTimeout = 2 * time.Minute

// scheduleLocked starts the summary that is due, if any, in the
// background: no turn ever waits for a summary. Called with a.mu held
// after a turn completes and after a history is loaded; a failed summary
// is tried again at the next call.
func (a *Agent) scheduleLocked() {
	if a.bg.Err() != nil {
		return
	}
	covered := a.coveredLocked()
	var raw []turn
	turns := splitTurns(a.msgs)
	for i, t := range turns {
		// Only the last turn can be the one being answered; an earlier
		// turn without a reply (its LLM call failed) is over all the same.
		if i == len(turns)-1 && !t.Complete() {
			break
		}
		if covered[t.Index] || a.pendingCoversLocked(t.Index) {
			continue
		}
		raw = append(raw, t)
	}
	due := a.pol.due(raw)
	// A summary covers consecutive turns: after a failed summary the raw
	// turns can have a gap (a later summary succeeded), so take the first
	// run only; the rest is scheduled when this one is done.
	for i := 1; i < len(due); i++ {
		if due[i].Index != due[i-1].Index+1 {
			due = due[:i]
			break
		}
	}
	if len(due) == 0 {
		return
	}
	job := summaryJob{thread: a.thread, turns: due, rate: a.rate}
	a.pending[pendingKey{a.thread.HistoryUID, due[0].Index}] = len(due)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.summarize(job)
	}()
}

// pendingKey names a summary being computed: its history and first turn.
type pendingKey struct {
	historyUID string
	first      int
}

// pendingCoversLocked reports whether turn i of the current history
// belongs to a summary being computed.
func (a *Agent) pendingCoversLocked(i int) bool {
	for k, span := range a.pending {
		if k.historyUID == a.thread.HistoryUID && i >= k.first && i < k.first+span {
			return true
		}
	}
	return false
}

// pendingCountLocked counts the current history's summaries in progress.
func (a *Agent) pendingCountLocked() int {
	n := 0
	for k := range a.pending {
		if k.historyUID == a.thread.HistoryUID {
			n++
		}
	}
	return n
}

type summaryJob struct {
	thread Thread
	turns  []turn
	rate   float64
}

// summarize asks the LLM for the summary of job.turns, stores it and
// adds it to memory if the conversation is still on the same history.
func (a *Agent) summarize(job summaryJob) {
	key := pendingKey{job.thread.HistoryUID, job.turns[0].Index}
	added := false
	defer func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.pending, key)
		if added {
			// Another summary may be due already (a history loaded with
			// several missing catches up one at a time).
			a.scheduleLocked()
			a.noticeLocked()
		}
	}()
	original := 0
	for _, t := range job.turns {
		original += t.Chars()
	}
	target := max(int(float64(original)*job.rate), 40)

	ctx, cancel := context.WithTimeout(a.bg, summaryTimeout)
	defer cancel()
	start := time.Now()
	text, _, err := a.opts.LLM.Complete(ctx, a.summaryRequest(job.turns, target))
	text = strings.TrimSpace(text)
	if err == nil && text == "" {
		err = fmt.Errorf("the LLM returned an empty summary")
	}
	if err != nil {
		if a.bg.Err() == nil {
			a.log.Warn("summary failed; will try again after the next turn", "turns", turnRange(job.turns), "err", err)
		}
		return
	}
	turns := make([]int, len(job.turns))
	for i, t := range job.turns {
		turns[i] = t.Index
	}
	rec := koe.SummaryRecord{
		ThreadID:        job.thread.HistoryUID,
		Turns:           turns,
		TurnLength:      len(turns),
		OriginalChars:   original,
		SummaryChars:    len([]rune(text)),
		CompressionRate: job.rate,
		Summary:         text,
		CreatedAt:       a.opts.Now().Format(koe.TimestampLayout),
	}
	if a.opts.Store != nil && job.thread.HistoryUID != "" {
		// A summary made is kept: closing the agent stops summaries being
		// made, not one being stored.
		if err := a.opts.Store.AddSummary(context.WithoutCancel(ctx), job.thread.ConfUID, job.thread.HistoryUID, rec); err != nil {
			a.log.Warn("could not store a summary; it is kept in memory", "turns", turnRange(job.turns), "err", err)
		}
	}
	a.mu.Lock()
	if a.thread == job.thread {
		// A Load of this history since the store write may hold the
		// summary already: like the store, keep one per first turn.
		a.summaries = slices.DeleteFunc(a.summaries, func(s koe.SummaryRecord) bool { return s.Turns[0] == rec.Turns[0] })
		a.summaries = append(a.summaries, rec)
		sortSummaries(a.summaries)
		added = true
	}
	a.mu.Unlock()
	a.log.Debug("summary ready", "turns", turnRange(job.turns), "original_chars", original, "summary_chars", rec.SummaryChars, "took", time.Since(start))
}

// summaryRequest asks for a summary of about target characters.
func (a *Agent) summaryRequest(turns []turn, target int) Request {
	human, character := a.opts.HumanName, a.opts.CharacterName
	if human == "" {
		human = "User"
	}
	if character == "" {
		character = "Assistant"
	}
	var b strings.Builder
	for _, t := range turns {
		fmt.Fprintf(&b, "[Turn %d]\n", t.Index)
		for _, m := range t.Messages {
			switch {
			case m.Role == RoleUser:
				for _, f := range m.Files {
					// The summary keeps that the file was shared, not
					// the file: it would outweigh the conversation.
					fmt.Fprintf(&b, "(%s shared the file %q)\n", human, f.Name)
				}
				fmt.Fprintf(&b, "%s: %s\n", human, m.Content)
			case m.Role == RoleTool:
				fmt.Fprintf(&b, "(result of %s: %s)\n", m.Name, m.Content)
			case len(m.ToolCalls) > 0:
				for _, c := range m.ToolCalls {
					fmt.Fprintf(&b, "(%s called %s with %s)\n", character, c.Name, c.Arguments)
				}
				if m.Content != "" {
					fmt.Fprintf(&b, "%s: %s\n", character, m.Content)
				}
			case m.Role == RoleAssistant:
				note := ""
				if m.Interrupted {
					note = " (interrupted by " + human + ")"
				}
				fmt.Fprintf(&b, "%s: %s%s\n", character, m.Content, note)
			}
		}
	}
	instructions := fmt.Sprintf(`Summarise the conversation below between %s and %s in at most %d characters, in the language they speak.
Keep names, facts, numbers, preferences, decisions, promises and open questions; drop greetings and filler.
Write it as plain prose in the third person. Reply with the summary only.`, human, character, target)
	return Request{Messages: []WireMessage{
		{Role: RoleSystem, Content: instructions},
		{Role: RoleUser, Content: b.String()},
	}}
}

func sortSummaries(s []koe.SummaryRecord) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].Turns[0] < s[j-1].Turns[0]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func turnRange(turns []turn) string {
	return fmt.Sprintf("%d-%d", turns[0].Index, turns[len(turns)-1].Index)
}
