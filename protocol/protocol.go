// Package protocol holds the WebSocket wire messages koe exchanges with its
// clients: the Open-LLM-VTuber (OLV) message set, field names exactly as the
// OLV web client expects them, plus koe's own additions.
//
// It is a package of its own because the server, the conversation layer, the
// tests and the load tool all speak it. It owns the wire shape of every
// message and imports nothing of koe: the domain types (history records,
// memory state, context reports) carry no JSON tags of the wire, and the
// conversation layer converts them.
package protocol

import "time"

// Client → server message types.
const (
	TypeTextInput                = "text-input"
	TypeMicAudioData             = "mic-audio-data"
	TypeMicAudioEnd              = "mic-audio-end"
	TypeRawAudioData             = "raw-audio-data"
	TypeAISpeakSignal            = "ai-speak-signal"
	TypeInterruptSignal          = "interrupt-signal"
	TypeFrontendPlaybackComplete = "frontend-playback-complete"
	TypeFetchHistoryList         = "fetch-history-list"
	TypeFetchAndSetHistory       = "fetch-and-set-history"
	TypeCreateNewHistory         = "create-new-history"
	TypeDeleteHistory            = "delete-history"
	TypeFetchConfigs             = "fetch-configs"
	TypeSwitchConfig             = "switch-config"
	TypeFetchBackgrounds         = "fetch-backgrounds"
	TypeHeartbeat                = "heartbeat"
	TypeRequestInitConfig        = "request-init-config"
	TypeAudioPlayStart           = "audio-play-start"
	TypeAddClientToGroup         = "add-client-to-group"
	TypeRemoveClientFromGroup    = "remove-client-from-group"
	TypeRequestGroupInfo         = "request-group-info"
)

// Server → client message types.
const (
	TypeFullText               = "full-text"
	TypeControl                = "control"
	TypeUserInputTranscription = "user-input-transcription"
	TypeAudio                  = "audio"
	TypeBackendSynthComplete   = "backend-synth-complete"
	TypeForceNewMessage        = "force-new-message"
	TypeHistoryList            = "history-list"
	TypeHistoryData            = "history-data"
	TypeNewHistoryCreated      = "new-history-created"
	TypeHistoryDeleted         = "history-deleted"
	TypeConfigFiles            = "config-files"
	TypeConfigSwitched         = "config-switched"
	TypeBackgroundFiles        = "background-files"
	TypeGroupUpdate            = "group-update"
	TypeGroupOperationResult   = "group-operation-result"
	TypeSetModelAndConf        = "set-model-and-conf"
	TypeError                  = "error"
	TypeHeartbeatAck           = "heartbeat-ack"
	TypeToolCallStatus         = "tool_call_status"

	// TypeToken is koe's own: one streamed LLM delta, so that plain text
	// clients see the answer as it is written. OLV clients ignore it.
	TypeToken = "token"

	// TypeStatus is koe's own: a long step of a turn (a tool call)
	// starting, going on, ending or failing.
	TypeStatus = "status"

	// koe's memory messages (OLV clients ignore them).
	TypeMemoryState  = "memory-state"
	TypeSystemPrompt = "system-prompt"
	TypeReminder     = "reminder"
	TypeContext      = "context"
	TypeHistoryPage  = "history-page"
)

// Subprotocol is what koe's own clients offer when they open /client-ws to
// receive koe's events (token, memory-state) besides the OLV set. Stock OLV
// clients do not offer it and get only the messages they know.
const Subprotocol = "koe.v1"

// koe's own client → server messages.
const (
	TypeSetCompressionRate = "set-compression-rate"
	TypeFetchMemoryState   = "fetch-memory-state"
	TypeFetchSystemPrompt  = "fetch-system-prompt"
	TypeSetSystemPrompt    = "set-system-prompt"
	TypeFetchReminder      = "fetch-reminder"
	TypeSetReminder        = "set-reminder"
	TypeFetchContext       = "fetch-context"
	// TypeFetchHistoryPage asks for older messages of a history than
	// history-data carried (see HistoryPage).
	TypeFetchHistoryPage = "fetch-history-page"
	// TypeRawAudioConfig declares the sample rate of the binary PCM frames
	// (and of raw-audio-data) that follow; 16000 until then.
	TypeRawAudioConfig = "raw-audio-config"
)

// Values of the control message's text.
const (
	ControlStartMic       = "start-mic"
	ControlStopMic        = "stop-mic"
	ControlChainStart     = "conversation-chain-start"
	ControlChainEnd       = "conversation-chain-end"
	ControlInterrupt      = "interrupt"
	ControlMicAudioEnd    = "mic-audio-end"
	ThinkingText          = "Thinking..."
	ConnectionEstablished = "Connection established"
	// ConversationInterrupted is the text of the interrupt-signal a group
	// member's client gets when another member interrupted the round.
	ConversationInterrupted = "conversation-interrupted"
	DefaultAudioSliceMillis = 20
)

// Image is one picture attached to an input (camera, screen, clipboard, upload).
type Image struct {
	Source   string `json:"source"`
	Data     string `json:"data"`
	MimeType string `json:"mime_type"`
}

// Inbound is any client message. One flat struct is enough because OLV's
// client messages share few, non-conflicting field names.
type Inbound struct {
	Type       string  `json:"type"`
	Text       string  `json:"text"`
	Images     []Image `json:"images"`
	HistoryUID string  `json:"history_uid"`
	File       string  `json:"file"`
	// Audio is a chunk of float samples in [-1, 1] (mic-audio-data,
	// raw-audio-data); IdleTime is ai-speak-signal's seconds of silence.
	Audio    []float64 `json:"audio"`
	IdleTime float64   `json:"idle_time"`
	// add-client-to-group names the client to invite, and
	// remove-client-from-group the one to remove, by client_uid.
	InviteeUID string `json:"invitee_uid"`
	TargetUID  string `json:"target_uid"`
	// koe's own fields.
	SampleRate int      `json:"sample_rate"` // raw-audio-config
	Rate       *float64 `json:"rate"`
	Prompt     *string  `json:"prompt"`
	Reminder   *string  `json:"reminder"`
	// Before and Limit page through a history (fetch-history-page): the
	// messages older than the message with id Before (0 = the newest).
	Before uint64 `json:"before"`
	Limit  int    `json:"limit"`
	// attach-file: a file for the open history, base64 in Data.
	Name string `json:"name"`
	Mime string `json:"mime"`
	Data string `json:"data"`
	// ask-answer: the question (ask_id) and the button clicked (action:
	// accept, decline, cancel, or an option's label).
	AskID  string `json:"ask_id"`
	Action string `json:"action"`
	// MCPPrompt is the prompt use-mcp-prompt sends (mcpprompts.go).
	MCPPrompt *MCPPromptRef `json:"mcp_prompt"`
}

// Simple is a message that carries nothing but its type.
type Simple struct {
	Type string `json:"type"`
}

// Text is a message whose only field is text (full-text, control,
// user-input-transcription).
type Text struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// Viewers, on the conversation-chain-start of a live chat turn, are
	// the viewers it answers (display names), for overlays to show. A
	// field koe adds: OLV clients read only type and text.
	Viewers []string `json:"viewers,omitempty"`
}

// Control builds a control message.
func Control(text string) Text { return Text{Type: TypeControl, Text: text} }

// FullText builds a subtitle line.
func FullText(text string) Text { return Text{Type: TypeFullText, Text: text} }

// Token is koe's streamed-delta message.
type Token struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

// Tool call states of ToolCallStatus.
const (
	ToolRunning   = "running"
	ToolCompleted = "completed"
	ToolError     = "error"
)

// ToolCallStatus is OLV's tool frame. Its client drops one that lacks any
// of tool_id, tool_name, status or timestamp, and updates an entry in
// place by tool_id. Content is "Input: <arguments>" while it runs, the
// result once completed, "Error: …" on error.
type ToolCallStatus struct {
	Type      string `json:"type"`
	ToolID    string `json:"tool_id"`
	ToolName  string `json:"tool_name"`
	Status    string `json:"status"`
	Content   string `json:"content"`
	Timestamp string `json:"timestamp"` // RFC 3339, UTC
	Name      string `json:"name"`      // the character's
}

// Status states.
const (
	StatusStart    = "start"
	StatusProgress = "progress"
	StatusEnd      = "end"
	StatusError    = "error"
)

// Status is koe's event for a long step of a turn; the same TaskID marks
// its start and its end.
type Status struct {
	Type    string     `json:"type"`
	Content StatusBody `json:"content"`
}

// StatusBody is what a Status says.
type StatusBody struct {
	TaskID       string `json:"task_id"`
	State        string `json:"state"`
	Content      string `json:"content"`
	ErrorDetails string `json:"error_details,omitempty"`
}

// DisplayText is what the client shows for one audio piece.
type DisplayText struct {
	Text   string `json:"text"`
	Name   string `json:"name"`
	Avatar string `json:"avatar"`
}

// Actions drive the avatar while a piece plays.
type Actions struct {
	Expressions []any    `json:"expressions,omitempty"`
	Pictures    []string `json:"pictures,omitempty"`
	Sounds      []string `json:"sounds,omitempty"`
}

// Audio is one spoken (or silent, Audio == nil) piece of a reply.
// DisplayText is left out of the later parts of a sentence streamed in
// several pieces: clients show a piece's text when it starts, and the OLV
// client shows nothing for a piece without one.
type Audio struct {
	Type        string      `json:"type"`
	Audio       *string     `json:"audio"`
	Volumes     []float64   `json:"volumes"`
	SliceLength int         `json:"slice_length"`
	DisplayText DisplayText `json:"display_text,omitzero"`
	Actions     *Actions    `json:"actions"`
	Forwarded   bool        `json:"forwarded"`
}

// SetModelAndConf tells the client which character and Live2D model to show.
type SetModelAndConf struct {
	Type string `json:"type"`
	// ModelInfo is the character's model_info: its map, or that map's
	// JSON encoding (json.RawMessage), which koe makes once per
	// character rather than once per greeting.
	ModelInfo any    `json:"model_info"`
	ConfName  string `json:"conf_name"`
	ConfUID   string `json:"conf_uid"`
	ClientUID string `json:"client_uid"`
	// The names on the character's and the user's messages
	// (character_name, human_name), for koe's own clients: a stock OLV
	// client gets the frame without them.
	CharacterName string `json:"character_name,omitempty"`
	HumanName     string `json:"human_name,omitempty"`
}

// GroupUpdate lists the members of the client's group.
type GroupUpdate struct {
	Type    string   `json:"type"`
	Members []string `json:"members"`
	IsOwner bool     `json:"is_owner"`
	// GroupID and HistoryUID are koe's, which an OLV client ignores: the
	// group's id (the chat API posts into a group by it) and its own
	// record (a history of conf uid koe-groups), once it has a line.
	GroupID    string `json:"group_id,omitempty"`
	HistoryUID string `json:"history_uid,omitempty"`
}

// GroupOperationResult answers a group request.
type GroupOperationResult struct {
	Type    string `json:"type"`
	Success bool   `json:"success"`
	Message string `json:"message"`
}

// HistoryRecord is one message of a history, in the OLV record format plus
// koe's fields: ID orders and pages messages, and images are references to
// fetch over HTTP, never inline bytes.
type HistoryRecord struct {
	ID          uint64         `json:"id,omitempty"`
	Role        string         `json:"role"`
	Timestamp   string         `json:"timestamp"`
	Content     string         `json:"content"`
	Name        string         `json:"name,omitempty"`
	Avatar      string         `json:"avatar,omitempty"`
	Interrupted bool           `json:"interrupted,omitempty"`
	Images      []HistoryImage `json:"images,omitempty"`
}

// HistoryImage is an image attached to a history message: URL serves its
// bytes (with the same authentication as the rest of koe).
type HistoryImage struct {
	Source   string `json:"source"`
	MimeType string `json:"mime_type"`
	URL      string `json:"url"`
}

// HistoryEntry is one history of a listing.
type HistoryEntry struct {
	UID           string        `json:"uid"`
	LatestMessage HistoryRecord `json:"latest_message"`
	Timestamp     string        `json:"timestamp"`
	// Title is koe's name for the history, the first words of its first
	// human message ("" if it has none near its start). koe's own: a
	// stock OLV client's list goes without it (HistoryList.OLV).
	Title string `json:"title,omitempty"`
}

// HistoryList answers fetch-history-list.
type HistoryList struct {
	Type      string         `json:"type"`
	Histories []HistoryEntry `json:"histories"`
}

// OLV returns the list as the OLV protocol words it, for a client that
// did not ask for koe's own messages: it clears koe's titles, in place.
func (l HistoryList) OLV() HistoryList {
	for i := range l.Histories {
		l.Histories[i].Title = ""
	}
	return l
}

// HistoryData answers fetch-and-set-history: the newest messages of the
// history (conversation.history_messages of them); More says that older
// ones exist (fetch them with fetch-history-page).
type HistoryData struct {
	Type     string          `json:"type"`
	Messages []HistoryRecord `json:"messages"`
	More     bool            `json:"more"`
}

// HistoryPage answers fetch-history-page: messages oldest first.
type HistoryPage struct {
	Type       string          `json:"type"`
	HistoryUID string          `json:"history_uid"`
	Messages   []HistoryRecord `json:"messages"`
	More       bool            `json:"more"`
}

// NewHistoryCreated answers create-new-history.
type NewHistoryCreated struct {
	Type       string `json:"type"`
	HistoryUID string `json:"history_uid"`
}

// HistoryDeleted answers delete-history.
type HistoryDeleted struct {
	Type       string `json:"type"`
	Success    bool   `json:"success"`
	HistoryUID string `json:"history_uid"`
}

// ConfigFile is one selectable character.
type ConfigFile struct {
	Filename string `json:"filename"`
	Name     string `json:"name"`
}

// ConfigFiles answers fetch-configs.
type ConfigFiles struct {
	Type    string       `json:"type"`
	Configs []ConfigFile `json:"configs"`
}

// ConfigSwitched confirms switch-config.
type ConfigSwitched struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// BackgroundFiles answers fetch-backgrounds.
type BackgroundFiles struct {
	Type  string   `json:"type"`
	Files []string `json:"files"`
}

// Error reports a failure the client (or the person behind it) can act on.
type Error struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// MemoryState shows the memory: its summaries, totals and settings.
type MemoryState struct {
	Type            string          `json:"type"`
	HistoryUID      string          `json:"history_uid"`
	Policy          string          `json:"policy"`
	CompressionRate float64         `json:"compression_rate"`
	Turns           int             `json:"turns"`
	Summaries       []SummaryRecord `json:"summaries"`
	Pending         int             `json:"pending"`
	Totals          MemoryTotals    `json:"totals"`
}

// SummaryRecord is one summary of consecutive turns.
type SummaryRecord struct {
	ThreadID        string  `json:"thread_id"`
	Turns           []int   `json:"turns"`
	TurnLength      int     `json:"turn_length"`
	OriginalChars   int     `json:"original_chars"`
	SummaryChars    int     `json:"summary_chars"`
	CompressionRate float64 `json:"compression_rate"`
	Summary         string  `json:"summary"`
	CreatedAt       string  `json:"created_at"`
}

// MemoryTotals add up the summaries.
type MemoryTotals struct {
	Summaries     int     `json:"summaries"`
	TurnsCovered  int     `json:"turns_covered"`
	OriginalChars int     `json:"original_chars"`
	SummaryChars  int     `json:"summary_chars"`
	Saving        float64 `json:"saving"` // 1 - summary/original
}

// Prompt carries a character's editable prompt (system-prompt, reminder).
type Prompt struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Default bool   `json:"default"` // the packaged default, not saved by the user
}

// Context is the exact context of the latest LLM call, for debugging.
type Context struct {
	Type             string           `json:"type"`
	Time             time.Time        `json:"time"`
	Model            string           `json:"model"`
	Messages         []ContextMessage `json:"messages"`
	ToolTokens       int              `json:"tool_tokens"`
	EstimatedTokens  int              `json:"estimated_tokens"`
	Budget           int              `json:"budget"`
	ContextWindow    int              `json:"context_window"`
	Calibration      float64          `json:"calibration"`
	Summaries        int              `json:"summaries"`
	RawTurns         int              `json:"raw_turns"`
	DroppedTurns     int              `json:"dropped_turns"`
	DroppedSummaries int              `json:"dropped_summaries"`
	Usage            *Usage           `json:"usage,omitempty"`
}

// ContextMessage is one message of a Context, with its token count.
type ContextMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Tokens     int        `json:"tokens"`
}

// ToolCall is a function call an assistant message asked for.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Usage is what the LLM server reported for a request.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// NewError builds an error frame.
func NewError(message string) Error { return Error{Type: TypeError, Message: message} }

// koe's knowledge messages.
const (
	// TypeAttachFile (in) attaches a file to the open history at this
	// point: {name, mime, data (base64)}.
	TypeAttachFile = "attach-file"
	// TypeFileAttached answers it; TypeFileRefused says why not.
	TypeFileAttached = "file-attached"
	TypeFileRefused  = "file-refused"
	// TypeCitations follows a reply whose text cites documents as [n].
	TypeCitations = "citations"
)

// AttachedFile describes a file attached to a history.
type AttachedFile struct {
	Document int    `json:"document"` // its number, as the model cites it
	Name     string `json:"name"`
	Title    string `json:"title,omitempty"`
	Format   string `json:"format"`
	Bytes    int    `json:"bytes"`
	Tokens   int    `json:"tokens"`
}

// FileAttached tells the client a file is in the history.
type FileAttached struct {
	Type       string       `json:"type"`
	HistoryUID string       `json:"history_uid"`
	File       AttachedFile `json:"file"`
}

// FileRefused tells the client why a file was not taken; nothing of it
// was kept.
type FileRefused struct {
	Type     string `json:"type"`
	Filename string `json:"filename"`
	Reason   string `json:"reason"`
	Kind     string `json:"kind"`
}

// Citation is a document a reply cites as [Document].
type Citation struct {
	Document int    `json:"document"`
	Title    string `json:"title"`
	File     string `json:"file,omitempty"`
	URL      string `json:"url,omitempty"`
	Section  string `json:"section,omitempty"`
	Page     int    `json:"page,omitempty"`
}

// Citations follows the final message of a reply that cites documents.
type Citations struct {
	Type       string     `json:"type"`
	HistoryUID string     `json:"history_uid"`
	RunID      string     `json:"run_id"`
	Citations  []Citation `json:"citations"`
}
