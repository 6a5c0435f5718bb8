package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"koe"
	"koe/history"
)

// Store is koe's store (history.Store) in PostgreSQL, for several koe
// instances sharing one database: histories with their records and
// images, summaries, prompts, recall, and knowledge documents with the
// local index's chunks. It gives the bbolt store's results and errors
// (historytest checks both): records are kept as the same JSON, byte for
// byte, and read back through the same decoding. It is safe for
// concurrent use, by many goroutines and many processes.
type Store struct {
	pool    *pgxpool.Pool
	now     func() time.Time
	timeout time.Duration
	schema  schemaState // where Open left the schema
}

var _ history.Store = (*Store)(nil)

// Options configures Open.
type Options struct {
	// Timeout bounds each operation, its waits for a connection or a lock
	// included; 0 means history.DefaultTimeout.
	Timeout time.Duration
	// Now is the clock for ids and timestamps; nil means time.Now.
	Now func() time.Time
}

// storeMigrationsTable records the versions of the store's schema applied
// to the database (the knowledge index keeps its own).
const storeMigrationsTable = "koe_store_migrations"

// storeMigrateLockKey serializes koe instances migrating the store's
// schema (a fixed number of koe's own: "koe_stor").
const storeMigrateLockKey int64 = 0x6b6f655f73746f72

// Record kinds kept beside each record so that listings and pages filter
// in SQL without decoding: the role itself stays in the JSON only.
const (
	kindMetadata = 0 // RoleMetadata: Page skips it
	kindToolStep = 1 // RoleToolCall, RoleTool: not a listing's latest message
	kindMessage  = 2 // everything else
)

func recordKind(role string) int16 {
	switch role {
	case koe.RoleMetadata:
		return kindMetadata
	case koe.RoleToolCall, koe.RoleTool:
		return kindToolStep
	}
	return kindMessage
}

// storeMigrations is the store's schema, oldest first. Append-only: a
// released migration is never edited. Each only expands the schema unless
// it sets CompatibleFrom (see migrate.go): a koe of the previous release
// must keep working on what a new migration leaves.
var storeMigrations = []migration{
	{
		Version: 1,
		Name:    "histories, records, images, summaries and prompts",
		Statements: []string{
			// One row per history. last_seq is the sequence number of its
			// newest record: an append increments it, which also locks the
			// row, so appends to one history from any number of instances
			// get consecutive numbers, and appends to others do not wait.
			`CREATE TABLE koe_histories (
				conf_uid text   NOT NULL,
				uid      text   NOT NULL,
				last_seq bigint NOT NULL CHECK (last_seq >= 1),
				PRIMARY KEY (conf_uid, uid)
			)`,
			// body is the record's JSON exactly as the bbolt store keeps it
			// (Open-LLM-VTuber's format); kind is recordKind of its role.
			`CREATE TABLE koe_records (
				conf_uid text     NOT NULL,
				uid      text     NOT NULL,
				seq      bigint   NOT NULL CHECK (seq >= 1),
				kind     smallint NOT NULL,
				body     bytea    NOT NULL,
				PRIMARY KEY (conf_uid, uid, seq),
				FOREIGN KEY (conf_uid, uid) REFERENCES koe_histories ON DELETE CASCADE
			)`,
			// The pictures of a record, by index, apart from its JSON so that
			// reading a history never loads them.
			`CREATE TABLE koe_record_images (
				conf_uid text    NOT NULL,
				uid      text    NOT NULL,
				seq      bigint  NOT NULL,
				idx      integer NOT NULL CHECK (idx >= 0),
				data     bytea   NOT NULL,
				PRIMARY KEY (conf_uid, uid, seq, idx),
				FOREIGN KEY (conf_uid, uid, seq) REFERENCES koe_records ON DELETE CASCADE
			)`,
			// Memory summaries, keyed by their first turn; body is the
			// SummaryRecord's JSON.
			`CREATE TABLE koe_summaries (
				conf_uid   text    NOT NULL,
				uid        text    NOT NULL,
				first_turn integer NOT NULL,
				body       bytea   NOT NULL,
				PRIMARY KEY (conf_uid, uid, first_turn),
				FOREIGN KEY (conf_uid, uid) REFERENCES koe_histories ON DELETE CASCADE
			)`,
			`CREATE TABLE koe_prompts (
				conf_uid text NOT NULL,
				name     text  NOT NULL,
				text     bytea NOT NULL, -- as given, like the bbolt store's
				PRIMARY KEY (conf_uid, name)
			)`,
		},
	},
	{
		Version: 2,
		Name:    "recall: entries with vectors, marks, forgotten entries, vector models",
		Statements: []string{
			// A history's remembered messages: body is the RecallEntry's
			// JSON, vector its embedding as little-endian float32s (the
			// bbolt store's encoding). Everything recall keeps of a history
			// goes with it (ON DELETE CASCADE).
			`CREATE TABLE koe_recall_entries (
				conf_uid text   NOT NULL,
				uid      text   NOT NULL,
				seq      bigint NOT NULL,
				body     bytea  NOT NULL,
				vector   bytea,
				PRIMARY KEY (conf_uid, uid, seq),
				FOREIGN KEY (conf_uid, uid) REFERENCES koe_histories ON DELETE CASCADE
			)`,
			// Entries forgotten for good: never indexed again, through
			// rebuilds too.
			`CREATE TABLE koe_recall_forgotten (
				conf_uid text   NOT NULL,
				uid      text   NOT NULL,
				seq      bigint NOT NULL,
				PRIMARY KEY (conf_uid, uid, seq),
				FOREIGN KEY (conf_uid, uid) REFERENCES koe_histories ON DELETE CASCADE
			)`,
			// How far each history is indexed: body is the RecallMark's JSON.
			`CREATE TABLE koe_recall_marks (
				conf_uid text  NOT NULL,
				uid      text  NOT NULL,
				body     bytea NOT NULL,
				PRIMARY KEY (conf_uid, uid),
				FOREIGN KEY (conf_uid, uid) REFERENCES koe_histories ON DELETE CASCADE
			)`,
			// The model that made a conf's vectors.
			`CREATE TABLE koe_recall_models (
				conf_uid text PRIMARY KEY,
				model    text NOT NULL
			)`,
		},
	},
	{
		Version: 3,
		Name:    "knowledge documents and the local store's chunks",
		Statements: []string{
			// A character's documents: meta is the KnowledgeDoc's JSON, body
			// the page offsets and text (encodeText), read only when asked.
			`CREATE TABLE koe_knowledge_docs (
				conf_uid text  NOT NULL,
				doc_id   text  NOT NULL,
				meta     bytea NOT NULL,
				body     bytea NOT NULL,
				PRIMARY KEY (conf_uid, doc_id)
			)`,
			// The chunks of knowledge.store local (the postgres knowledge
			// store keeps its own, koe_knowledge_chunks): body is the
			// KnowledgeChunk's JSON, vector as in koe_recall_entries.
			`CREATE TABLE koe_knowledge_local_chunks (
				conf_uid text   NOT NULL,
				doc_id   text   NOT NULL,
				seq      bigint NOT NULL CHECK (seq >= 0),
				body     bytea  NOT NULL,
				vector   bytea,
				PRIMARY KEY (conf_uid, doc_id, seq)
			)`,
		},
	},
	{
		Version: 4,
		Name:    "MCP servers' OAuth logins",
		Statements: []string{
			// data is mcp's login record (JSON): the client koe
			// registered and its tokens.
			`CREATE TABLE koe_mcp_logins (
				key        text        PRIMARY KEY,
				data       bytea       NOT NULL,
				updated_at timestamptz NOT NULL DEFAULT now()
			)`,
		},
	},
}

// Open connects to the database dsn (a PostgreSQL URL or key=value
// string) and creates or migrates the store's schema. ctx bounds the
// connection and the migration.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres store: parse the DSN: %w", err)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = history.DefaultTimeout
	}
	// The server ends a statement that outlasts the timeout (a lock it
	// waits for included), so that a timed-out write is known not to have
	// happened; the client's own deadline, a little later, only catches a
	// server that does not answer at all. A DSN's own setting stands.
	if _, ok := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !ok {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(max(timeout.Milliseconds(), 1), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres store: connect: %w", err)
	}
	s := &Store{pool: pool, now: opts.Now, timeout: timeout}
	if s.now == nil {
		s.now = time.Now
	}
	st, err := migrate(ctx, pool, storeMigrationsTable, storeMigrateLockKey, storeMigrations, nil)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	s.schema = st
	return s, nil
}

// Schema says where the store's schema is: its version, the newest this
// koe knows (the schema may be newer, expanded by a newer koe), the
// oldest version a koe must know to run on it, and how many versions this
// koe applied at Open.
func (s *Store) Schema() (version, known, compatibleFrom, applied int) {
	return s.schema.Version, s.schema.Known, s.schema.CompatibleFrom, s.schema.Applied
}

// Close closes every connection of the store.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres store: ping: %w", err)
	}
	return nil
}

// pgQueryCanceled is PostgreSQL's SQLSTATE of a statement it cancelled
// (statement_timeout, a cancel request).
const pgQueryCanceled = "57014"

// clientGrace is how much longer than the server's statement_timeout the
// client waits for an answer.
const clientGrace = time.Second

// op is the context of one operation: the caller's, bounded by the
// store's timeout.
func (s *Store) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout+clientGrace)
}

// pgErr adds what a PostgreSQL error does not say by itself. A statement
// the server ended at statement_timeout is a deadline exceeded too.
func (s *Store) pgErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgQueryCanceled {
		return fmt.Errorf("%w: %w (PostgreSQL ended it: no result within %s)", context.DeadlineExceeded, err, s.timeout)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (no answer from PostgreSQL within %s)", err, s.timeout+clientGrace)
	}
	return err
}

func (s *Store) timestamp() string { return s.now().Format(koe.TimestampLayout) }

// pgSeq converts a sequence number to PostgreSQL's bigint; larger ones
// (never stored) become the largest bigint.
func pgSeq(seq uint64) int64 {
	if seq > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(seq)
}

// Create starts a new, empty history (just its metadata record) and
// returns its uid.
func (s *Store) Create(ctx context.Context, confUID string) (string, error) {
	now := s.now()
	uid := koe.NewHistoryUID(now)
	if err := s.createWith(ctx, confUID, uid, now, nil); err != nil {
		return "", err
	}
	return uid, nil
}

// CreateWith creates history uid with its metadata record and then
// records, in one statement. It fails if uid already exists.
func (s *Store) CreateWith(ctx context.Context, confUID, uid string, records ...koe.Record) error {
	return s.createWith(ctx, confUID, uid, s.now(), records)
}

func (s *Store) createWith(ctx context.Context, confUID, uid string, now time.Time, records []koe.Record) error {
	if err := history.CheckHistory(ctx, confUID, uid); err != nil {
		return err
	}
	var (
		kinds   []int16
		bodies  [][]byte
		imgSeqs []int64
		imgIdxs []int32
		imgData [][]byte
		failf   = func(err error) error { return fmt.Errorf("create history %q for conf %q: %w", uid, confUID, err) }
	)
	all, err := history.EncodeHistory(now, records)
	if err != nil {
		return failf(err)
	}
	for i, p := range all {
		kinds = append(kinds, recordKind(p.Role))
		bodies = append(bodies, p.JSON)
		for j, raw := range p.Images {
			imgSeqs = append(imgSeqs, int64(i+1))
			imgIdxs = append(imgIdxs, int32(j))
			imgData = append(imgData, raw)
		}
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	// One statement, so one round trip and one commit; the foreign keys
	// are checked at its end, when every row is in.
	_, err = s.pool.Exec(ctx, `
		WITH h AS (
			INSERT INTO koe_histories (conf_uid, uid, last_seq) VALUES ($1, $2, $3)
		), r AS (
			INSERT INTO koe_records (conf_uid, uid, seq, kind, body)
			SELECT $1, $2, t.seq, t.kind, t.body
			FROM unnest($4::smallint[], $5::bytea[]) WITH ORDINALITY AS t(kind, body, seq)
		)
		INSERT INTO koe_record_images (conf_uid, uid, seq, idx, data)
		SELECT $1, $2, i.seq, i.idx, i.data
		FROM unnest($6::bigint[], $7::integer[], $8::bytea[]) AS i(seq, idx, data)`,
		confUID, uid, len(all), kinds, bodies, imgSeqs, imgIdxs, imgData)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "koe_histories_pkey" {
			return failf(errors.New("the history already exists"))
		}
		return failf(s.pgErr(err))
	}
	return nil
}

// Append adds r to the end of an existing history, in one statement that
// takes the next sequence number from the history's row. It never creates
// the history.
func (s *Store) Append(ctx context.Context, confUID, historyUID string, r koe.Record) error {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return err
	}
	if r.Timestamp == "" {
		r.Timestamp = s.timestamp()
	}
	failf := func(err error) error {
		return fmt.Errorf("append to history %q of conf %q: %w", historyUID, confUID, err)
	}
	p, err := history.EncodeRecord(r)
	if err != nil {
		return failf(err)
	}
	idxs := make([]int32, len(p.Images))
	for i := range idxs {
		idxs[i] = int32(i)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	var seq int64
	err = s.pool.QueryRow(ctx, `
		WITH h AS (
			UPDATE koe_histories SET last_seq = last_seq + 1
			WHERE conf_uid = $1 AND uid = $2
			RETURNING last_seq
		), r AS (
			INSERT INTO koe_records (conf_uid, uid, seq, kind, body)
			SELECT $1, $2, h.last_seq, $3, $4 FROM h
			RETURNING seq
		), i AS (
			INSERT INTO koe_record_images (conf_uid, uid, seq, idx, data)
			SELECT $1, $2, r.seq, t.idx, t.data
			FROM r, unnest($5::integer[], $6::bytea[]) AS t(idx, data)
		)
		SELECT seq FROM r`,
		confUID, historyUID, recordKind(r.Role), p.JSON, idxs, p.Images).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return failf(koe.ErrNotFound)
	}
	if err != nil {
		return failf(s.pgErr(err))
	}
	return nil
}

// Messages returns every record of a history in order, metadata included,
// images as refs.
func (s *Store) Messages(ctx context.Context, confUID, historyUID string) ([]koe.Record, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, err
	}
	return s.records(ctx, confUID, historyUID, 0, 0)
}

// Since returns up to limit records (0: all) of a history after sequence
// after, oldest first.
func (s *Store) Since(ctx context.Context, confUID, historyUID string, after uint64, limit int) ([]koe.Record, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, err
	}
	if err := koe.CheckPageLimit(limit); err != nil {
		return nil, fmt.Errorf("records of history %q of conf %q: %w", historyUID, confUID, err)
	}
	return s.records(ctx, confUID, historyUID, after, limit)
}

func (s *Store) records(ctx context.Context, confUID, historyUID string, after uint64, limit int) ([]koe.Record, error) {
	failf := func(err error) error {
		return fmt.Errorf("read history %q of conf %q: %w", historyUID, confUID, err)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	// The history's row comes first (seq NULL), so that a history without
	// records after `after` still tells it exists.
	lim := any(nil)
	if limit > 0 {
		lim = limit
	}
	rows, err := s.pool.Query(ctx, `
		(SELECT NULL::bigint, NULL::bytea FROM koe_histories WHERE conf_uid = $1 AND uid = $2)
		UNION ALL
		(SELECT seq, body FROM koe_records WHERE conf_uid = $1 AND uid = $2 AND seq > $3 ORDER BY seq LIMIT $4)`,
		confUID, historyUID, pgSeq(after), lim)
	if err != nil {
		return nil, failf(s.pgErr(err))
	}
	out, found, err := scanRecords(rows)
	if err != nil {
		return nil, failf(s.pgErr(err))
	}
	if !found {
		return nil, failf(koe.ErrNotFound)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// scanRecords decodes rows of (seq, body); a row with a NULL seq only
// tells that the history exists.
func scanRecords(rows pgx.Rows) (out []koe.Record, found bool, err error) {
	defer rows.Close()
	for rows.Next() {
		var seq *int64
		var body []byte
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, false, err
		}
		found = true
		if seq == nil {
			continue
		}
		r, err := history.DecodeRecord(uint64(*seq), body)
		if err != nil {
			return nil, false, err
		}
		out = append(out, r)
	}
	return out, found, rows.Err()
}

// humanBody is how the body of every human record starts: koe writes a
// record's role first (history.EncodeRecord; the store contract's
// ListOpening test fails if that changes). A body that starts otherwise
// (written by hand, say) only goes without an opening.
const humanBody = `{"role":"human",`

// List summarises the histories of confUID, most recently active first,
// leaving out those with nothing to show.
func (s *Store) List(ctx context.Context, confUID string) ([]koe.ListedHistory, error) {
	if err := history.CheckConf(ctx, confUID); err != nil {
		return nil, err
	}
	failf := func(err error) error { return fmt.Errorf("list histories of conf %q: %w", confUID, err) }
	ctx, cancel := s.op(ctx)
	defer cancel()
	// The opening is looked for among the history's first few records
	// only (by the primary key): a listing's cost per history does not
	// grow with the history. The database tells a human record by the
	// start of its body (humanBody) rather than by parsing it: json and
	// jsonb both refuse a body whose content holds \u0000, which would
	// fail the whole listing. Its content is decoded here, as any
	// record's.
	rows, err := s.pool.Query(ctx, `
		SELECT h.uid, r.seq, r.body, o.seq, o.body
		FROM koe_histories h
		CROSS JOIN LATERAL (
			SELECT seq, body FROM koe_records
			WHERE conf_uid = h.conf_uid AND uid = h.uid AND kind = $2
			ORDER BY seq DESC LIMIT 1
		) r
		LEFT JOIN LATERAL (
			SELECT seq, body FROM koe_records
			WHERE conf_uid = h.conf_uid AND uid = h.uid AND kind = $2 AND seq <= $3
				AND substring(body FOR $5) = $4
			ORDER BY seq LIMIT 1
		) o ON true
		WHERE h.conf_uid = $1`, confUID, kindMessage, koe.OpeningRecords, []byte(humanBody), len(humanBody))
	if err != nil {
		return nil, failf(s.pgErr(err))
	}
	defer rows.Close()
	out := []koe.ListedHistory{}
	for rows.Next() {
		var uid string
		var seq int64
		var openSeq *int64
		var body, openBody []byte
		if err := rows.Scan(&uid, &seq, &body, &openSeq, &openBody); err != nil {
			return nil, failf(err)
		}
		r, err := history.DecodeRecord(uint64(seq), body)
		if err != nil {
			return nil, failf(fmt.Errorf("history %q: %w", uid, err))
		}
		opening := ""
		if openSeq != nil {
			o, err := history.DecodeRecord(uint64(*openSeq), openBody)
			if err != nil {
				return nil, failf(fmt.Errorf("history %q: %w", uid, err))
			}
			if o.Role == koe.RoleHuman {
				opening = koe.Opening(o.Content)
			}
		}
		out = append(out, koe.ListedHistory{UID: uid, LatestMessage: r, Timestamp: r.Timestamp, Opening: opening})
	}
	if err := rows.Err(); err != nil {
		return nil, failf(s.pgErr(err))
	}
	history.SortHistories(out)
	return out, nil
}

// Delete removes a history with all its records, images and summaries.
func (s *Store) Delete(ctx context.Context, confUID, historyUID string) error {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `DELETE FROM koe_histories WHERE conf_uid = $1 AND uid = $2`, confUID, historyUID)
	if err == nil && tag.RowsAffected() == 0 {
		err = koe.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete history %q of conf %q: %w", historyUID, confUID, s.pgErr(err))
	}
	return nil
}

// Exists reports whether the history exists.
func (s *Store) Exists(ctx context.Context, confUID, historyUID string) (bool, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return false, err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM koe_histories WHERE conf_uid = $1 AND uid = $2)`,
		confUID, historyUID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up history %q of conf %q: %w", historyUID, confUID, s.pgErr(err))
	}
	return ok, nil
}

// LastSeq returns the sequence number of the history's newest record.
func (s *Store) LastSeq(ctx context.Context, confUID, historyUID string) (uint64, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return 0, err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT last_seq FROM koe_histories WHERE conf_uid = $1 AND uid = $2`,
		confUID, historyUID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		err = koe.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("read history %q of conf %q: %w", historyUID, confUID, s.pgErr(err))
	}
	return uint64(seq), nil
}

// Page returns up to limit non-metadata records older than sequence before
// (0: the newest), oldest first, and whether older ones remain.
func (s *Store) Page(ctx context.Context, confUID, historyUID string, before uint64, limit int) (records []koe.Record, more bool, err error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, false, err
	}
	if err := koe.CheckPageLimit(limit); err != nil {
		return nil, false, fmt.Errorf("page of history %q of conf %q: %w", historyUID, confUID, err)
	}
	failf := func(err error) error {
		return fmt.Errorf("read page of history %q of conf %q: %w", historyUID, confUID, err)
	}
	upper := int64(math.MaxInt64)
	if before != 0 {
		upper = pgSeq(before)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	// One more than asked tells whether older records remain.
	rows, err := s.pool.Query(ctx, `
		(SELECT NULL::bigint, NULL::bytea FROM koe_histories WHERE conf_uid = $1 AND uid = $2)
		UNION ALL
		(SELECT seq, body FROM koe_records
		 WHERE conf_uid = $1 AND uid = $2 AND seq < $3 AND kind <> $4
		 ORDER BY seq DESC LIMIT $5)`,
		confUID, historyUID, upper, kindMetadata, limit+1)
	if err != nil {
		return nil, false, failf(s.pgErr(err))
	}
	out, found, err := scanRecords(rows)
	if err != nil {
		return nil, false, failf(s.pgErr(err))
	}
	if !found {
		return nil, false, failf(koe.ErrNotFound)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	if len(out) > limit {
		out, more = out[len(out)-limit:], true
	}
	if out == nil {
		out = []koe.Record{}
	}
	return out, more, nil
}

// Image returns the type and bytes of the image ref of a history. An
// unknown ref is ErrNotFound; a malformed one ErrInvalidID.
func (s *Store) Image(ctx context.Context, confUID, historyUID, ref string) (mime string, data []byte, err error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return "", nil, err
	}
	seq, index, err := history.ParseImageRef(ref)
	if err != nil {
		return "", nil, err
	}
	failf := func(err error) error {
		return fmt.Errorf("read image %s of history %q of conf %q: %w", ref, historyUID, confUID, err)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	var body, raw []byte
	err = s.pool.QueryRow(ctx, `
		SELECT r.body, i.data FROM koe_records r
		LEFT JOIN koe_record_images i ON i.conf_uid = r.conf_uid AND i.uid = r.uid AND i.seq = r.seq AND i.idx = $4
		WHERE r.conf_uid = $1 AND r.uid = $2 AND r.seq = $3`,
		confUID, historyUID, pgSeq(seq), int64(index)).Scan(&body, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, failf(koe.ErrNotFound)
	}
	if err != nil {
		return "", nil, failf(s.pgErr(err))
	}
	mime, data, err = history.ReadImage(seq, body, index, raw)
	if err != nil {
		return "", nil, failf(err)
	}
	return mime, data, nil
}

// AddSummary stores r as a summary of history historyUID, replacing one
// that starts at the same turn. The history must exist.
func (s *Store) AddSummary(ctx context.Context, confUID, historyUID string, r koe.SummaryRecord) error {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return err
	}
	failf := func(err error) error {
		return fmt.Errorf("add summary to history %q of conf %q: %w", historyUID, confUID, err)
	}
	if err := history.CheckSummary(historyUID, r); err != nil {
		return failf(err)
	}
	if r.Turns[0] > math.MaxInt32 {
		return failf(fmt.Errorf("summary: turn %d is too large: %w", r.Turns[0], koe.ErrInvalidRecord))
	}
	if r.CreatedAt == "" {
		r.CreatedAt = s.timestamp()
	}
	val, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	// Inserted from the history's row: no row, no summary.
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO koe_summaries (conf_uid, uid, first_turn, body)
		SELECT conf_uid, uid, $3, $4 FROM koe_histories WHERE conf_uid = $1 AND uid = $2
		ON CONFLICT (conf_uid, uid, first_turn) DO UPDATE SET body = excluded.body`,
		confUID, historyUID, r.Turns[0], val)
	if err == nil && tag.RowsAffected() == 0 {
		err = koe.ErrNotFound
	}
	if err != nil {
		return failf(s.pgErr(err))
	}
	return nil
}

// Summaries returns the summaries of a history in turn order, or an empty
// slice if it has none.
func (s *Store) Summaries(ctx context.Context, confUID, historyUID string) ([]koe.SummaryRecord, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, err
	}
	failf := func(err error) error {
		return fmt.Errorf("read summaries of history %q of conf %q: %w", historyUID, confUID, err)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT s.body FROM koe_histories h
		LEFT JOIN koe_summaries s ON s.conf_uid = h.conf_uid AND s.uid = h.uid
		WHERE h.conf_uid = $1 AND h.uid = $2
		ORDER BY s.first_turn`, confUID, historyUID)
	if err != nil {
		return nil, failf(s.pgErr(err))
	}
	defer rows.Close()
	out := []koe.SummaryRecord{}
	found := false
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, failf(err)
		}
		found = true
		if body == nil {
			continue
		}
		var r koe.SummaryRecord
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, failf(fmt.Errorf("decode summary: %w", err))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, failf(s.pgErr(err))
	}
	if !found {
		return nil, failf(koe.ErrNotFound)
	}
	return out, nil
}

// SetPrompt stores the prompt name of character confUID; an empty text
// deletes it.
func (s *Store) SetPrompt(ctx context.Context, confUID, name, text string) error {
	if err := history.CheckPromptName(ctx, confUID, name); err != nil {
		return err
	}
	failf := func(err error) error { return fmt.Errorf("set prompt %q of conf %q: %w", name, confUID, err) }
	if err := koe.CheckPrompt(text); err != nil {
		return failf(err)
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	var err error
	if text == "" {
		_, err = s.pool.Exec(ctx, `DELETE FROM koe_prompts WHERE conf_uid = $1 AND name = $2`, confUID, name)
	} else {
		_, err = s.pool.Exec(ctx, `
			INSERT INTO koe_prompts (conf_uid, name, text) VALUES ($1, $2, $3)
			ON CONFLICT (conf_uid, name) DO UPDATE SET text = excluded.text`, confUID, name, []byte(text))
	}
	if err != nil {
		return failf(s.pgErr(err))
	}
	return nil
}

// Prompt returns the prompt name of character confUID; ok is false if it
// has not been set.
func (s *Store) Prompt(ctx context.Context, confUID, name string) (text string, ok bool, err error) {
	if err := history.CheckPromptName(ctx, confUID, name); err != nil {
		return "", false, err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	var raw []byte
	err = s.pool.QueryRow(ctx, `SELECT text FROM koe_prompts WHERE conf_uid = $1 AND name = $2`, confUID, name).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read prompt %q of conf %q: %w", name, confUID, s.pgErr(err))
	}
	return string(raw), true, nil
}
