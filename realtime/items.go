package realtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The conversation's items, as the client sees them. koe's history is the
// truth of what was said; the list here only knows the items' ids and
// order, and the text of items no response has answered yet (pending):
// those are what the next response.create hands the turn.

// item is one item of the conversation.
type item struct {
	id     string
	typ    string // "message", "function_call", "function_call_output"
	role   string // of a message: "user", "system", "assistant"
	text   string // a pending message's text
	status string // "completed", "incomplete", "in_progress"
	// pending: no response has answered it yet; it may still be deleted.
	pending bool
	// size is the bytes of words it holds (its text and its rendering).
	size int
	// rendered is the item as the API shows it.
	rendered ev
	// recording is a pending audio message's words, 16 kHz: the turn
	// that answers it hears them (input_events.go).
	recording []int16
	// submit, if set, hands the item to the session once every check
	// has passed (a function call's result); its error refuses the item.
	submit func() error
}

// defaultMaxItems is server.realtime_max_items's default (itemList.max).
const defaultMaxItems = 1024

// itemOverhead is what an item costs besides its words (its rendering,
// id and place in the list): charged against the byte bound, so that
// many tiny items are bounded as well as a few large ones.
const itemOverhead = 256

// itemList is the conversation's items, oldest first.
type itemList struct {
	list []*item
	// byID finds an item of list by its id without a scan.
	byID map[string]*item
	// max bounds the items it remembers (their ids and order; the words
	// are in the history): a conversation of thousands of turns would
	// otherwise grow without end. Older ones can no longer be named by
	// previous_item_id or conversation.item.delete, and the error says
	// so. Unanswered items cannot be forgotten, so past it they are
	// refused: a client adding items and never asking for a response is
	// bounded too.
	max int
	// forgotten counts the items dropped off the front.
	forgotten int
	// limit bounds the bytes of words the items hold
	// (Options.MaxItemBytes; 0: none): unanswered items past it are
	// refused, answered ones forgotten oldest first. bytes is what they
	// hold now.
	limit, bytes int
}

func (l *itemList) last() string {
	if len(l.list) == 0 {
		return ""
	}
	return l.list[len(l.list)-1].id
}

// has reports whether the list holds an item with id.
func (l *itemList) has(id string) bool {
	_, ok := l.byID[id]
	return ok
}

func (l *itemList) index(id string) int {
	it, ok := l.byID[id]
	if !ok {
		return -1
	}
	return slices.Index(l.list, it)
}

// notFound is the error for an id the list does not hold.
func (l *itemList) notFound(id, param string) error {
	msg := fmt.Sprintf("no item has id %q", short(id))
	if l.forgotten > 0 {
		msg += fmt.Sprintf(" (koe remembers the last %d items of a connection: server.realtime_max_items)", l.max)
	}
	return refuse(codeItemNotFound, param, msg)
}

// insert puts it after the item prev ("" for the end; "root" for the
// start), and returns the id of the item before it. koe's history only
// grows at its end: an item may go before pending items only.
func (l *itemList) insert(it *item, prev *string) (string, error) {
	at := len(l.list)
	if prev != nil {
		switch *prev {
		case "":
		case "root":
			at = 0
		default:
			i := l.index(*prev)
			if i < 0 {
				return "", l.notFound(*prev, "previous_item_id")
			}
			at = i + 1
		}
	}
	for _, after := range l.list[at:] {
		if !after.pending {
			return "", refuse(codeUnsupported, "previous_item_id",
				"koe's history only grows at its end: an item can be put before items no response has answered yet, not before "+after.id)
		}
	}
	if it.pending {
		n, held := 1, it.size+itemOverhead
		for _, p := range l.list {
			if p.pending {
				n++
				held += p.size + itemOverhead
			}
		}
		if n > l.max {
			return "", refuse(codeInvalidValue, "item", fmt.Sprintf(
				"%d items are waiting for a response already, server.realtime_max_items (%d): ask for a response first", n-1, l.max))
		}
		if l.limit > 0 && held > l.limit {
			return "", refuse(codeInvalidValue, "item", fmt.Sprintf(
				"the items no response has answered yet would hold %d bytes, over server.max_message_bytes (%d): ask for a response first", held, l.limit))
		}
	}
	before := ""
	if at > 0 {
		before = l.list[at-1].id
	}
	l.list = append(l.list, nil)
	copy(l.list[at+1:], l.list[at:])
	l.list[at] = it
	if l.byID == nil {
		l.byID = map[string]*item{}
	}
	l.byID[it.id] = it
	l.bytes += it.size
	l.trim()
	return before, nil
}

// trim forgets the oldest answered items while the list holds more than
// max items or limit bytes.
func (l *itemList) trim() {
	for len(l.list) > l.max || l.limit > 0 && l.bytes > l.limit {
		i := slices.IndexFunc(l.list, func(it *item) bool { return !it.pending })
		if i < 0 {
			return // unanswered items are bounded when they come
		}
		l.remove(i)
		l.forgotten++
	}
}

// settle gives item i its final state (a response's output, when the
// response ends).
func (l *itemList) settle(i int, status string, rendered ev, size int) {
	it := l.list[i]
	it.status, it.rendered = status, rendered
	l.bytes += size - it.size
	it.size = size
	l.trim()
}

func (l *itemList) remove(i int) {
	l.bytes -= l.list[i].size
	delete(l.byID, l.list[i].id)
	l.list = append(l.list[:i], l.list[i+1:]...)
}

// takePending returns the pending items' words for a response and marks
// them answered: the users' texts, and the system messages, which koe reads
// as instructions for this response.
func (l *itemList) takePending() (user, system string) {
	var u, s []string
	for _, it := range l.list {
		if !it.pending {
			continue
		}
		it.pending = false
		switch it.role {
		case "user":
			u = append(u, it.text)
		case "system":
			s = append(s, it.text)
		}
	}
	return strings.Join(u, "\n"), strings.Join(s, "\n\n")
}

// itemCreate is conversation.item.create.
type itemCreate struct {
	PreviousItemID *string  `json:"previous_item_id"`
	Item           *newItem `json:"item"`
}

// newItem is an item as a client creates it.
type newItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Status  string `json:"status"`
	Content []struct {
		Type       string `json:"type"`
		Text       string `json:"text"`
		Audio      string `json:"audio"`
		Transcript string `json:"transcript"`
	} `json:"content"`
	// function_call and function_call_output items.
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Output    string `json:"output"`
}

// itemMaker turns a client's new item of one type into an item (its id
// and pending state are set by the caller). Each kind registers its own
// (makeItem), so function calls and audio live in their own files.
type itemMaker func(c *Conn, n *newItem) (*item, error)

var itemMakers = map[string]itemMaker{}

func makeItem(typ string, m itemMaker) {
	if _, dup := itemMakers[typ]; dup {
		panic("realtime: two item makers for " + typ)
	}
	itemMakers[typ] = m
}

func init() {
	handle("conversation.item.create", (*Conn).itemCreate)
	handle("conversation.item.delete", (*Conn).itemDelete)
	handle("conversation.item.retrieve", (*Conn).itemRetrieve)
	makeItem("message", messageItem)
}

// maxItemIDLen bounds a client's own item id.
const maxItemIDLen = 64

// itemCreate serves conversation.item.create.
func (c *Conn) itemCreate(raw []byte, _ string) error {
	var e itemCreate
	if err := decode(raw, &e); err != nil {
		return err
	}
	if e.Item == nil {
		return refuse(codeMissing, "item", `conversation.item.create has no "item"`)
	}
	typ := e.Item.Type
	if typ == "" {
		typ = "message"
	}
	mk, ok := itemMakers[typ]
	if !ok {
		return refuse(codeUnsupported, "item.type", fmt.Sprintf("koe does not take items of type %q", short(typ)))
	}
	if len(e.Item.ID) > maxItemIDLen {
		return refuse(codeInvalidValue, "item.id", fmt.Sprintf("an item id is at most %d bytes", maxItemIDLen))
	}
	it, err := mk(c, e.Item)
	if err != nil {
		return err
	}
	it.id = e.Item.ID
	if it.id == "" {
		it.id = c.ids.next("item")
	}
	return c.addItem(it, e.PreviousItemID)
}

// addItem adds a client's item (pending until a response answers it) and
// announces it.
func (c *Conn) addItem(it *item, prev *string) error {
	it.pending = true
	if it.status == "" {
		it.status = "completed"
	}
	it.rendered["id"], it.rendered["object"], it.rendered["status"] = it.id, "realtime.item", it.status
	c.mu.Lock()
	var before string
	var err error
	if c.items.has(it.id) {
		err = refuse(codeInvalidValue, "item.id", fmt.Sprintf("an item with id %q exists already", short(it.id)))
	} else {
		before, err = c.items.insert(it, prev)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	// Last, outside the lock (it calls into the session): what the item
	// hands on is handed only when the item is taken; if the session
	// refuses it, the item goes again, never announced.
	if it.submit != nil {
		if err := it.submit(); err != nil {
			c.mu.Lock()
			if i := c.items.index(it.id); i >= 0 {
				c.items.remove(i)
			}
			c.mu.Unlock()
			return err
		}
	}
	c.send(c.ctx,
		ev{"type": "conversation.item.added", "previous_item_id": nullable(before), "item": it.rendered},
		ev{"type": "conversation.item.done", "previous_item_id": nullable(before), "item": it.rendered})
	return nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// messageItem makes a user's or a system message of input_text parts.
// The words of the assistant are the character's own: koe stores what it
// said, and an assistant item cannot put words in its mouth.
func messageItem(c *Conn, n *newItem) (*item, error) {
	switch n.Role {
	case "user", "system":
	case "assistant":
		return nil, refuse(codeUnsupported, "item.role", "koe's history holds what the character said itself: assistant items cannot be added")
	case "":
		return nil, refuse(codeMissing, "item.role", `a message item needs a "role" (user or system)`)
	default:
		return nil, refuse(codeInvalidValue, "item.role", fmt.Sprintf("role %q is not user or system", short(n.Role)))
	}
	if len(n.Content) == 0 {
		return nil, refuse(codeMissing, "item.content", "a message item needs content")
	}
	var text []string
	var recording []int16
	content := make([]ev, 0, len(n.Content))
	for i, p := range n.Content {
		switch p.Type {
		case "input_text", "text":
			text = append(text, p.Text)
			content = append(content, ev{"type": "input_text", "text": p.Text})
		default:
			if mk, ok := contentMakers[p.Type]; ok && n.Role == "user" {
				t, part, rec, err := mk(c, p.Audio, p.Transcript)
				if err != nil {
					return nil, err
				}
				text = append(text, t)
				recording = append(recording, rec...)
				content = append(content, part)
				continue
			}
			return nil, refuse(codeUnsupported, fmt.Sprintf("item.content[%d].type", i), fmt.Sprintf("koe does not take %q content in a %s message", short(p.Type), n.Role))
		}
	}
	words := strings.TrimSpace(strings.Join(text, "\n"))
	if words == "" && recording == nil {
		return nil, refuse(codeMissing, "item.content", "the message has no text")
	}
	return &item{typ: "message", role: n.Role, text: words, size: 2 * len(words), recording: recording,
		rendered: ev{"type": "message", "role": n.Role, "content": content}}, nil
}

// contentMaker reads a user message's content part of one type other than
// text (input_audio: audio is its base64 audio): the words it stands for
// and the part as the item shows it, or the recording (16 kHz) that koe's
// speech recognition is to hear.
type contentMaker func(c *Conn, audio, transcript string) (text string, part ev, recording []int16, err error)

var contentMakers = map[string]contentMaker{}

// itemDelete serves conversation.item.delete: an item no response has
// answered yet is taken back; an answered one is in the history, which
// keeps what was said.
func (c *Conn) itemDelete(raw []byte, _ string) error {
	var e struct {
		ItemID *string `json:"item_id"`
	}
	if err := decode(raw, &e); err != nil {
		return err
	}
	if e.ItemID == nil || *e.ItemID == "" {
		return refuse(codeMissing, "item_id", `conversation.item.delete has no "item_id"`)
	}
	id := *e.ItemID
	c.mu.Lock()
	i := c.items.index(id)
	var err error
	switch {
	case i < 0:
		err = c.items.notFound(id, "item_id")
	case !c.items.list[i].pending:
		err = refuse(codeUnsupported, "item_id", "item "+short(id)+" has been answered and is in koe's history, which keeps what was said; only items no response has answered yet can be deleted")
	default:
		c.items.remove(i)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.send(c.ctx, ev{"type": "conversation.item.deleted", "item_id": id})
	return nil
}

// itemRetrieve serves conversation.item.retrieve.
func (c *Conn) itemRetrieve(raw []byte, _ string) error {
	var e struct {
		ItemID string `json:"item_id"`
	}
	if err := decode(raw, &e); err != nil {
		return err
	}
	c.mu.Lock()
	i := c.items.index(e.ItemID)
	var rendered json.RawMessage
	switch r := c.cur; {
	case r != nil && r.opened && !r.ended && r.itemID == e.ItemID:
		// The message being said: as far as it went.
		rendered, _ = json.Marshal(c.outputItem(r, "in_progress", r.text.String()))
	case i >= 0:
		rendered, _ = json.Marshal(c.items.list[i].rendered)
	}
	err := c.items.notFound(e.ItemID, "item_id")
	c.mu.Unlock()
	if i < 0 {
		return err
	}
	c.send(c.ctx, ev{"type": "conversation.item.retrieved", "item": rendered})
	return nil
}
