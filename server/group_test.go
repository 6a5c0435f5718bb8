package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/config"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/pgtest"
)

// Groups of clients, as the stock OLV client makes them, against a real
// koe: real WebSocket clients, each with a character of its own.

// groupSpeakerOf is who the group prompt of a request says speaks.
var groupSpeakerOf = koetest.GroupSpeaker

// groupCharacters writes one character file per name (alice.yaml with
// character_name Alice, conf_uid alice_uid, ...).
func groupCharacters(t *testing.T, cfg config.Config, names ...string) {
	t.Helper()
	if err := os.MkdirAll(cfg.CharactersDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		low := strings.ToLower(n)
		body := fmt.Sprintf("conf_name: %s\nconf_uid: %s_uid\ncharacter_name: %s\nhuman_name: %s's human\n", low, low, n, n)
		if err := os.WriteFile(filepath.Join(cfg.CharactersDir, low+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// groupMember is a stock OLV client with a character of its own.
type groupMember struct {
	*client
	uid string
}

// joinAs connects and switches to the character file of name.
func joinAs(t *testing.T, addr, name string) *groupMember {
	t.Helper()
	return joinWith(t, websocket.DefaultDialer, addr, name)
}

// joinWith is joinAs through dialer d.
func joinWith(t *testing.T, d *websocket.Dialer, addr, name string) *groupMember {
	t.Helper()
	c := dialWith(t, d, addr, nil)
	greeting := c.until(isControl("start-mic"))
	m := &groupMember{client: c}
	for _, f := range greeting {
		if f.typ() == "set-model-and-conf" {
			m.uid = f.str("client_uid")
		}
	}
	if m.uid == "" {
		t.Fatal("no client_uid in the greeting")
	}
	c.request(msg{"type": "switch-config", "file": strings.ToLower(name) + ".yaml"}, "config-switched")
	return m
}

// result waits for the next group-operation-result.
func (m *groupMember) result() msg {
	m.t.Helper()
	got := m.until(isType("group-operation-result"))
	return got[len(got)-1]
}

// expectResult waits for a group-operation-result and checks it.
func (m *groupMember) expectResult(ok bool, contains string) {
	m.t.Helper()
	r := m.result()
	if r["success"] != ok || !strings.Contains(r.str("message"), contains) {
		m.t.Fatalf("client %s: group-operation-result %v, want success %v and %q", m.uid, r, ok, contains)
	}
}

// expectUpdate waits for a group-update and checks its members and
// is_owner.
func (m *groupMember) expectUpdate(owner bool, members ...string) msg {
	m.t.Helper()
	got := m.until(isType("group-update"))
	u := got[len(got)-1]
	var have []string
	for _, x := range u["members"].([]any) {
		have = append(have, x.(string))
	}
	if !slices.Equal(have, members) || u["is_owner"] != owner {
		m.t.Fatalf("client %s: group-update %v, want members %v and is_owner %v", m.uid, u, members, owner)
	}
	return u
}

// heard is what a member's client got of a round.
type heard struct {
	speakers  []string // display_text.name of each audio piece with text, in order
	forwarded []bool
	silent    int // audio pieces with no audio
	chains    int
	frames    []msg
}

// playRound plays the part of the OLV client through chains
// conversation-chain-ends: it answers backend-synth-complete with
// frontend-playback-complete and notes every audio piece.
func (m *groupMember) playRound(chains int) (heard, error) {
	var h heard
	for h.chains < chains {
		f, err := m.read(20 * time.Second)
		if err != nil {
			return h, fmt.Errorf("client %s after %d chains: %w", m.uid, h.chains, err)
		}
		h.frames = append(h.frames, f)
		switch {
		case f.typ() == "audio":
			dt, _ := f["display_text"].(map[string]any)
			if text, _ := dt["text"].(string); text != "" {
				name, _ := dt["name"].(string)
				h.speakers = append(h.speakers, name)
				h.forwarded = append(h.forwarded, f["forwarded"] == true)
				if f["audio"] == nil {
					h.silent++
				}
			}
		case f.typ() == "backend-synth-complete":
			m.send(msg{"type": "frontend-playback-complete"})
		case f.typ() == "error":
			return h, fmt.Errorf("client %s: error frame %v", m.uid, f)
		case isControl("conversation-chain-end")(f):
			h.chains++
		}
	}
	return h, nil
}

// playRounds runs playRound on every member at once.
func playRounds(t *testing.T, chains int, members ...*groupMember) []heard {
	t.Helper()
	out := make([]heard, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = m.playRound(chains)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// distinctRuns collapses consecutive repeats: the speakers of a round.
func distinctRuns(names []string) []string {
	var out []string
	for _, n := range names {
		if len(out) == 0 || out[len(out)-1] != n {
			out = append(out, n)
		}
	}
	return out
}

// holdStream holds a fake LLM stream before its chunk i (hold(i) is its
// BeforeChunk) until release is called, at the test's end at the latest.
func holdStream(t *testing.T) (hold func(i int) func(int), release func()) {
	ch := make(chan struct{})
	release = sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release)
	return func(at int) func(int) {
		return func(i int) {
			if i == at {
				<-ch
			}
		}
	}, release
}

// pairUp joins Alice and Bob, and Alice invites Bob: a group of two,
// each told so.
func pairUp(t *testing.T, addr string) (a, b *groupMember) {
	t.Helper()
	return pairUpWith(t, addr, websocket.DefaultDialer)
}

// pairUpWith is pairUp with Bob's client dialed through d.
func pairUpWith(t *testing.T, addr string, d *websocket.Dialer) (a, b *groupMember) {
	t.Helper()
	a, b = joinAs(t, addr, "Alice"), joinWith(t, d, addr, "Bob")
	a.send(msg{"type": "add-client-to-group", "invitee_uid": b.uid})
	a.expectUpdate(true, a.uid, b.uid)
	b.expectUpdate(false, a.uid, b.uid)
	return a, b
}

func startGroupKoe(t *testing.T, respond func(fakellm.Request) fakellm.Reply, edit func(*config.Config), names ...string) (addr string, llm *fakellm.Server) {
	t.Helper()
	llm = startLLM(t, respond)
	cfg := withFakeASR(withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm), llm)
	groupCharacters(t, cfg, names...)
	if edit != nil {
		edit(&cfg)
	}
	m := startKoe(t, cfg)
	return m.Addr(), llm
}

// Three clients with three characters: invitations and their refusals,
// group-update on every member, a message from a member answered by every
// character in turn on every client, heard once each, in order; each
// character's history holds the group's conversation, and a member
// reopens the group's own record.
func TestGroupOfThreeClients(t *testing.T) { groupOfThree(t, nil) }

// The same on the PostgreSQL store: it keeps the characters' histories
// and the group's record as bbolt does.
func TestGroupOfThreeClientsPostgres(t *testing.T) {
	dsn := pgtest.Schema(t)
	groupOfThree(t, func(c *config.Config) { c.Store, c.StoreDSN = config.StorePostgres, dsn })
}

func groupOfThree(t *testing.T, store func(*config.Config)) {
	addr, _ := startGroupKoe(t, func(req fakellm.Request) fakellm.Reply {
		if who := groupSpeakerOf(req); who != "" {
			return fakellm.Reply{Tokens: fakellm.Words(who + " says hello. " + who + " is glad.")}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Alone.")}
	}, func(c *config.Config) {
		c.Conversation.Groups.MaxMembers = 3
		// Each reply waits for every member's frontend-playback-complete:
		// a wait that missed one would run into this, past the reads'
		// deadline.
		c.Conversation.PlaybackTimeout = time.Minute
		if store != nil {
			store(c)
		}
	}, "Alice", "Bob", "Cara", "Dan")
	a, b, c, d := joinAs(t, addr, "Alice"), joinAs(t, addr, "Bob"), joinAs(t, addr, "Cara"), joinAs(t, addr, "Dan")

	// Refused invitations, each saying why.
	a.send(msg{"type": "add-client-to-group", "invitee_uid": "nobody-here"})
	a.expectResult(false, "does not exist")
	a.send(msg{"type": "add-client-to-group", "invitee_uid": a.uid})
	a.expectResult(false, "yourself")

	a.send(msg{"type": "add-client-to-group", "invitee_uid": b.uid})
	a.expectResult(true, "Successfully added "+b.uid)
	b.expectResult(true, "invited to the group by "+a.uid)
	a.expectUpdate(true, a.uid, b.uid)
	b.expectUpdate(false, a.uid, b.uid)

	b.send(msg{"type": "add-client-to-group", "invitee_uid": c.uid})
	b.expectResult(false, "Only the group owner")
	c.send(msg{"type": "add-client-to-group", "invitee_uid": b.uid})
	c.expectResult(false, "already in a group")

	a.send(msg{"type": "add-client-to-group", "invitee_uid": c.uid})
	a.expectResult(true, "Successfully added "+c.uid)
	c.expectResult(true, "invited")
	b.expectResult(true, "Member "+c.uid+" was added")
	u := a.expectUpdate(true, a.uid, b.uid, c.uid)
	b.expectUpdate(false, a.uid, b.uid, c.uid)
	c.expectUpdate(false, a.uid, b.uid, c.uid)
	if u.str("group_id") != "group_"+a.uid {
		t.Fatalf("group-update names the group %q", u.str("group_id"))
	}

	a.send(msg{"type": "add-client-to-group", "invitee_uid": d.uid})
	a.expectResult(false, "conversation.groups.max_members")
	d.alive()

	// Bob's person speaks: Bob answers first, then Cara and Alice, who
	// joined after and before him.
	b.send(msg{"type": "text-input", "text": "Hello everyone", "images": []any{}})
	rounds := playRounds(t, 3, a, b, c)
	want := []string{"Bob", "Cara", "Alice"}
	own := map[*groupMember]string{a: "Alice", b: "Bob", c: "Cara"}
	for i, m := range []*groupMember{a, b, c} {
		h := rounds[i]
		if got := distinctRuns(h.speakers); !slices.Equal(got, want) {
			t.Errorf("client %s heard %v, want %v once each, in order", own[m], got, want)
		}
		if len(h.speakers) != 6 || h.silent != 0 {
			t.Errorf("client %s got %d pieces with text (%d silent), want 6 with audio", own[m], len(h.speakers), h.silent)
		}
		for j, name := range h.speakers {
			if h.forwarded[j] != (name != own[m]) {
				t.Errorf("client %s: a piece of %s has forwarded %v", own[m], name, h.forwarded[j])
			}
		}
		if m != b && !slices.ContainsFunc(h.frames, func(f msg) bool {
			return f.typ() == "user-input-transcription" && f.str("text") == "Hello everyone"
		}) {
			t.Errorf("client %s was not shown the message", own[m])
		}
	}

	// Each character keeps the group's conversation in its own history.
	for _, m := range []*groupMember{a, b, c} {
		list := m.request(msg{"type": "fetch-history-list"}, "history-list")
		hs, _ := list["histories"].([]any)
		if len(hs) != 1 {
			t.Fatalf("client %s has %d histories", own[m], len(hs))
		}
		uid := hs[0].(map[string]any)["uid"].(string)
		data := m.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")
		var text strings.Builder
		for _, r := range data["messages"].([]any) {
			fmt.Fprintf(&text, "%v\n", r.(map[string]any)["content"])
		}
		for _, line := range []string{"Bob's human: Hello everyone", own[m] + " says hello."} {
			if !strings.Contains(text.String(), line) {
				t.Errorf("%s's history lacks %q:\n%s", own[m], line, text.String())
			}
		}
	}
	if !strings.Contains(fmt.Sprint(rounds[2].frames), "Bob says hello") {
		t.Fatal("Cara's client never saw what Bob said")
	}

	// The group's own record, which a member reopens by the history_uid
	// its group-update carries.
	info := a.request(msg{"type": "request-group-info"}, "group-update")
	uid := info.str("history_uid")
	if uid == "" {
		t.Fatalf("group-update after a round names no record: %v", info)
	}
	var page protocol.HistoryPage
	if code := getJSON(t, "http://"+addr+"/api/histories/koe-groups/"+uid+"/messages", &page); code != 200 {
		t.Fatalf("the group's record: HTTP %d", code)
	}
	var record []string
	for _, r := range page.Messages {
		record = append(record, r.Name+": "+r.Content)
	}
	if want := []string{"Bob's human: Hello everyone", "Bob: Bob says hello. Bob is glad.", "Cara: Cara says hello. Cara is glad.", "Alice: Alice says hello. Alice is glad."}; !slices.Equal(record, want) {
		t.Fatalf("the group's record %q, want %q", record, want)
	}
}

// An interrupt from a member who is not speaking stops the round for all:
// the speaker's client is told to stop, the reply keeps what was heard,
// and no other character is asked.
func TestGroupInterruptByAnotherMember(t *testing.T) {
	hold, release := holdStream(t)
	var asked atomic.Int32
	addr, _ := startGroupKoe(t, func(req fakellm.Request) fakellm.Reply {
		if groupSpeakerOf(req) == "" {
			return fakellm.Reply{Tokens: fakellm.Words("Alone.")}
		}
		asked.Add(1)
		return fakellm.Reply{Tokens: fakellm.Words("First sentence here. Then much more."), BeforeChunk: hold(4)}
	}, nil, "Alice", "Bob")
	a, b := pairUp(t, addr)

	a.send(msg{"type": "text-input", "text": "Tell us a story", "images": []any{}})
	// Alice's first sentence reaches Bob's client: he interrupts.
	b.until(func(m msg) bool { return m.typ() == "audio" && m["forwarded"] == true })
	b.send(msg{"type": "interrupt-signal", "text": "First sentence here."})
	got := a.until(isType("interrupt-signal"))
	if sig := got[len(got)-1]; sig.str("text") != "conversation-interrupted" {
		t.Fatalf("the speaker's client got %v", sig)
	}
	release()
	for _, m := range []*groupMember{a, b} {
		m.send(msg{"type": "heartbeat"})
		for _, f := range m.until(isType("heartbeat-ack")) {
			if isControl("conversation-chain-start")(f) || isControl("conversation-chain-end")(f) {
				t.Fatalf("client %s got %v after the interrupt", m.uid, f)
			}
		}
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("%d characters were asked; Bob's must not be after the interrupt", n)
	}
	list := a.request(msg{"type": "fetch-history-list"}, "history-list")
	uid := list["histories"].([]any)[0].(map[string]any)["uid"].(string)
	data := a.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")
	msgs := data["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	if last["content"] != "First sentence here." || last["role"] != "ai" {
		t.Fatalf("Alice's history ends with %v, want the heard part", last)
	}
}

// The owner leaving: the members are told, the one who joined next owns
// the group; a removal that leaves one member ends the group.
func TestGroupOwnerLeaves(t *testing.T) {
	addr, _ := startGroupKoe(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: fakellm.Words("Hi.")}
	}, nil, "Alice", "Bob", "Cara")
	a, b, c := joinAs(t, addr, "Alice"), joinAs(t, addr, "Bob"), joinAs(t, addr, "Cara")
	for _, inv := range []*groupMember{b, c} {
		a.send(msg{"type": "add-client-to-group", "invitee_uid": inv.uid})
		a.expectResult(true, "Successfully added")
	}
	b.expectUpdate(false, a.uid, b.uid)
	b.expectUpdate(false, a.uid, b.uid, c.uid)
	c.expectUpdate(false, a.uid, b.uid, c.uid)

	// A member may not remove another; the owner may.
	c.send(msg{"type": "remove-client-from-group", "target_uid": b.uid})
	c.expectResult(false, "Only group owner or self")

	if err := a.ws.Close(); err != nil {
		t.Fatal(err)
	}
	b.expectResult(true, "Member "+a.uid+" disconnected")
	b.expectUpdate(true, b.uid, c.uid)
	c.expectResult(true, "Member "+a.uid+" disconnected")
	c.expectUpdate(false, b.uid, c.uid)

	b.send(msg{"type": "remove-client-from-group", "target_uid": c.uid})
	b.expectResult(true, "Successfully removed "+c.uid)
	b.expectUpdate(false)
	c.expectResult(true, "You have been removed")
	c.expectUpdate(false)
	b.send(msg{"type": "remove-client-from-group", "target_uid": c.uid})
	b.expectResult(false, "is not in any group")

	// Alone again, a message is an ordinary turn of one's own.
	got := b.turn("just me")
	if slices.ContainsFunc(got, func(f msg) bool { return f["forwarded"] == true }) {
		t.Fatal("a forwarded piece after the group ended")
	}
}

// The chat API posts into a group: every member sees the message and
// hears each character's replies, conversation.groups.rounds of them; the
// request answers with the last reply; /metrics counts each reply as a
// turn.
func TestGroupFromTheChatAPI(t *testing.T) {
	addr, _ := startGroupKoe(t, func(req fakellm.Request) fakellm.Reply {
		if who := groupSpeakerOf(req); who != "" {
			return fakellm.Reply{Tokens: fakellm.Words(who + " answers the viewer.")}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Alone.")}
	}, func(c *config.Config) { c.Conversation.Groups.Rounds = 2 }, "Alice", "Bob")
	a, b := pairUp(t, addr)
	group := "group_" + a.uid

	resp := postJSON(t, "http://"+addr+"/api/chat/invoke", msg{"group_id": "group_nobody", "message": "hi"})
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("a message to no group: HTTP %d, want 404", resp.StatusCode)
	}

	type answer struct {
		status int
		msg    protocol.ChatMessage
	}
	done := make(chan answer, 1)
	go func() {
		resp := postJSON(t, "http://"+addr+"/api/chat/invoke", msg{"group_id": group, "message": "What do you think?", "name": "Viewer"})
		defer resp.Body.Close()
		var m protocol.ChatMessage
		_ = json.NewDecoder(resp.Body).Decode(&m)
		done <- answer{resp.StatusCode, m}
	}()
	rounds := playRounds(t, 4, a, b)
	for i, h := range rounds {
		if got := distinctRuns(h.speakers); !slices.Equal(got, []string{"Alice", "Bob", "Alice", "Bob"}) {
			t.Errorf("client %d heard %v", i, got)
		}
		if !slices.ContainsFunc(h.frames, func(f msg) bool {
			return f.typ() == "user-input-transcription" && f.str("text") == "What do you think?"
		}) {
			t.Errorf("client %d was not shown the message", i)
		}
	}
	got := <-done
	if got.status != 200 || got.msg.Content != "Bob answers the viewer." || got.msg.Name != "Bob" {
		t.Fatalf("the chat API answered %d %+v", got.status, got.msg)
	}
	s := scrape(t, addr, nil)
	s.want(t, 4, "koe_turns_started_total")
	s.want(t, 4, "koe_turns_ended_total", "outcome", "completed")
}

// A spoken message goes to the group too: the speaker is shown what was
// heard, the others get it, and the characters answer it.
func TestGroupSpokenMessage(t *testing.T) {
	var firstInput atomic.Value
	addr, llm := startGroupKoe(t, func(req fakellm.Request) fakellm.Reply {
		who := groupSpeakerOf(req)
		if who == "" {
			return fakellm.Reply{Tokens: fakellm.Words("Alone.")}
		}
		firstInput.CompareAndSwap(nil, contentOf(req))
		return fakellm.Reply{Tokens: fakellm.Words(who + " heard you.")}
	}, nil, "Alice", "Bob")
	llm.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		return fakellm.TranscriptionReply{Text: "Spoken hello"}
	})
	a, b := pairUp(t, addr)

	b.sendMic(tone(time.Second, 0.3))
	rounds := playRounds(t, 2, a, b)
	for i, h := range rounds {
		if !slices.ContainsFunc(h.frames, func(f msg) bool {
			return f.typ() == "user-input-transcription" && f.str("text") == "Spoken hello"
		}) {
			t.Errorf("client %d was not shown what was heard", i)
		}
		if got := distinctRuns(h.speakers); !slices.Equal(got, []string{"Bob", "Alice"}) {
			t.Errorf("client %d heard %v", i, got)
		}
	}
	if got, _ := firstInput.Load().(string); !strings.Contains(got, "Bob's human: Spoken hello") {
		t.Fatalf("Bob was given %q", got)
	}
}

// A new message while a round runs stops it for all and starts a round
// of its own (OLV drops the message); the group's record keeps both
// messages and the first reply as far as it went.
func TestGroupNewMessageStopsTheRound(t *testing.T) {
	hold, release := holdStream(t)
	var calls atomic.Int32
	addr, _ := startGroupKoe(t, func(req fakellm.Request) fakellm.Reply {
		who := groupSpeakerOf(req)
		if calls.Add(1) == 1 {
			// Held after "And": the first sentence is certainly over.
			return fakellm.Reply{Tokens: fakellm.Words(who + " starts. And goes on."), BeforeChunk: hold(3)}
		}
		return fakellm.Reply{Tokens: fakellm.Words(who + " answers the second.")}
	}, nil, "Alice", "Bob")
	a, b := pairUp(t, addr)

	a.send(msg{"type": "text-input", "text": "First message", "images": []any{}})
	b.until(func(m msg) bool { return m.typ() == "audio" && m["forwarded"] == true })
	b.send(msg{"type": "text-input", "text": "Second message", "images": []any{}})
	// A, whose character was speaking, is told to stop; then the new
	// round: Bob first, then Alice.
	a.until(isType("interrupt-signal"))
	release()
	rounds := playRounds(t, 2, a, b)
	for i, h := range rounds {
		if got := distinctRuns(h.speakers); len(got) < 2 || !slices.Equal(got[len(got)-2:], []string{"Bob", "Alice"}) {
			t.Errorf("client %d heard %v, want the new round's Bob then Alice last", i, got)
		}
	}
	info := a.request(msg{"type": "request-group-info"}, "group-update")
	var page protocol.HistoryPage
	if code := getJSON(t, "http://"+addr+"/api/histories/koe-groups/"+info.str("history_uid")+"/messages", &page); code != 200 {
		t.Fatalf("the group's record: HTTP %d", code)
	}
	var record []string
	for _, r := range page.Messages {
		record = append(record, r.Name+": "+r.Content)
	}
	// The stopped reply is kept as far as it had been heard when it was
	// stopped, as a stop keeps a client's: koe's estimate, which may
	// count its first sentence or, stopped as it went out, nothing.
	want := []string{"Alice's human: First message", "Bob's human: Second message", "Bob: Bob answers the second.", "Alice: Alice answers the second."}
	if len(record) == 5 && strings.HasPrefix(record[1], "Alice: Alice starts.") {
		record = slices.Delete(record, 1, 2)
	}
	if !slices.Equal(record, want) {
		t.Fatalf("the group's record %q, want %q", record, want)
	}
}
