package knowledge

import (
	"fmt"
	"strings"
	"time"
)

// Config is the top-level `knowledge:` section.
type Config struct {
	// Store keeps the chunks of large knowledge bases: StoreMemory,
	// StoreLocal or StorePostgres.
	Store string `yaml:"store"`
	// DSN is the PostgreSQL connection string of the postgres store
	// (env KOE_KNOWLEDGE_DSN).
	DSN string `yaml:"dsn"`
	// Router decides when a turn reads the knowledge base: RouterOff,
	// RouterAuto or RouterLLM.
	Router string `yaml:"router"`
	// Budget is the most tokens of retrieved passages one turn reads.
	Budget int `yaml:"budget"`
	// WholeShare is the share of the model's input budget a character's
	// documents may take whole; larger knowledge bases are chunked and
	// retrieved from (0: always retrieve).
	WholeShare float64 `yaml:"whole_share"`
	// MinMatch is the auto router's threshold: the share of the
	// question's keywords the best passage must hold for the turn to
	// read passages at all.
	MinMatch float64 `yaml:"min_match"`
	// MinKeywords is how many of the question's keywords the best passage
	// must hold besides: small talk has one or two keywords, and a
	// common one ("day", "old") is in some page of any manual.
	MinKeywords int `yaml:"min_keywords"`
	// ChunkTokens and ChunkOverlap size the chunks.
	ChunkTokens  int `yaml:"chunk_tokens"`
	ChunkOverlap int `yaml:"chunk_overlap"`
	// MaxFileBytes bounds one uploaded or attached file; MaxDocuments
	// bounds a character's knowledge base.
	MaxFileBytes int `yaml:"max_file_bytes"`
	MaxDocuments int `yaml:"max_documents"`
	// What reading one file may cost; a file over one of them is refused
	// with a message naming the key. MaxInflatedBytes bounds what it
	// inflates to as it is read (a PDF's streams, counted each time a
	// page draws them, and the text made of them; a JSON file indented);
	// MaxDocumentTokens its text; IngestTimeout the time spent reading
	// it (extracting, counting, chunking).
	MaxInflatedBytes  int           `yaml:"max_inflated_bytes"`
	MaxDocumentTokens int           `yaml:"max_document_tokens"`
	IngestTimeout     time.Duration `yaml:"ingest_timeout"`
	// MaxConcurrentIngests bounds the files being read at once, for all
	// characters and conversations together; one more is refused until
	// one of them is done.
	MaxConcurrentIngests int `yaml:"max_concurrent_ingests"`
}

// The stores and the router's modes.
const (
	StoreMemory   = "memory"
	StoreLocal    = "local"
	StorePostgres = "postgres"

	RouterOff  = "off"
	RouterAuto = "auto"
	RouterLLM  = "llm"
)

// EnvDSN overrides knowledge.dsn, so that a password need not be written
// in the file.
const EnvDSN = "KOE_KNOWLEDGE_DSN"

// Defaults and bounds.
const (
	DefaultBudget       = 1200
	DefaultWholeShare   = 0.6
	DefaultMinMatch     = 0.5
	DefaultMinKeywords  = 2
	maxMinKeywords      = 10
	DefaultChunkTokens  = 256
	DefaultChunkOverlap = 32
	DefaultMaxFileBytes = 10 << 20
	DefaultMaxDocuments = 200
	// A book of a thousand pages inflates to tens of megabytes of
	// drawing instructions and holds a few hundred thousand tokens; the
	// slowest file under both is read in seconds.
	DefaultMaxInflatedBytes     = 128 << 20
	DefaultMaxDocumentTokens    = 1_000_000
	DefaultIngestTimeout        = time.Minute
	DefaultMaxConcurrentIngests = 2

	minBudget       = 50
	maxBudget       = 32000
	minChunkTokens  = 32
	maxChunkTokens  = 4096
	maxFileBytes    = 256 << 20
	maxMaxDocuments = 100000

	minInflatedBytes        = 1 << 20
	maxInflatedBytes        = 1 << 30
	minDocumentTokens       = 1000
	maxDocumentTokens       = 100_000_000
	minIngestTimeout        = time.Second
	maxIngestTimeout        = time.Hour
	maxMaxConcurrentIngests = 64
)

// DefaultConfig keeps documents in memory (rebuilt from the database at
// start) and lets the auto router decide.
func DefaultConfig() Config {
	return Config{
		Store: StoreMemory, Router: RouterAuto, Budget: DefaultBudget,
		WholeShare: DefaultWholeShare, MinMatch: DefaultMinMatch, MinKeywords: DefaultMinKeywords,
		ChunkTokens: DefaultChunkTokens, ChunkOverlap: DefaultChunkOverlap,
		MaxFileBytes: DefaultMaxFileBytes, MaxDocuments: DefaultMaxDocuments,
		MaxInflatedBytes: DefaultMaxInflatedBytes, MaxDocumentTokens: DefaultMaxDocumentTokens,
		IngestTimeout: DefaultIngestTimeout, MaxConcurrentIngests: DefaultMaxConcurrentIngests,
	}
}

// withReadingBounds gives the bounds of reading a file their defaults
// where a Config made in code leaves them at zero: no bound is never
// what such a Config means.
func (c Config) withReadingBounds() Config {
	d := DefaultConfig()
	if c.MaxInflatedBytes <= 0 {
		c.MaxInflatedBytes = d.MaxInflatedBytes
	}
	if c.MaxDocumentTokens <= 0 {
		c.MaxDocumentTokens = d.MaxDocumentTokens
	}
	if c.IngestTimeout <= 0 {
		c.IngestTimeout = d.IngestTimeout
	}
	if c.MaxConcurrentIngests <= 0 {
		c.MaxConcurrentIngests = d.MaxConcurrentIngests
	}
	return c
}

// ApplyEnv applies the environment overrides; getenv may be nil.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if getenv == nil {
		return
	}
	if v := getenv(EnvDSN); v != "" {
		c.DSN = v
	}
}

// Validate reports settings that can never work, naming the key.
func (c Config) Validate() error {
	switch c.Store {
	case StoreMemory, StoreLocal:
	case StorePostgres:
		if strings.TrimSpace(c.DSN) == "" {
			return fmt.Errorf("knowledge.store is postgres but knowledge.dsn (or %s) is empty: give a connection string such as postgres://koe@127.0.0.1:5432/koe", EnvDSN)
		}
	default:
		return fmt.Errorf("knowledge.store %q is not one of memory, local, postgres", c.Store)
	}
	switch c.Router {
	case RouterOff, RouterAuto, RouterLLM:
	default:
		return fmt.Errorf("knowledge.router %q is not one of off, auto, llm", c.Router)
	}
	if c.Budget < minBudget || c.Budget > maxBudget {
		return fmt.Errorf("knowledge.budget %d is out of range: %d to %d tokens (default %d)", c.Budget, minBudget, maxBudget, DefaultBudget)
	}
	if c.WholeShare < 0 || c.WholeShare > 0.9 {
		return fmt.Errorf("knowledge.whole_share %g is out of range: 0 (always retrieve) to 0.9 (default %g)", c.WholeShare, DefaultWholeShare)
	}
	if c.MinMatch < 0 || c.MinMatch > 1 {
		return fmt.Errorf("knowledge.min_match %g is out of range: 0 to 1 (default %g)", c.MinMatch, DefaultMinMatch)
	}
	if c.MinKeywords < 1 || c.MinKeywords > maxMinKeywords {
		return fmt.Errorf("knowledge.min_keywords %d is out of range: 1 to %d (default %d)", c.MinKeywords, maxMinKeywords, DefaultMinKeywords)
	}
	if c.ChunkTokens < minChunkTokens || c.ChunkTokens > maxChunkTokens {
		return fmt.Errorf("knowledge.chunk_tokens %d is out of range: %d to %d (default %d)", c.ChunkTokens, minChunkTokens, maxChunkTokens, DefaultChunkTokens)
	}
	if c.ChunkOverlap < 0 || c.ChunkOverlap > c.ChunkTokens/2 {
		return fmt.Errorf("knowledge.chunk_overlap %d is out of range: 0 to half of knowledge.chunk_tokens (%d)", c.ChunkOverlap, c.ChunkTokens/2)
	}
	if c.MaxFileBytes < 1 || c.MaxFileBytes > maxFileBytes {
		return fmt.Errorf("knowledge.max_file_bytes %d is out of range: 1 to %d (default %d, 10 MiB)", c.MaxFileBytes, maxFileBytes, DefaultMaxFileBytes)
	}
	if c.MaxDocuments < 1 || c.MaxDocuments > maxMaxDocuments {
		return fmt.Errorf("knowledge.max_documents %d is out of range: 1 to %d (default %d)", c.MaxDocuments, maxMaxDocuments, DefaultMaxDocuments)
	}
	if c.MaxInflatedBytes < minInflatedBytes || c.MaxInflatedBytes > maxInflatedBytes {
		return fmt.Errorf("knowledge.max_inflated_bytes %d is out of range: %d (1 MiB) to %d (1 GiB) (default %d, 128 MiB)", c.MaxInflatedBytes, minInflatedBytes, maxInflatedBytes, DefaultMaxInflatedBytes)
	}
	if c.MaxDocumentTokens < minDocumentTokens || c.MaxDocumentTokens > maxDocumentTokens {
		return fmt.Errorf("knowledge.max_document_tokens %d is out of range: %d to %d (default %d)", c.MaxDocumentTokens, minDocumentTokens, maxDocumentTokens, DefaultMaxDocumentTokens)
	}
	if c.IngestTimeout < minIngestTimeout || c.IngestTimeout > maxIngestTimeout {
		return fmt.Errorf("knowledge.ingest_timeout %s is out of range: %s to %s (default %s)", c.IngestTimeout, minIngestTimeout, maxIngestTimeout, DefaultIngestTimeout)
	}
	if c.MaxConcurrentIngests < 1 || c.MaxConcurrentIngests > maxMaxConcurrentIngests {
		return fmt.Errorf("knowledge.max_concurrent_ingests %d is out of range: 1 to %d (default %d)", c.MaxConcurrentIngests, maxMaxConcurrentIngests, DefaultMaxConcurrentIngests)
	}
	return nil
}
