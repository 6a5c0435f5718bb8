package protocol

import "time"

// The scenes API (POST /api/scenes and below): two or more characters
// talking with each other on a topic, for a stream.

// SceneRequest is the body of POST /api/scenes.
type SceneRequest struct {
	// Characters are the conf_uids of the characters, in their speaking
	// order ("default": the configuration file's own character).
	Characters []string `json:"characters"`
	Topic      string   `json:"topic"`
	// MaxRounds ends the scene after that many rounds (each character
	// one line); Duration (a Go duration such as "10m") after that much
	// running time. Either, both (whichever comes first) or neither
	// (scenes.default_rounds).
	MaxRounds int    `json:"max_rounds,omitempty"`
	Duration  string `json:"duration,omitempty"`
	// History names the history each character keeps the scene in
	// (created if it does not exist); "" makes a new one per scene.
	History string `json:"history,omitempty"`
	// LiveChat: when the live chat's character is in the scene, viewers'
	// messages enter it as lines (default true).
	LiveChat *bool `json:"live_chat,omitempty"`
}

// States of a scene.
const (
	SceneRunning = "running"
	ScenePaused  = "paused"
	SceneEnded   = "ended"
)

// Why a scene ended.
const (
	SceneEndRounds   = "max_rounds" // its rounds were said
	SceneEndDuration = "duration"   // its time was up
	SceneEndStopped  = "stopped"    // the streamer stopped it
	SceneEndFailed   = "failed"     // a turn failed (Error says why)
	SceneEndShutdown = "shutdown"   // koe stopped
	// SceneEndSilent: every character in a row said nothing (their
	// models answered with no words), so the scene would only go
	// through empty rounds.
	SceneEndSilent = "silent"
)

// Kinds of a scene's line.
const (
	SceneLineTopic     = "topic"     // the scene's opening: its topic
	SceneLineCharacter = "character" // a character's reply
	SceneLineViewers   = "viewers"   // viewers' messages from the live chat
)

// SceneInfo is a scene as GET /api/scenes/{id} shows it.
type SceneInfo struct {
	ID         string           `json:"id"`
	State      string           `json:"state"`
	Topic      string           `json:"topic"`
	Characters []SceneCharacter `json:"characters"`
	MaxRounds  int              `json:"max_rounds"`
	Duration   string           `json:"duration,omitempty"`
	// Rounds are the rounds said whole.
	Rounds int `json:"rounds"`
	// Speaking is the conf_uid of the character whose line runs now.
	Speaking string `json:"speaking,omitempty"`
	LiveChat bool   `json:"live_chat"`
	// RecordUID is the scene's own record: every line with its speaker,
	// a history of the groups' records (conf_uid koe-groups).
	RecordUID string `json:"record_uid,omitempty"`
	// Lines are the latest lines (at most scenes.max_lines), oldest first;
	// LinesDropped counts the older ones not shown.
	Lines        []SceneLine `json:"lines"`
	LinesDropped int         `json:"lines_dropped,omitempty"`
	StartedAt    time.Time   `json:"started_at"`
	EndedAt      *time.Time  `json:"ended_at,omitempty"`
	EndReason    string      `json:"end_reason,omitempty"`
	Error        string      `json:"error,omitempty"`
}

// SceneCharacter is one character of a scene.
type SceneCharacter struct {
	ConfUID string `json:"conf_uid"`
	Name    string `json:"name"`
	// HistoryUID is where the character keeps the scene.
	HistoryUID string `json:"history_uid"`
	// ClientUID is the character's session in the scene: the overlay
	// watches it (/client-ws?watch=).
	ClientUID string `json:"client_uid,omitempty"`
}

// SceneLine is one line of a scene.
type SceneLine struct {
	Kind    string `json:"kind"`
	Speaker string `json:"speaker"`
	// ConfUID is the speaking character's ("" for the topic and viewers).
	ConfUID string `json:"conf_uid,omitempty"`
	Text    string `json:"text"`
	// Round is the round the line was said in (from 1; 0: the topic).
	Round int `json:"round"`
	// Interrupted: the line was stopped; Text is what was heard.
	Interrupted bool `json:"interrupted,omitempty"`
}

// SceneList is GET /api/scenes: running and paused scenes first, then
// the latest ended ones.
type SceneList struct {
	Scenes []SceneInfo `json:"scenes"`
}
