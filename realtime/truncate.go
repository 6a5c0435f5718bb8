package realtime

import (
	"fmt"
	"time"
)

// conversation.item.truncate: the client stopped playing an assistant
// message's audio at audio_end_ms (the user talked over it, or the client
// interrupted it) and says so, so that what is kept of the message is
// what the user heard. koe's turn keeps its reply open until its audio
// has had the time to play (conversation.SessionOptions.PlaysItself), and
// a barge-in leaves it waiting for this: the history and memory then keep
// the text of the pieces played up to audio_end_ms. A message whose audio
// has had the time to play is in the history as it was heard: the truncate
// is acknowledged and changes nothing.

func init() {
	handle("conversation.item.truncate", (*Conn).itemTruncate)
}

// maxAudioEndMs bounds audio_end_ms: an hour, past any reply.
const maxAudioEndMs = 3600 * 1000

// itemTruncate serves conversation.item.truncate.
func (c *Conn) itemTruncate(raw []byte, _ string) error {
	var e struct {
		ItemID       *string `json:"item_id"`
		ContentIndex *int    `json:"content_index"`
		AudioEndMs   *int    `json:"audio_end_ms"`
	}
	if err := decode(raw, &e); err != nil {
		return err
	}
	switch {
	case e.ItemID == nil || *e.ItemID == "":
		return refuse(codeMissing, "item_id", `conversation.item.truncate has no "item_id"`)
	case e.AudioEndMs == nil:
		return refuse(codeMissing, "audio_end_ms", `conversation.item.truncate has no "audio_end_ms"`)
	case *e.AudioEndMs < 0 || *e.AudioEndMs > maxAudioEndMs:
		return refuse(codeInvalidValue, "audio_end_ms", fmt.Sprintf("audio_end_ms is a whole number of milliseconds from 0 to %d", maxAudioEndMs))
	case e.ContentIndex != nil && *e.ContentIndex != 0:
		return refuse(codeInvalidValue, "content_index", "an assistant message has one content part: content_index is 0")
	}
	id, end := *e.ItemID, *e.AudioEndMs
	c.mu.Lock()
	i := c.items.index(id)
	var err error
	latest := false
	switch {
	case i < 0:
		err = c.items.notFound(id, "item_id")
	case c.items.list[i].role != "assistant":
		err = refuse(codeInvalidValue, "item_id", fmt.Sprintf("item %s is not an assistant message: only the character's audio can be truncated", short(id)))
	default:
		latest = c.lastAssistant() == i
	}
	r := c.cur
	// koe's running turn is this message's only while no other response
	// runs (one asked for may not have shown its message yet).
	latest = latest && (r == nil || r.itemID == id)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	// Cut short while it is still being made, it ends here.
	cutShort := r != nil && r.itemID == id
	if cutShort {
		r.cancel()
	}
	heard, truncated := "", false
	if latest {
		heard, truncated = c.sess.Truncate(time.Duration(end) * time.Millisecond)
	}
	if cutShort {
		c.finishCancelled(r, "client_cancelled")
	}
	if truncated {
		c.mu.Lock()
		if i := c.items.index(id); i >= 0 {
			c.items.list[i].rendered["content"] = []ev{{"type": c.dialect.contentType("audio"), "transcript": heard}}
		}
		c.mu.Unlock()
	}
	c.send(c.ctx, ev{"type": "conversation.item.truncated", "item_id": id, "content_index": 0, "audio_end_ms": end})
	return nil
}

// lastAssistant is the index of the newest assistant message, or -1.
// Called locked.
func (c *Conn) lastAssistant() int {
	for i := len(c.items.list) - 1; i >= 0; i-- {
		if c.items.list[i].role == "assistant" {
			return i
		}
	}
	return -1
}
