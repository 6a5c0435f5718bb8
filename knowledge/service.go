package knowledge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"koe"
	"koe/internal/quote"
)

// DocStore keeps the documents themselves, whatever the store of their
// chunks: koe's store (a history.Store).
type DocStore interface {
	PutKnowledgeDoc(ctx context.Context, conf string, d koe.KnowledgeDoc, text string, pages []int) error
	KnowledgeDocs(ctx context.Context, conf string) ([]koe.KnowledgeDoc, error)
	KnowledgeText(ctx context.Context, conf, id string) (text string, pages []int, err error)
	DeleteKnowledgeDoc(ctx context.Context, conf, id string) (bool, error)
	KnowledgeConfs(ctx context.Context) ([]string, error)
}

// Embedder makes vectors: llm.Embedder, for any /v1/embeddings.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	EmbedQuery(ctx context.Context, text string) ([]float32, error)
}

// Options build a Service.
type Options struct {
	Config Config
	Docs   DocStore
	Index  Index
	// Embedder, if set, embeds chunks and questions for stores that rank
	// by vectors; nil: keywords only.
	Embedder Embedder
	// Count counts tokens when no character's tokenizer is at hand
	// (catching up an index at start, reading again what another
	// instance changed).
	Count func(string) int
	// Peers, if set, shares changes with the other koe instances on the
	// same store (see Peers); nil: this instance is the store's only one.
	Peers  Peers
	Logger *slog.Logger
}

// Service keeps the characters' knowledge bases: it reads uploaded files,
// keeps their text, chunks and indexes them, and answers what a turn
// should read.
type Service struct {
	opts Options
	cfg  Config
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	// ready is closed once the index has caught up with the stored
	// documents (see Open).
	ready chan struct{}
	// wg holds follow, which reads again into cat (this instance's own
	// index, nil if it keeps none) what other instances changed.
	wg  sync.WaitGroup
	cat *catalog
	// wake tells follow that something is stale.
	wake chan struct{}

	mu sync.Mutex
	// bases caches each character's document list (nil entry: not read).
	bases map[string]*base
	// gens counts each character's changes, and epoch the times every
	// character may have changed, so that a list read before a change is
	// not cached after it.
	gens  map[string]int
	epoch int
	// busy holds the documents being ingested or deleted, by conf and id:
	// a second change to one of them is refused rather than raced.
	busy map[string]bool
	// writes counts, by conf, the changes made here as they begin and
	// end: a document read again for another instance's change is not
	// put in the index if one of this instance's changes overlapped the
	// read. applying holds the documents being put so, which a change
	// here waits for (applied is signalled): it is a moment, no I/O.
	writes   map[string]uint64
	applying map[string]bool
	applied  *sync.Cond
	// stale is what other instances changed, for follow.
	stale stale
	// embedFailing: the last embedding request failed; the warning is
	// logged once per streak.
	embedFailing bool
	// ingests holds a token for each file being read
	// (knowledge.max_concurrent_ingests); ingesting counts them for
	// Close, which sets closed (under mu) before it waits, so that no
	// ingest starts once it waits.
	ingests   chan struct{}
	ingesting sync.WaitGroup
	closed    bool
}

// base is what a turn needs of a character's knowledge base without
// reading the database: its documents and their total size.
type base struct {
	docs   []koe.KnowledgeDoc
	tokens int
	// whole caches the documents' text, read once the base fits whole.
	whole []Passage
}

// New returns a Service; Open catches the index up with the documents.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Count == nil {
		opts.Count = func(s string) int { return (len(s) + 3) / 4 }
	}
	opts.Config = opts.Config.withReadingBounds()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{
		opts: opts, cfg: opts.Config, log: opts.Logger,
		ctx: ctx, cancel: cancel, ready: make(chan struct{}), wake: make(chan struct{}, 1),
		bases: map[string]*base{}, gens: map[string]int{}, busy: map[string]bool{},
		writes: map[string]uint64{}, applying: map[string]bool{},
		ingests: make(chan struct{}, opts.Config.MaxConcurrentIngests),
	}
	s.applied = sync.NewCond(&s.mu)
	if opts.Peers != nil {
		if s.cat = s.replica(); s.cat != nil {
			s.wg.Add(1)
			go s.follow()
		}
		opts.Peers.Follow(s.changed)
	}
	return s
}

// Open brings the index in line with the stored documents: a memory index
// starts empty and is filled, and a persistent one that lost or missed
// chunks is rebuilt for the characters concerned. Turns that need a
// knowledge base wait for it (within their own ctx). Open returns when it
// is done or ctx (or Close) ends it.
func (s *Service) Open(ctx context.Context) error {
	defer close(s.ready)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	confs, err := s.opts.Docs.KnowledgeConfs(ctx)
	if err != nil {
		return fmt.Errorf("knowledge: list characters: %w", err)
	}
	for _, conf := range confs {
		if err := s.catchUp(ctx, conf); err != nil {
			return err
		}
	}
	return nil
}

// catchUp reindexes conf's documents when the index does not hold exactly
// the chunks they were stored with.
func (s *Service) catchUp(ctx context.Context, conf string) error {
	docs, err := s.opts.Docs.KnowledgeDocs(ctx, conf)
	if err != nil {
		return fmt.Errorf("knowledge: documents of %s: %w", conf, err)
	}
	want := 0
	for _, d := range docs {
		want += d.Chunks
	}
	have, err := s.opts.Index.Len(ctx, conf)
	if err != nil {
		return fmt.Errorf("knowledge: index of %s: %w", conf, err)
	}
	if have == want {
		return nil
	}
	start := time.Now()
	// The memory store's chunks are this instance's alone: the others
	// need to know only when a document's chunk count is stored anew.
	_, memory := s.opts.Index.(*MemoryIndex)
	wrote := false
	defer func() {
		if wrote {
			s.announce(ctx, conf, "")
		}
	}()
	for _, d := range docs {
		text, pages, err := s.opts.Docs.KnowledgeText(ctx, conf, d.ID)
		if err != nil {
			return fmt.Errorf("knowledge: text of %s: %w", d.Name, err)
		}
		chunks, err := s.chunks(ctx, d, Text{Body: text, Pages: pages, Format: d.Format, Title: d.Title}, s.opts.Count)
		if err != nil {
			return err
		}
		s.embed(ctx, chunks, nil)
		if err := s.opts.Index.Put(ctx, conf, d.ID, chunks); err != nil {
			return fmt.Errorf("knowledge: index %s: %w", d.Name, err)
		}
		wrote = wrote || !memory
		if len(chunks) != d.Chunks {
			// Counted with another tokenizer: the new number is the one
			// the index now holds.
			d.Chunks = len(chunks)
			wrote = true
			if err := s.opts.Docs.PutKnowledgeDoc(ctx, conf, d, text, pages); err != nil {
				return fmt.Errorf("knowledge: store %s: %w", d.Name, err)
			}
		}
	}
	s.forget(conf)
	s.log.Info("knowledge: index caught up", "conf_uid", conf, "documents", len(docs), "had", have, "chunks", want, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// Close stops Open, ingests under way and the reading of other instances'
// changes, and waits for the ingests and the reading.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.ingesting.Wait()
	s.wg.Wait()
}

// waitReady waits for Open to finish.
func (s *Service) waitReady(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Upload is a file as it arrives.
type Upload struct {
	Name string
	Mime string
	Data []byte
}

// Progress is how far an ingest got, for status events.
type Progress struct {
	File    string
	Stage   string // "reading", "indexing", "done"
	Percent int
}

// Add reads u into conf's knowledge base, replacing the document of the
// same name. count is the character's tokenizer. Progress, if set, is
// called from Add's goroutine as the work goes on. A refusal is a
// *FileError and leaves nothing behind; so does any other failure. The
// reading is bounded by knowledge.max_inflated_bytes,
// max_document_tokens, ingest_timeout and max_concurrent_ingests, and
// ends with ctx or Close.
func (s *Service) Add(ctx context.Context, conf string, u Upload, count func(string) int, progress func(Progress)) (Document, error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	if err := s.waitReady(ctx); err != nil {
		return Document{}, err
	}
	name, err := s.checkUpload(u)
	if err != nil {
		return Document{}, err
	}
	id := docID(name)
	docs, err := s.docs(ctx, conf)
	if err != nil {
		return Document{}, err
	}
	replacing := false
	for _, d := range docs {
		replacing = replacing || d.ID == id
	}
	if !replacing && len(docs) >= s.cfg.MaxDocuments {
		return Document{}, &FileError{Filename: name, Kind: ErrKindTooMany,
			Reason: fmt.Sprintf("the character already has %d documents, the most knowledge.max_documents allows; delete one first", len(docs))}
	}
	ctx, done, err := s.startIngest(ctx, name)
	if err != nil {
		return Document{}, err
	}
	defer done()
	if !s.claim(conf, id) {
		return Document{}, &FileError{Filename: name, Kind: ErrKindBusy, Reason: "a file of this name is being read right now; try again when it is done"}
	}
	defer s.release(conf, id)

	progress(Progress{File: name, Stage: "reading"})
	d := koe.KnowledgeDoc{ID: id, Name: name, Mime: u.Mime, Bytes: len(u.Data), Added: time.Now().UTC()}
	var text Text
	var chunks []Chunk
	err = s.read(ctx, name, func(ctx context.Context) error {
		var err error
		if text, err = extract(ctx, name, u.Mime, u.Data, s.cfg.MaxInflatedBytes); err != nil {
			return err
		}
		if d.Tokens, err = s.countDocument(ctx, name, text.Body, count); err != nil {
			return err
		}
		d.Format, d.Title, d.Pages = text.Format, text.Title, len(text.Pages)
		chunks, err = s.chunks(ctx, d, text, count)
		return err
	})
	if err != nil {
		return Document{}, err
	}
	d.Chunks = len(chunks)
	progress(Progress{File: name, Stage: "indexing", Percent: 10})
	s.embed(ctx, chunks, func(done int) {
		progress(Progress{File: name, Stage: "indexing", Percent: 10 + 80*done/len(chunks)})
	})
	if err := ctx.Err(); err != nil {
		return Document{}, err
	}
	if err := s.opts.Index.Put(ctx, conf, id, chunks); err != nil {
		return Document{}, fmt.Errorf("knowledge: index %s: %w", name, err)
	}
	// Told whatever follows: another instance may have read the chunks
	// before they are taken back.
	defer s.announce(ctx, conf, id)
	// The chunks are in: the document goes with them, even if the client
	// has gone meanwhile.
	if err := s.opts.Docs.PutKnowledgeDoc(context.WithoutCancel(ctx), conf, d, text.Body, text.Pages); err != nil {
		// The chunks must not outlive a document that was never stored.
		if derr := s.opts.Index.Delete(context.WithoutCancel(ctx), conf, id); derr != nil {
			s.log.Error("knowledge: could not remove the chunks of a document that was not stored; they are removed at the next start", "name", name, "err", derr)
		}
		return Document{}, fmt.Errorf("knowledge: store %s: %w", name, err)
	}
	s.forget(conf)
	progress(Progress{File: name, Stage: "done", Percent: 100})
	return document(d), nil
}

// List returns conf's documents, oldest first.
func (s *Service) List(ctx context.Context, conf string) ([]Document, error) {
	docs, err := s.docs(ctx, conf)
	if err != nil {
		return nil, err
	}
	out := make([]Document, len(docs))
	for i, d := range docs {
		out[i] = document(d)
	}
	return out, nil
}

// Delete removes a document and its chunks; false: there was none.
func (s *Service) Delete(ctx context.Context, conf, id string) (bool, error) {
	if err := s.waitReady(ctx); err != nil {
		return false, err
	}
	if !s.claim(conf, id) {
		return false, &FileError{Filename: id, Kind: ErrKindBusy, Reason: "the document is being read right now; try again when it is done"}
	}
	defer s.release(conf, id)
	// The document goes first: chunks left by a failure after it are
	// found and removed at the next start, while a document whose chunks
	// went first would answer turns with nothing.
	found, err := s.opts.Docs.DeleteKnowledgeDoc(ctx, conf, id)
	if err != nil {
		return false, fmt.Errorf("knowledge: delete document: %w", err)
	}
	s.forget(conf)
	defer s.announce(ctx, conf, id)
	if err := s.opts.Index.Delete(ctx, conf, id); err != nil {
		return found, fmt.Errorf("knowledge: delete chunks: %w", err)
	}
	return found, nil
}

// checkUpload refuses what is not worth reading, and returns the file's
// name as it is kept: its base name, without a client's folders.
func (s *Service) checkUpload(u Upload) (string, error) {
	name, err := CleanName(u.Name)
	if err != nil {
		return "", err
	}
	if len(u.Data) == 0 {
		return "", &FileError{Filename: name, Kind: ErrKindEmpty, Reason: "the file is empty"}
	}
	if len(u.Data) > s.cfg.MaxFileBytes {
		return "", &FileError{Filename: name, Kind: ErrKindTooLarge,
			Reason: fmt.Sprintf("the file is %s; knowledge.max_file_bytes allows %s", quote.Bytes(int64(len(u.Data))), quote.Bytes(int64(s.cfg.MaxFileBytes)))}
	}
	return name, nil
}

// maxNameRunes bounds a file name: names are labels, not content.
const maxNameRunes = 200

// CleanName is the name a file is kept under: the last element of what
// the client sent (folders are the client's, not koe's), which must be
// printable and not too long.
func CleanName(raw string) (string, error) {
	name := path.Base(strings.ReplaceAll(strings.TrimSpace(raw), `\`, "/"))
	switch {
	case name == "." || name == "/" || name == "..":
		return "", &FileError{Filename: raw, Kind: ErrKindName, Reason: "the file has no name"}
	case !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "", &FileError{Filename: strings.ToValidUTF8(raw, "?"), Kind: ErrKindName, Reason: "the file's name holds control characters or is not UTF-8"}
	case utf8.RuneCountInString(name) > maxNameRunes:
		return "", &FileError{Filename: string([]rune(name)[:maxNameRunes]) + "…", Kind: ErrKindName, Reason: fmt.Sprintf("the file's name is longer than %d characters", maxNameRunes)}
	}
	return name, nil
}

// docID is a document's id: the same name always gets the same id, which
// is what makes uploading a file again replace it.
func docID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "doc-" + hex.EncodeToString(sum[:10])
}

// chunks cuts a document's text into the chunks the index keeps; ctx
// ends the cutting.
func (s *Service) chunks(ctx context.Context, d koe.KnowledgeDoc, text Text, count func(string) int) ([]Chunk, error) {
	pieces, err := split(ctx, text, count, s.cfg.ChunkTokens, s.cfg.ChunkOverlap)
	if err != nil {
		return nil, err
	}
	title := d.Title
	if title == "" {
		title = d.Name
	}
	out := make([]Chunk, len(pieces))
	for i, p := range pieces {
		out[i] = Chunk{DocID: d.ID, Seq: i, Name: d.Name, Title: title, Heading: p.Heading, Page: p.Page, Text: p.Text, Tokens: p.Tokens}
	}
	return out, nil
}

// embedBatch is how many chunks one progress step embeds.
const embedBatch = 32

// embed gives chunks their vectors when the index ranks by them. A failing
// endpoint leaves them without: they are found by keywords.
func (s *Service) embed(ctx context.Context, chunks []Chunk, done func(int)) {
	if s.opts.Embedder == nil || !s.opts.Index.Vectors() || len(chunks) == 0 {
		return
	}
	for start := 0; start < len(chunks); start += embedBatch {
		end := min(start+embedBatch, len(chunks))
		texts := make([]string, end-start)
		for i, c := range chunks[start:end] {
			texts[i] = embedText(c)
		}
		vecs, err := s.opts.Embedder.Embed(ctx, texts)
		if !s.embedOutcome(ctx, err) || len(vecs) != len(texts) {
			for i := range chunks {
				chunks[i].Vector = nil
			}
			return
		}
		for i, v := range vecs {
			chunks[start+i].Vector = v
		}
		if done != nil {
			done(end)
		}
	}
}

// embedText is what a chunk's vector stands for: where it is and what it
// says.
func embedText(c Chunk) string {
	var b strings.Builder
	b.WriteString(c.Title)
	if c.Heading != "" {
		b.WriteString(" — ")
		b.WriteString(c.Heading)
	}
	b.WriteString("\n")
	b.WriteString(c.Text)
	return b.String()
}

// embedOutcome logs an embedding failure once per streak and reports
// whether the call worked.
func (s *Service) embedOutcome(ctx context.Context, err error) bool {
	if err != nil && ctx.Err() != nil {
		return false
	}
	s.mu.Lock()
	was := s.embedFailing
	s.embedFailing = err != nil
	s.mu.Unlock()
	switch {
	case err == nil:
		if was {
			s.log.Info("knowledge: the embeddings endpoint answers again")
		}
		return true
	case !was:
		s.log.Warn("knowledge: the embeddings endpoint failed; documents are found by keywords until it answers", "err", err)
	}
	return false
}

// docs is conf's document list, read once and kept until it changes.
func (s *Service) docs(ctx context.Context, conf string) ([]koe.KnowledgeDoc, error) {
	b, err := s.base(ctx, conf)
	if err != nil {
		return nil, err
	}
	return b.docs, nil
}

func (s *Service) base(ctx context.Context, conf string) (*base, error) {
	s.mu.Lock()
	b, gen, epoch := s.bases[conf], s.gens[conf], s.epoch
	s.mu.Unlock()
	if b != nil {
		return b, nil
	}
	docs, err := s.opts.Docs.KnowledgeDocs(ctx, conf)
	if err != nil {
		return nil, fmt.Errorf("knowledge: documents of %s: %w", conf, err)
	}
	b = &base{docs: docs}
	for _, d := range docs {
		b.tokens += d.Tokens
	}
	s.mu.Lock()
	// A change that landed meanwhile makes this read stale for the
	// next caller, though it is this caller's answer.
	if s.gens[conf] == gen && s.epoch == epoch {
		s.bases[conf] = b
	}
	s.mu.Unlock()
	return b, nil
}

// forget drops conf's cached list after a change.
func (s *Service) forget(conf string) {
	s.mu.Lock()
	delete(s.bases, conf)
	s.gens[conf]++
	s.mu.Unlock()
}

// claim marks conf's document id as being changed here, or reports that
// it already is.
func (s *Service) claim(conf, id string) bool {
	key := conf + "\x00" + id
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.applying[key] {
		s.applied.Wait()
	}
	if s.busy[key] {
		return false
	}
	s.busy[key] = true
	s.writes[conf]++
	return true
}

func (s *Service) release(conf, id string) {
	s.mu.Lock()
	delete(s.busy, conf+"\x00"+id)
	s.writes[conf]++
	s.mu.Unlock()
	// What another instance changed meanwhile may wait for this.
	notify(s.wake)
}

func document(d koe.KnowledgeDoc) Document {
	return Document{ID: d.ID, Name: d.Name, Mime: d.Mime, Format: d.Format, Title: d.Title,
		Bytes: d.Bytes, Tokens: d.Tokens, Pages: d.Pages, Chunks: d.Chunks, Added: d.Added}
}

// File is a file attached to one conversation, read and counted.
type File struct {
	Name, Mime, Format, Title string
	Text                      string
	Pages                     []int
	Bytes, Tokens             int
}

// ReadFile reads a file attached to a conversation, which the model reads
// whole where it was attached: one that cannot fit room tokens (what the
// model's window leaves beside the parts of a request koe never cuts) is
// refused. count is the character's tokenizer. The reading is bounded as
// Add's is.
func (s *Service) ReadFile(ctx context.Context, u Upload, count func(string) int, room int) (File, error) {
	name, err := s.checkUpload(u)
	if err != nil {
		return File{}, err
	}
	ctx, done, err := s.startIngest(ctx, name)
	if err != nil {
		return File{}, err
	}
	defer done()
	var text Text
	var body string
	var n int
	err = s.read(ctx, name, func(ctx context.Context) error {
		var err error
		if text, err = extract(ctx, name, u.Mime, u.Data, s.cfg.MaxInflatedBytes); err != nil {
			return err
		}
		body = strings.TrimRightFunc(text.Body, unicode.IsSpace)
		n, err = s.countDocument(ctx, name, body, count)
		return err
	})
	if err != nil {
		return File{}, err
	}
	if n > room {
		return File{}, &FileError{Filename: name, Kind: ErrKindTooLong,
			Reason: fmt.Sprintf("it is %s tokens long: the model's window leaves %s for it", quote.Thousands(n), quote.Thousands(max(room, 0)))}
	}
	return File{Name: name, Mime: u.Mime, Format: text.Format, Title: text.Title, Text: body, Pages: text.Pages, Bytes: len(u.Data), Tokens: n}, nil
}
