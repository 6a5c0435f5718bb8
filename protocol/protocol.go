// Package protocol holds the WebSocket wire messages koe exchanges with its
// clients: the Open-LLM-VTuber (OLV) message set, field names exactly as the
// OLV web client expects them, plus koe's own additions.
//
// It is a package of its own because the server, the conversation layer, the
// tests and the load tool all speak it; it depends on nothing but history's
// record shape, which is part of the wire format.
package protocol

import (
	"koe/agent"
	"koe/history"
)

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

	// TypeToken is koe's own: one streamed LLM delta, so that plain text
	// clients see the answer as it is written. OLV clients ignore it.
	TypeToken = "token"

	// koe's memory messages (OLV clients ignore them).
	TypeMemoryState  = "memory-state"
	TypeSystemPrompt = "system-prompt"
	TypeReminder     = "reminder"
	TypeContext      = "context"
)

// koe's own client → server messages.
const (
	TypeSetCompressionRate = "set-compression-rate"
	TypeFetchMemoryState   = "fetch-memory-state"
	TypeFetchSystemPrompt  = "fetch-system-prompt"
	TypeSetSystemPrompt    = "set-system-prompt"
	TypeFetchReminder      = "fetch-reminder"
	TypeSetReminder        = "set-reminder"
	TypeFetchContext       = "fetch-context"
	// TypeRawAudioConfig declares the sample rate of the binary PCM frames
	// (and of raw-audio-data) that follow; 16000 until then.
	TypeRawAudioConfig = "raw-audio-config"
)

// Values of the control message's text.
const (
	ControlStartMic         = "start-mic"
	ControlStopMic          = "stop-mic"
	ControlChainStart       = "conversation-chain-start"
	ControlChainEnd         = "conversation-chain-end"
	ControlInterrupt        = "interrupt"
	ControlMicAudioEnd      = "mic-audio-end"
	ThinkingText            = "Thinking..."
	ConnectionEstablished   = "Connection established"
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
	// koe's own fields.
	SampleRate int      `json:"sample_rate"` // raw-audio-data, raw-audio-config
	Rate       *float64 `json:"rate"`
	Prompt     *string  `json:"prompt"`
	Reminder   *string  `json:"reminder"`
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
type Audio struct {
	Type        string      `json:"type"`
	Audio       *string     `json:"audio"`
	Volumes     []float64   `json:"volumes"`
	SliceLength int         `json:"slice_length"`
	DisplayText DisplayText `json:"display_text"`
	Actions     *Actions    `json:"actions"`
	Forwarded   bool        `json:"forwarded"`
}

// SetModelAndConf tells the client which character and Live2D model to show.
type SetModelAndConf struct {
	Type      string         `json:"type"`
	ModelInfo map[string]any `json:"model_info"`
	ConfName  string         `json:"conf_name"`
	ConfUID   string         `json:"conf_uid"`
	ClientUID string         `json:"client_uid"`
}

// GroupUpdate lists the members of the client's group.
type GroupUpdate struct {
	Type    string   `json:"type"`
	Members []string `json:"members"`
	IsOwner bool     `json:"is_owner"`
}

// GroupOperationResult answers a group request.
type GroupOperationResult struct {
	Type    string `json:"type"`
	Success bool   `json:"success"`
	Message string `json:"message"`
}

// HistoryList answers fetch-history-list.
type HistoryList struct {
	Type      string            `json:"type"`
	Histories []history.Summary `json:"histories"`
}

// HistoryData answers fetch-and-set-history.
type HistoryData struct {
	Type     string           `json:"type"`
	Messages []history.Record `json:"messages"`
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
	Type string `json:"type"`
	agent.MemoryState
}

// Prompt carries a character's editable prompt (system-prompt, reminder).
type Prompt struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Default bool   `json:"default"` // the packaged default, not saved by the user
}

// Context is the exact context of the latest LLM call, for debugging.
type Context struct {
	Type string `json:"type"`
	*agent.ContextReport
}

// NewError builds an error frame.
func NewError(message string) Error { return Error{Type: TypeError, Message: message} }
