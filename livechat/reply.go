package livechat

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Poster posts one line to the chat as the account of the token
// (Twitch's Post).
type Poster interface {
	Post(ctx context.Context, text string) error
}

// postReply queues a spoken reply for the chat, in its short form.
func (r *Runner) postReply(reply string) {
	text := ShortReply(reply, r.cfg.ReplyMaxChars)
	if text == "" {
		return
	}
	r.mu.Lock()
	if len(r.replies) >= r.cfg.ReplyQueue {
		// The chat's rate is behind the character's: the oldest reply
		// is the least worth posting.
		clear(r.replies[:1])
		r.replies = r.replies[1:]
		r.postDropped++
		r.log.Warn("live chat: a reply was not posted in the chat: reply_queue is full (the chat's rate limit is behind)", "reply_queue", r.cfg.ReplyQueue)
	}
	r.replies = append(r.replies, text)
	r.mu.Unlock()
	select {
	case r.replyWake <- struct{}{}:
	default:
	}
}

// RunReplies posts the character's replies to p until ctx ends, one at a
// time and no faster than the chat's limits: reply_rate_messages per
// reply_rate_window, reply_min_interval apart. It returns ctx.Err().
func (r *Runner) RunReplies(ctx context.Context, p Poster) error {
	var sent []time.Time // posts within the window
	var last time.Time
	for {
		r.mu.Lock()
		waiting := len(r.replies) > 0
		r.mu.Unlock()
		if !waiting {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-r.replyWake:
			}
			continue
		}
		now := r.clock.Now()
		cut := now.Add(-r.cfg.ReplyRateWindow)
		i := 0
		for i < len(sent) && !sent[i].After(cut) {
			i++
		}
		sent = sent[i:]
		var wait time.Duration
		if len(sent) >= r.cfg.ReplyRateMessages {
			wait = sent[0].Add(r.cfg.ReplyRateWindow).Sub(now)
		}
		if !last.IsZero() {
			wait = max(wait, last.Add(r.cfg.ReplyMinInterval).Sub(now))
		}
		if wait > 0 {
			timer, stop := r.clock.After(wait)
			select {
			case <-ctx.Done():
				stop()
				return ctx.Err()
			case <-timer:
			}
			stop()
			continue
		}
		r.mu.Lock()
		text := r.replies[0]
		clear(r.replies[:1])
		r.replies = r.replies[1:]
		r.mu.Unlock()
		if err := p.Post(ctx, text); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.mu.Lock()
			r.postDropped++
			r.mu.Unlock()
			r.recordError(fmt.Errorf("live chat: post a reply in the chat: %w", err))
			continue
		}
		sent = append(sent, now)
		last = now
		r.mu.Lock()
		r.posted++
		r.mu.Unlock()
	}
}

// markGroup matches what a reply holds for the page and not for the chat:
// emotion tags ([joy]) and citation marks ([1], [2, 3]), with the space
// before them.
var markGroup = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\s*\[[^\[\]\n]{1,32}\]`)
})

// ShortReply is a reply as it is posted in the chat: without emotion tags
// or citation marks, on one line, not starting as a chat command (/ . !),
// and within max characters: cut after the last whole sentence that fits,
// else after the last whole word, with an ellipsis.
func ShortReply(reply string, max int) string {
	s := markGroup().ReplaceAllString(reply, "")
	s = cleanText(s, utf8.RuneCountInString(s)+1)
	s = strings.TrimLeftFunc(s, func(r rune) bool { return r == '/' || r == '.' || r == '!' || unicode.IsSpace(r) })
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	runes := []rune(s)
	window := runes[:max]
	// A sentence ends at a terminator followed by a space (or by the cut,
	// if the next character is a space); CJK terminators need none.
	end := -1
	for i, r := range window {
		switch r {
		case '。', '！', '？':
			end = i + 1
		case '.', '!', '?', '…':
			if i+1 < len(runes) && unicode.IsSpace(runes[i+1]) {
				end = i + 1
			}
		}
	}
	if end > max/3 {
		return strings.TrimSpace(string(runes[:end]))
	}
	window = runes[:max-1] // room for the ellipsis
	cut := len(window)
	for i := len(window) - 1; i > 0; i-- {
		if unicode.IsSpace(window[i]) {
			cut = i
			break
		}
	}
	if cut < max/3 {
		cut = len(window) // one long word: cut inside it
	}
	return strings.TrimRightFunc(string(runes[:cut]), func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }) + "…"
}
