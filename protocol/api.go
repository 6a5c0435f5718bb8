package protocol

// Shapes of koe's REST API that are neither chat nor history messages.

// SessionInfo describes an open session (GET /api/sessions).
type SessionInfo struct {
	ClientUID  string `json:"client_uid"`
	ConfUID    string `json:"conf_uid"`
	ConfName   string `json:"conf_name"`
	HistoryUID string `json:"history_uid"`
}

// OverlayView is what the overlay page needs of a character
// (GET /api/characters/:conf_uid/overlay).
type OverlayView struct {
	ConfUID  string `json:"conf_uid"`
	ConfName string `json:"conf_name"`
	Name     string `json:"name"`
	// EmotionKeywords are the keywords of the model's emotionMap: the
	// page drops them ("[joy]") from subtitles.
	EmotionKeywords []string `json:"emotion_keywords"`
	// Avatar is nil when the character has no avatar pictures: the
	// overlay shows subtitles only.
	Avatar *AvatarView `json:"avatar"`
}

// AvatarView is an avatar's pictures as URLs under /avatars.
type AvatarView struct {
	Idle      string  `json:"idle"`
	Talking   string  `json:"talking"`
	Blink     string  `json:"blink,omitempty"`
	Threshold float64 `json:"threshold"`
	// Emotions are keyed by expression, as an audio frame's
	// actions.expressions carries it, in JSON ("3", "\"smile\"").
	Emotions map[string]EmotionView `json:"emotions"`
}

// EmotionView is the pictures of one emotion; an empty one means the
// plain idle or talking picture.
type EmotionView struct {
	Name    string `json:"name"`
	Idle    string `json:"idle,omitempty"`
	Talking string `json:"talking,omitempty"`
}
