package livechat

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What the moderators' commands do to the queue and the session's
// blocklist, and the state kept across a restart.

// Clear drops every waiting message and reports how many there were.
func (r *Runner) Clear() int {
	r.mu.Lock()
	n := len(r.queue)
	clear(r.queue)
	r.queue = r.queue[:0]
	r.dropLocked(DropRemoved, n)
	r.mu.Unlock()
	r.log.Info("live chat queue cleared", "dropped", n)
	return n
}

// Ban puts a viewer (login or display name, any case, "@" allowed) on
// the session's blocklist and drops their waiting messages; it reports
// how many were dropped. A name that names no viewer, or a blocklist
// full at live_chat.max_banned, is an error saying so.
func (r *Runner) Ban(name string) (dropped int, err error) {
	key := banKey(name)
	if key == "" {
		return 0, errors.New("ban: name the viewer")
	}
	if n := len([]rune(key)); n > r.cfg.MaxNameChars {
		return 0, fmt.Errorf("ban: a viewer's name is at most %d characters (live_chat.max_name_chars), not %d", r.cfg.MaxNameChars, n)
	}
	r.mu.Lock()
	if !r.banned[key] && len(r.banned) >= r.cfg.MaxBanned {
		r.mu.Unlock()
		return 0, fmt.Errorf("ban: %d viewers are banned already, the most live_chat.max_banned allows; unban one first", r.cfg.MaxBanned)
	}
	r.banned[key] = true
	dropped = r.dropWhereLocked(DropBlocked, func(q queued) bool { return q.Login == key || strings.ToLower(q.User) == key })
	r.mu.Unlock()
	r.log.Info("live chat: viewer banned for this session", "viewer", key, "dropped", dropped)
	return dropped, nil
}

// Unban takes a viewer off the session's blocklist (not off the
// configured one) and reports whether they were on it.
func (r *Runner) Unban(name string) bool {
	key := banKey(name)
	r.mu.Lock()
	was := r.banned[key]
	delete(r.banned, key)
	r.mu.Unlock()
	if was {
		r.log.Info("live chat: viewer unbanned", "viewer", key)
	}
	return was
}

func banKey(name string) string {
	return strings.ToLower(strings.TrimPrefix(strings.TrimSpace(name), "@"))
}

func (r *Runner) bannedLocked() []string {
	out := make([]string, 0, len(r.banned))
	for k := range r.banned {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// dropWhereLocked drops the waiting messages drop picks, counted under
// reason, and reports how many.
func (r *Runner) dropWhereLocked(reason string, drop func(queued) bool) int {
	kept := r.queue[:0]
	for _, q := range r.queue {
		if !drop(q) {
			kept = append(kept, q)
		}
	}
	n := len(r.queue) - len(kept)
	clear(r.queue[len(kept):])
	r.queue = kept
	r.dropLocked(reason, n)
	return n
}

// dropStaleLocked drops the waiting messages older than max_message_age.
func (r *Runner) dropStaleLocked() {
	if r.cfg.MaxMessageAge <= 0 || len(r.queue) == 0 {
		return
	}
	cut := r.clock.Now().Add(-r.cfg.MaxMessageAge)
	if n := r.dropWhereLocked(DropStale, func(q queued) bool { return q.Time.Before(cut) }); n > 0 {
		r.log.Info("live chat: messages older than max_message_age dropped", "count", n, "max_message_age", r.cfg.MaxMessageAge)
	}
}

// Saved is what the live chat keeps across a restart: the streamer's
// pause, the waiting messages and the session's blocklist.
type Saved struct {
	Paused bool           `json:"paused"`
	Queue  []SavedMessage `json:"queue,omitempty"`
	Banned []string       `json:"banned,omitempty"`
}

// SavedMessage is a waiting message as it is kept: already cleaned.
type SavedMessage struct {
	Platform  string    `json:"platform"`
	Channel   string    `json:"channel"`
	User      string    `json:"user"`
	Login     string    `json:"login,omitempty"`
	Text      string    `json:"text,omitempty"`
	Time      time.Time `json:"time"`
	ID        string    `json:"id,omitempty"`
	Action    bool      `json:"action,omitempty"`
	Event     string    `json:"event,omitempty"`
	Amount    int       `json:"amount,omitempty"`
	Recipient string    `json:"recipient,omitempty"`
}

// Save returns the state to keep.
func (r *Runner) Save() Saved {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Saved{Paused: r.paused, Banned: r.bannedLocked()}
	for _, q := range r.queue {
		m := q.Message
		s.Queue = append(s.Queue, SavedMessage{Platform: m.Platform, Channel: m.Channel, User: m.User, Login: m.Login,
			Text: m.Text, Time: m.Time, ID: m.ID, Action: m.Action, Event: m.Event, Amount: m.Amount, Recipient: m.Recipient})
	}
	return s
}

// Restore takes a kept state back before Run starts: the pause, the
// blocklist, and the waiting messages (cleaned again, as they come from a
// file or Redis; within max_queue; the stale are dropped when a turn would
// take them).
func (r *Runner) Restore(s Saved) {
	r.mu.Lock()
	r.paused = s.Paused
	for _, b := range s.Banned {
		if k := banKey(b); k != "" && len(r.banned) < r.cfg.MaxBanned {
			r.banned[k] = true
		}
	}
	for _, m := range s.Queue {
		name := cleanName(m.User, r.cfg.MaxNameChars)
		text := cleanText(m.Text, r.cfg.MaxMessageChars)
		if name == "" || (text == "" && m.Event == "") {
			continue
		}
		login := strings.ToLower(cleanName(m.Login, r.cfg.MaxNameChars))
		key := login
		if key == "" {
			key = strings.ToLower(name)
		}
		r.queue = append(r.queue, queued{key: key, Message: Message{Platform: m.Platform, Channel: m.Channel, User: name, Login: login,
			Text: text, Time: m.Time, ID: m.ID, Action: m.Action, Event: m.Event, Amount: max(m.Amount, 0),
			Recipient: cleanName(m.Recipient, r.cfg.MaxNameChars)}})
	}
	if over := len(r.queue) - r.cfg.MaxQueue; over > 0 {
		r.queue = append(r.queue[:0], r.queue[over:]...)
		r.dropLocked(DropQueueFull, over)
	}
	r.mu.Unlock()
	r.signal()
}

// line is one message as the model reads it: a viewer's words, a /me
// action, or an event to thank for, the viewer's own words quoted.
func (r *Runner) line(m Message) string {
	said := ""
	if m.Text != "" {
		said = " and says: " + quote(m.Text)
	}
	switch m.Event {
	case EventSub:
		months := ""
		if m.Amount > 1 {
			months = " (month " + strconv.Itoa(m.Amount) + ")"
		}
		return "viewer " + m.User + " subscribes" + months + said
	case EventGift:
		if m.Recipient != "" {
			return "viewer " + m.User + " gifts a subscription to " + m.Recipient + said
		}
		return "viewer " + m.User + " gifts " + strconv.Itoa(max(m.Amount, 1)) + " subscriptions" + said
	case EventRaid:
		return "viewer " + m.User + " raids the stream with " + strconv.Itoa(m.Amount) + " viewers" + said
	case EventCheer:
		return "viewer " + m.User + " cheers " + strconv.Itoa(m.Amount) + " bits" + said
	}
	if m.Action {
		return formatViewer(r.cfg.ActionFormat, m.User, quote(m.Text))
	}
	return formatViewer(r.cfg.ViewerFormat, m.User, quote(m.Text))
}
