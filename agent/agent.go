// Package agent is koe's memory agent: it keeps a conversation's messages
// and summaries, builds the context for every LLM call within a token
// budget, summarises older turns in the background and streams answers.
// It knows nothing about WebSockets; it pushes what it produces to an
// Emitter.
package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"koe"
)

// Emitter receives what the agent produces while a reply streams.
type Emitter interface {
	Token(delta string)
}

// LLM is the model as the agent uses it: streamed replies, and plain
// completions for summaries. Package llm implements it for every
// OpenAI-compatible server. Failures are *LLMError, except a cancelled
// ctx, which comes back as ctx's error.
type LLM interface {
	// Stream calls onDelta with each piece of the reply's text, in order,
	// and returns the tool calls the model made and the usage the server
	// reported.
	Stream(ctx context.Context, req Request, onDelta func(string)) (StreamResult, error)
	// Complete returns the whole reply at once.
	Complete(ctx context.Context, req Request) (string, *Usage, error)
}

// SummaryStore keeps summaries with their history.
type SummaryStore interface {
	AddSummary(ctx context.Context, confUID, historyUID string, r koe.SummaryRecord) error
}

// Thread names the history a memory belongs to.
type Thread struct {
	ConfUID    string
	HistoryUID string
}

// Options build an Agent.
type Options struct {
	LLM       LLM
	Tokenizer *Tokenizer
	Model     string
	// ContextWindow is the model's window in tokens.
	ContextWindow int
	// Vision: the model accepts images (sent as image parts); otherwise
	// the model is told an image was shared that it cannot see.
	Vision bool
	Memory MemoryConfig
	// SystemPrompt is the system prompt ("" = DefaultSystemPrompt).
	SystemPrompt string
	// Persona is the character's own prompt.
	Persona string
	// Rules, if set, end the system prompt of every request, whichever
	// prompt is in use (the default, one the user saved, or the persona
	// in its place): what the session's callers need the model to keep
	// to, such as how to read a live chat's messages.
	Rules string
	// Reminder, if set, is the last user text of every request.
	Reminder string
	// CharacterName and HumanName are used in the default system prompt
	// and in summaries.
	CharacterName, HumanName string
	// Store persists summaries (nil: kept in memory only).
	Store SummaryStore
	// OnSummary is given the memory as users see it after a summary was
	// added, e.g. to tell the client. It is called from a goroutine of the
	// agent's, one call at a time, in order, with no lock of the agent's
	// held; a slow receiver delays later notices, never a turn.
	OnSummary func(MemoryState)
	// Recall, if set, brings back what the character remembers of other
	// conversations (and of this one's summarised past) before each
	// reply, in at most RecallBudget tokens.
	Recall       Recaller
	RecallBudget int
	// Knowledge, if set, is the character's knowledge base: a turn reads
	// it whole when it is small, or the passages retrieved for its
	// message, as numbered documents. Router is knowledge.router: "llm"
	// asks the model first whether to retrieve; otherwise passages are
	// read when they match the message well enough.
	Knowledge Knowledge
	Router    string
	// Tools the model may call (nil: none, one LLM call per turn).
	Tools Toolbox
	// MaxCycles bounds the LLM calls of a turn with tools (0:
	// DefaultMaxCycles); ToolTimeout bounds each tool call (0:
	// DefaultToolTimeout); MaxTools the tools offered in one request (0:
	// DefaultMaxTools), the first ones Tools lists.
	MaxCycles   int
	ToolTimeout time.Duration
	MaxTools    int
	Now         func() time.Time
	Logger      *slog.Logger

	// AskTimeout bounds how long a question put to the user while tools
	// run waits for the answer (0: DefaultAskTimeout); then it declines.
	AskTimeout time.Duration
	// MaxQuestions bounds the questions one call may put (0:
	// DefaultMaxQuestions); more are declined.
	MaxQuestions int
}

// DefaultSystemPrompt is koe's packaged system prompt; users may replace it
// per character. {character} and {human} are filled in.
const DefaultSystemPrompt = `You are {character}, talking with {human} in a real-time voice conversation. Everything you write is spoken aloud as soon as you write it.
Reply in short, natural spoken sentences, usually one to three, in the language {human} speaks. No markdown, lists, code blocks or emoji.
If you are unsure, say so briefly rather than inventing facts.`

// Agent is one conversation's memory plus its LLM. Each session owns its own
// Agent: sessions never share memory.
type Agent struct {
	opts Options
	pol  policy
	log  *slog.Logger

	// Background summaries and the summary notifier run under bg and are
	// waited for by Close.
	bg     context.Context
	stopBg context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	thread    Thread
	msgs      []Message
	summaries []koe.SummaryRecord // oldest first
	// pendingFiles were attached since the last user message; they ride
	// with the next one.
	pendingFiles []File
	pending      map[pendingKey]int // summaries being computed → turns they span
	rate         float64
	system       string
	reminder     string
	// group is the group prompt while the character talks in a group
	// (SetGroupRules); it ends the system prompt after Rules.
	group       string
	last        *ContextReport
	calibration float64
	// noticeDue: a summary was added that OnSummary has not been told
	// of. Notices that pile up while the receiver is busy become one,
	// carrying the latest state.
	noticeDue bool
	// leftOut names the tools the last turn could not offer (over
	// MaxTools), so that a change is logged once, not every turn.
	leftOut string
	// notifying: the notifier goroutine runs. It runs only while notices
	// are due: most sessions never summarise, and an idle one should not
	// hold a goroutine for it.
	notifying bool
}

// New returns an agent with empty memory.
func New(opts Options) *Agent {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Tokenizer == nil {
		opts.Tokenizer = NewTokenizer(opts.Model)
	}
	if opts.ContextWindow <= 0 {
		opts.ContextWindow = DefaultContextWindow
	}
	if opts.Memory.Policy == "" {
		opts.Memory = DefaultMemoryConfig()
	}
	if opts.MaxCycles <= 0 {
		opts.MaxCycles = DefaultMaxCycles
	}
	if opts.ToolTimeout <= 0 {
		opts.ToolTimeout = DefaultToolTimeout
	}
	if opts.MaxTools <= 0 {
		opts.MaxTools = DefaultMaxTools
	}
	if opts.AskTimeout <= 0 {
		opts.AskTimeout = DefaultAskTimeout
	}
	if opts.MaxQuestions <= 0 {
		opts.MaxQuestions = DefaultMaxQuestions
	}
	bg, stop := context.WithCancel(context.Background())
	a := &Agent{
		opts:     opts,
		pol:      opts.Memory.policy(),
		log:      opts.Logger,
		bg:       bg,
		stopBg:   stop,
		pending:  map[pendingKey]int{},
		rate:     opts.Memory.CompressionRate,
		system:   opts.SystemPrompt,
		reminder: opts.Reminder,
	}
	return a
}

// noticeLocked marks a summary notice due and starts the notifier unless
// it runs already. Called with a.mu held by a goroutine under wg.
func (a *Agent) noticeLocked() {
	if a.opts.OnSummary == nil {
		return
	}
	a.noticeDue = true
	if a.notifying || a.bg.Err() != nil {
		return
	}
	a.notifying = true
	a.wg.Add(1)
	go a.notifySummaries()
}

// notifySummaries hands OnSummary the state after each new summary until
// no notice is due. The state is read when the notice is delivered, with
// the lock released before the call, so the receiver gets the latest
// memory and may call into the agent without deadlocking.
func (a *Agent) notifySummaries() {
	defer a.wg.Done()
	for {
		a.mu.Lock()
		if !a.noticeDue || a.bg.Err() != nil {
			a.notifying = false
			a.mu.Unlock()
			return
		}
		a.noticeDue = false
		a.mu.Unlock()
		a.opts.OnSummary(a.State())
	}
}

// Close stops background summaries and summary notices, and waits for
// them (and for an OnSummary call under way).
func (a *Agent) Close() {
	a.stopBg()
	a.wg.Wait()
}

// Load replaces the memory with a history and its summaries, e.g. when
// the client switches history, and catches up on summaries that are due.
func (a *Agent) Load(thread Thread, msgs []Message, summaries []koe.SummaryRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.thread = thread
	a.msgs = append([]Message(nil), msgs...)
	a.pendingFiles = nil
	a.summaries = append([]koe.SummaryRecord(nil), summaries...)
	sortSummaries(a.summaries)
	a.scheduleLocked()
}

// SetThread names the history new messages go to (a new, empty history).
func (a *Agent) SetThread(thread Thread) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.thread = thread
}

// Memory returns a copy of the messages.
func (a *Agent) Memory() []Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Message(nil), a.msgs...)
}

// AddUser starts a turn with the user's message and its images.
func (a *Agent) AddUser(text string, images ...Image) {
	a.mu.Lock()
	a.dropImageBytesLocked()
	files := a.pendingFiles
	a.pendingFiles = nil
	a.mu.Unlock()
	a.add(Message{Role: RoleUser, Content: text, Images: images, Files: files, Time: a.opts.Now()})
}

// AddAssistant ends the turn with the assistant's reply (or the heard part
// of it) and starts any summary that became due.
func (a *Agent) AddAssistant(text string, interrupted bool) {
	a.add(Message{Role: RoleAssistant, Content: text, Interrupted: interrupted, Time: a.opts.Now()})
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropImageBytesLocked()
	a.scheduleLocked()
}

// dropImageBytesLocked forgets the bytes of the images of finished turns.
// Only the turn they arrived with sends them (an earlier turn gets a note),
// and the history store keeps its own copy, so holding them would only
// cost memory: megabytes per image, for as long as the session lives.
// Each message gets a new slice: a caller may still hold the old one.
func (a *Agent) dropImageBytesLocked() {
	for i, m := range a.msgs {
		if !hasImageBytes(m.Images) {
			continue
		}
		kept := make([]Image, len(m.Images))
		for j, img := range m.Images {
			kept[j] = Image{Source: img.Source, MimeType: img.MimeType}
		}
		a.msgs[i].Images = kept
	}
}

func hasImageBytes(images []Image) bool {
	for _, img := range images {
		if img.Data != "" {
			return true
		}
	}
	return false
}

func (a *Agent) add(m Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.msgs = append(a.msgs, m)
}

// buildContext assembles the next request and remembers its report.
// toolsNote, when not empty, ends the system prompt's per-request part: the
// tools available in this cycle. extraReminder, when not empty, follows
// the user's reminder at the end of the request (a citation reminder).
// memories is the turn's recall block ("" = none); docs are what the
// knowledge base gave the turn.
func (a *Agent) buildContext(tools []ToolSpec, toolsNote, extraReminder, memories string, docs []Document) (Request, *ContextReport, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	turns := splitTurns(a.msgs)
	var current []Message
	if n := len(turns); n > 0 && !turns[n-1].Complete() {
		current = turns[n-1].Messages
		turns = turns[:n-1]
	}
	sums := a.summaries
	if max := a.pol.maxSummaries; max > 0 && len(sums) > max {
		sums = sums[len(sums)-max:]
	}
	covered := a.coveredLocked()
	var earlier []turn
	for _, t := range turns {
		// Turns under a summary are never sent raw; turns under a summary
		// that fell out of the window are forgotten.
		if !covered[t.Index] {
			earlier = append(earlier, t)
		}
	}
	lastReply := 0
	if i := lastAssistantIndex(turns); i >= 0 {
		lastReply = turns[i].Index
	}
	system, persona := a.systemPromptLocked(), a.opts.Persona
	if a.opts.Memory.PersonaAsSystem && persona != "" {
		system, persona = persona, ""
	}
	system = joinText(joinText(system, a.opts.Rules), a.group)
	req, rep, err := build(a.opts.Tokenizer, contextParts{
		system:      system,
		dynamic:     "Current date and time: " + a.opts.Now().Format("Monday, 2 January 2006, 15:04 MST") + "." + toolsNote,
		summaries:   sums,
		memories:    memories,
		documents:   documentsMessage(docs),
		earlier:     earlier,
		lastReply:   lastReply,
		persona:     persona,
		current:     current,
		reminder:    joinText(a.reminder, extraReminder),
		tools:       tools,
		window:      a.opts.ContextWindow,
		calibration: a.calibration,
		vision:      a.opts.Vision,
	})
	if err != nil {
		return Request{}, nil, err
	}
	rep.Time = a.opts.Now()
	rep.Model = a.opts.Model
	a.last = &rep
	return req, &rep, nil
}

// recordUsage keeps the provider's count next to koe's and calibrates
// the next budget with their ratio (bounded: one odd report must not
// starve or overfill the context).
func (a *Agent) recordUsage(rep *ContextReport, u *Usage) {
	if u == nil || u.PromptTokens <= 0 || rep.EstimatedTokens <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	rep.Usage = u
	ratio := float64(u.PromptTokens) / float64(rep.EstimatedTokens)
	a.calibration = min(max(ratio, 0.5), 2)
}

// coveredLocked lists the turns under any summary (in context or not).
func (a *Agent) coveredLocked() map[int]bool {
	covered := map[int]bool{}
	for _, s := range a.summaries {
		for _, t := range s.Turns {
			covered[t] = true
		}
	}
	return covered
}

func (a *Agent) systemPromptLocked() string {
	text := a.system
	if text == "" {
		text = DefaultSystemPrompt
	}
	return fillNames(text, a.opts.CharacterName, a.opts.HumanName)
}

// LastContext returns the report of the latest LLM request (nil if none).
func (a *Agent) LastContext() *ContextReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		return nil
	}
	c := *a.last
	return &c
}

// SetCompressionRate changes the rate for summaries started from now on.
func (a *Agent) SetCompressionRate(r float64) error {
	if err := validCompressionRate(r); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rate = r
	return nil
}

// SetSystemPrompt replaces the system prompt ("" restores the default).
func (a *Agent) SetSystemPrompt(text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.system = text
}

// SetGroupRules sets the group prompt, which tells the character who else
// talks and how the lines it is given name their speakers ("" = none: it
// talks with one person again). It ends the system prompt of every
// request, after Rules.
func (a *Agent) SetGroupRules(text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.group = text
}

// SetReminder sets the reminder, the last user text of every request
// ("" = none).
func (a *Agent) SetReminder(text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reminder = text
}

// MemoryState is what users see of the memory: the summaries and totals.
type MemoryState struct {
	ThreadID        string // the history's uid
	Policy          string
	CompressionRate float64
	Turns           int
	Summaries       []koe.SummaryRecord
	Pending         int // summaries being computed
	Totals          MemoryTotals
}

// MemoryTotals add up the summaries.
type MemoryTotals struct {
	Summaries     int
	TurnsCovered  int
	OriginalChars int
	SummaryChars  int
	Saving        float64 // 1 - summary/original
}

// State returns the memory as users see it.
func (a *Agent) State() MemoryState {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := MemoryState{
		ThreadID:        a.thread.HistoryUID,
		Policy:          a.opts.Memory.Policy,
		CompressionRate: a.rate,
		Turns:           len(splitTurns(a.msgs)),
		Summaries:       append([]koe.SummaryRecord{}, a.summaries...),
		Pending:         a.pendingCountLocked(),
	}
	for _, s := range a.summaries {
		st.Totals.Summaries++
		st.Totals.TurnsCovered += len(s.Turns)
		st.Totals.OriginalChars += s.OriginalChars
		st.Totals.SummaryChars += s.SummaryChars
	}
	if st.Totals.OriginalChars > 0 {
		st.Totals.Saving = 1 - float64(st.Totals.SummaryChars)/float64(st.Totals.OriginalChars)
	}
	return st
}

// DefaultContextWindow is used when the configuration names none.
const DefaultContextWindow = 8192

// fillNames puts the names in for {character} and {human}, in one pass
// over text as strings.Replacer would, without building a Replacer (a
// trie of allocations, 1.2 KB a request, for two fixed words).
func fillNames(text, character, human string) string {
	if character == "" {
		character = "the assistant"
	}
	if human == "" {
		human = "the user"
	}
	const charWord, humanWord = "{character}", "{human}"
	i := strings.IndexByte(text, '{')
	if i < 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text) + len(character) + len(human))
	for ; i >= 0; i = strings.IndexByte(text, '{') {
		b.WriteString(text[:i])
		text = text[i:]
		switch {
		case strings.HasPrefix(text, charWord):
			b.WriteString(character)
			text = text[len(charWord):]
		case strings.HasPrefix(text, humanWord):
			b.WriteString(human)
			text = text[len(humanWord):]
		default:
			b.WriteByte('{')
			text = text[1:]
		}
	}
	b.WriteString(text)
	return b.String()
}
