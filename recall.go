package koe

// RecallEntry is one remembered message of a character: a human or AI
// record of one of its histories, as the recall index keeps it.
type RecallEntry struct {
	HistoryUID string `json:"-"`
	Seq        uint64 `json:"-"` // the record's sequence number in its history
	// Turn is the record's turn number in its history (see
	// Record.StartsTurn).
	Turn      int               `json:"turn"`
	Role      string            `json:"role"`
	Name      string            `json:"name,omitempty"`
	Timestamp string            `json:"timestamp"`
	Text      string            `json:"text"`
	Meta      map[string]string `json:"metadata,omitempty"`
	// Vector is the text's embedding, if one was made; stores keep it
	// apart from the entry.
	Vector []float32 `json:"-"`
}

// RecallMark is how far a history has been indexed: its last record read
// and the turn number reached there.
type RecallMark struct {
	Seq  uint64 `json:"seq"`
	Turn int    `json:"turn"`
}
