// Package locomo measures koe's recall on LoCoMo ("Evaluating Very
// Long-Term Conversational Memory of LLM Agents", Maharana et al., 2024):
// each conversation is replayed turn by turn into a fresh character
// through the history store and the recall index a live turn uses, then
// every question builds the memories block a live turn would build, and a
// question counts as found when all of its evidence messages are in it.
//
// The data is not part of koe (its licence allows evaluation use only);
// point -data at a copy of the LoCoMo JSON.
package locomo

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Sample is one LoCoMo conversation with its questions.
type Sample struct {
	ID       string
	SpeakerA string // replayed as the user
	SpeakerB string // replayed as the character
	Sessions []Session
	QA       []QA
}

// Session is one dated conversation of a sample.
type Session struct {
	Number int
	Date   time.Time
	Turns  []Turn
}

// Turn is one message.
type Turn struct {
	Speaker string
	DiaID   string
	Text    string
}

// QA is one question with the ids of the messages that answer it.
type QA struct {
	Question string
	Evidence []string
	Category int
}

// Adversarial is the category of questions with no answer in the
// conversation; evaluations leave it out.
const Adversarial = 5

// Load reads a LoCoMo JSON file (a list of samples).
func Load(path string) ([]Sample, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read LoCoMo data: %w", err)
	}
	var wire []struct {
		SampleID     string                     `json:"sample_id"`
		Conversation map[string]json.RawMessage `json:"conversation"`
		QA           []struct {
			Question string          `json:"question"`
			Evidence []string        `json:"evidence"`
			Category json.RawMessage `json:"category"`
		} `json:"qa"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return nil, fmt.Errorf("decode LoCoMo data %s: %w", path, err)
	}
	out := make([]Sample, 0, len(wire))
	for i, w := range wire {
		s := Sample{ID: w.SampleID}
		if s.ID == "" {
			s.ID = strconv.Itoa(i)
		}
		if err := s.readConversation(w.Conversation); err != nil {
			return nil, fmt.Errorf("sample %s: %w", s.ID, err)
		}
		for _, q := range w.QA {
			cat, err := strconv.Atoi(strings.Trim(string(q.Category), `"`))
			if err != nil {
				return nil, fmt.Errorf("sample %s: question %q: category %s is not a number", s.ID, q.Question, q.Category)
			}
			s.QA = append(s.QA, QA{Question: q.Question, Evidence: q.Evidence, Category: cat})
		}
		out = append(out, s)
	}
	return out, nil
}

func (s *Sample) readConversation(c map[string]json.RawMessage) error {
	if err := json.Unmarshal(c["speaker_a"], &s.SpeakerA); err != nil {
		return fmt.Errorf("speaker_a: %w", err)
	}
	if err := json.Unmarshal(c["speaker_b"], &s.SpeakerB); err != nil {
		return fmt.Errorf("speaker_b: %w", err)
	}
	for k, v := range c {
		num, ok := strings.CutPrefix(k, "session_")
		if !ok || strings.Contains(num, "_") {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		var turns []struct {
			Speaker string `json:"speaker"`
			DiaID   string `json:"dia_id"`
			Text    string `json:"text"`
			Caption string `json:"blip_caption"`
		}
		if err := json.Unmarshal(v, &turns); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		var when string
		if err := json.Unmarshal(c[k+"_date_time"], &when); err != nil {
			return fmt.Errorf("%s_date_time: %w", k, err)
		}
		date, err := ParseDate(when)
		if err != nil {
			return fmt.Errorf("%s_date_time: %w", k, err)
		}
		sess := Session{Number: n, Date: date}
		for _, t := range turns {
			text := t.Text
			if t.Caption != "" {
				// The shared photo is not available; its caption stands
				// for what a vision model would have seen.
				text += " [shares a photo: " + t.Caption + "]"
			}
			sess.Turns = append(sess.Turns, Turn{Speaker: t.Speaker, DiaID: t.DiaID, Text: text})
		}
		s.Sessions = append(s.Sessions, sess)
	}
	sort.Slice(s.Sessions, func(i, j int) bool { return s.Sessions[i].Number < s.Sessions[j].Number })
	if len(s.Sessions) == 0 {
		return fmt.Errorf("no sessions")
	}
	return nil
}

// ParseDate reads LoCoMo's session dates, like "1:56 pm on 8 May, 2023".
func ParseDate(s string) (time.Time, error) {
	t, err := time.ParseInLocation("3:04 pm on 2 January, 2006", strings.TrimSpace(s), time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("date %q is not like \"1:56 pm on 8 May, 2023\"", s)
	}
	return t, nil
}
