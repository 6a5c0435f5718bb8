package history

// What `koe migrate` carries from one store to another: everything kept
// of a history, and of a character apart from its histories, as stored
// (JSON, texts and vectors byte for byte). The bbolt store exports it,
// the PostgreSQL store imports it.

// HistoryExport is one history with everything kept of it.
type HistoryExport struct {
	Conf, UID string
	// LastSeq is the sequence number the history's next record follows,
	// at least the largest record's.
	LastSeq   uint64
	Records   []ExportRecord
	Images    []ExportImage
	Summaries []ExportSummary
	Recall    []ExportRecall
	Forgotten []uint64 // recall entries forgotten for good
	Mark      []byte   // the RecallMark's JSON; nil: not indexed
}

// ExportRecord is a record's sequence number and JSON.
type ExportRecord struct {
	Seq  uint64
	Body []byte
}

// ExportImage is the bytes of image Index of record Seq.
type ExportImage struct {
	Seq   uint64
	Index uint32
	Data  []byte
}

// ExportSummary is a summary's first turn and JSON.
type ExportSummary struct {
	FirstTurn uint64
	Body      []byte
}

// ExportRecall is a recall entry's JSON and vector (nil: none).
type ExportRecall struct {
	Seq          uint64
	Body, Vector []byte
}

// ConfExport is what a character keeps apart from its histories.
type ConfExport struct {
	Conf        string
	Prompts     map[string][]byte
	VectorModel string // the model of the recall vectors ("": none)
	Docs        []ExportDoc
}

// ExportDoc is a knowledge document: its KnowledgeDoc JSON, its text as
// EncodeText keeps it, and its chunks.
type ExportDoc struct {
	ID         string
	Meta, Text []byte
	Chunks     []ExportChunk
}

// ExportChunk is a knowledge chunk's JSON and vector (nil: none).
type ExportChunk struct {
	Seq          uint32
	Body, Vector []byte
}
