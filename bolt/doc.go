// Package bolt is koe's store (history.Store) in a single bbolt file,
// koe.db in the data directory: histories, summaries, prompts, recall and
// knowledge documents with their chunks.
//
// It is the only package that opens the file. bbolt takes an exclusive
// file lock, so a second koe pointed at the same data directory fails fast
// with ErrLocked instead of corrupting state or hanging.
//
// Layout:
//
//	"histories"                 root bucket
//	  <conf uid>                one bucket per character configuration
//	    <history uid>           one bucket per conversation
//	      "messages"            8-byte big-endian sequence -> JSON koe.Record
//	      "summaries"           8-byte big-endian first turn -> JSON koe.SummaryRecord
//	      "images"              8-byte big-endian record sequence, 4-byte big-endian
//	                            image index -> the image's raw bytes
//	"prompts"                   root bucket
//	  <conf uid>                one bucket per character configuration
//	    <prompt name>           -> prompt text as is (not JSON)
//	"recall"                    root bucket, created by the first indexing
//	  <conf uid>                a character's long-term memory (package recall)
//	    "entries"               <history uid> 0x00 <8-byte seq> -> JSON koe.RecallEntry
//	    "vectors"               same key -> little-endian float32 embedding
//	    "marks"                 <history uid> -> JSON koe.RecallMark (indexed up to)
//	    "forgotten"             same key as entries -> empty: never index again
//	    "meta"                  "vector_model" -> the embeddings model's name
//	"knowledge"                 root bucket, created by the first document
//	  <conf uid>                a character's knowledge base (package knowledge);
//	                            removed when its last document goes
//	    "docs"                  <doc id> -> JSON koe.KnowledgeDoc (no text)
//	    "texts"                 <doc id> -> uvarint page count, uvarint page
//	                            offsets, then the document's text as is
//	    "chunks"                <doc id> 0x00 <4-byte seq> -> JSON koe.KnowledgeChunk
//	    "vectors"               same key -> little-endian float32 embedding
//	"mcp_logins"                root bucket, created by the first MCP login
//	  <server> " " <url>        -> mcp's login record (JSON): client and tokens, a secret
//
// Messages live in their own nested bucket, rather than directly in the
// history bucket, so that per-history side data can sit beside them as
// sibling buckets without a migration. "summaries" is such a bucket: it is
// created by the first AddSummary, so older and never-summarised histories
// simply lack it, and Delete removes it with the history. Keying summaries
// by their first turn lists them in turn order and makes re-summarising the
// same range an overwrite.
//
// Knowledge is kept per character, not per history: deleting a history
// leaves it alone. A document's text is apart from its listing entry so
// that listing a knowledge base does not read megabytes of text, and its
// chunks are keyed like recall entries so that replacing or deleting a
// document's chunks is one key range.
//
// Image bytes are kept out of the records (see package history); "images"
// is created by the first record with images.
//
// Open creates missing root buckets, which is how databases written before
// "prompts" existed are upgraded. A prompt bucket is removed when its last
// prompt is reset.
package bolt
