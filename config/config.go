// Package config reads koe's YAML configuration: one file with documented
// defaults for everything, environment overrides for the LLM connection,
// and a directory of character files deep-merged over the character section.
//
// It sits above the packages whose settings it assembles (each owns its own
// settings struct) and below main and app.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"time"

	"koe/agent"
	"koe/asr"
	"koe/conversation"
	"koe/coord"
	"koe/history"
	"koe/knowledge"
	"koe/livechat"
	"koe/llm"
	"koe/mcp"
	"koe/scene"
	"koe/server"
	"koe/tools"
	"koe/tts"
)

// Config is the whole configuration file.
type Config struct {
	// DataDir holds koe.db (histories). Relative paths are relative to the
	// working directory.
	DataDir string `yaml:"data_dir"`
	// Store is where histories (records, images, summaries, prompts) and
	// recall live: StoreBbolt (koe.db in DataDir) or StorePostgres
	// (StoreDSN, shared by any number of koe instances).
	Store string `yaml:"store"`
	// StoreDSN is the PostgreSQL connection string of the postgres store
	// (env KOE_DATABASE_URL overrides it).
	StoreDSN string `yaml:"store_dsn"`
	// StoreTimeout bounds each operation of the postgres store, and
	// connecting and migrating its schema at start.
	StoreTimeout time.Duration `yaml:"store_timeout"`
	// CharactersDir holds one YAML file per extra character; each file
	// holds keys of the character section and is deep-merged over it.
	CharactersDir string                 `yaml:"characters_dir"`
	LogLevel      string                 `yaml:"log_level"`
	Server        server.Config          `yaml:"server"`
	Conversation  conversation.Config    `yaml:"conversation"`
	Character     conversation.Character `yaml:"character"`
	// ASR is the speech recogniser shared by all characters.
	ASR asr.Config `yaml:"asr"`
	// MCP lists the MCP servers (mcp_servers, mcp_max_result_chars at the
	// top level, as Open-LLM-VTuber users write them); characters enable
	// them by name in tools.mcp_servers.
	MCP mcp.Config `yaml:",inline"`
	// Embeddings is the endpoint long-term recall and the knowledge base
	// rank with besides keywords; shared by all characters.
	Embeddings llm.EmbeddingsConfig `yaml:"embeddings"`
	// Knowledge is where characters' documents are kept and how turns
	// read them.
	Knowledge knowledge.Config `yaml:"knowledge"`
	// LiveChat turns a stream's chat into turns of a character's live
	// session.
	LiveChat livechat.Config `yaml:"live_chat"`
	// Scenes bounds the streamer's all-character scenes (POST /api/scenes).
	Scenes scene.Config `yaml:"scenes"`
	// Coord is how instances that share histories coordinate their
	// turns. Files from before the section may still hold its keys at
	// the top level (moveLegacyCoord).
	Coord coord.Config `yaml:"coord"`
	// Instance names this koe on every log line and as the koe_instance
	// label of every metric (env KOE_INSTANCE overrides it); "" means the
	// host name (InstanceName).
	Instance string `yaml:"instance"`

	// fileName is the base name of the configuration file; the client sees
	// it as the default character's "file".
	fileName string
}

// Stores of histories (Config.Store).
const (
	StoreBbolt    = "bbolt"
	StorePostgres = "postgres"
)

// Env names that override the file.
const (
	// EnvDatabaseURL overrides store_dsn, so that a password need not be
	// written in the file.
	EnvDatabaseURL = "KOE_DATABASE_URL"

	EnvBaseURL = "OPENAI_BASE_URL"
	EnvAPIKey  = "OPENAI_API_KEY"
	EnvModel   = "KOE_LLM_MODEL"
)

// Default returns the documented defaults.
func Default() Config {
	return Config{
		DataDir:       "data",
		Store:         StoreBbolt,
		StoreTimeout:  history.DefaultTimeout,
		CharactersDir: "characters",
		LogLevel:      "info",
		Server:        server.DefaultConfig(),
		Conversation:  conversation.DefaultConfig(),
		Character:     defaultCharacter(),
		ASR:           asr.DefaultConfig(),
		MCP: mcp.Config{
			Servers:             map[string]mcp.ServerConfig{},
			MaxResultChars:      mcp.DefaultMaxResultChars,
			MaxLineBytes:        mcp.DefaultMaxLineBytes,
			MaxDescriptionChars: mcp.DefaultMaxDescriptionChars,
			MaxSchemaBytes:      mcp.DefaultMaxSchemaBytes,
			HostLimits: mcp.HostLimits{MaxImages: mcp.DefaultMaxImages, MaxImageBytes: mcp.DefaultMaxImageBytes,
				ProgressInterval: mcp.DefaultProgressInterval, LogPerMinute: mcp.DefaultLogPerMinute, MaxLogChars: mcp.DefaultMaxLogChars},
			MaxPrompts:          mcp.DefaultMaxPrompts,
			MaxPromptChars:      mcp.DefaultMaxPromptChars,
			OAuthConsentTimeout: mcp.DefaultOAuthConsentTimeout,
		},
		Embeddings: llm.DefaultEmbeddingsConfig(),
		Knowledge:  knowledge.DefaultConfig(),
		LiveChat:   livechat.DefaultConfig(),
		Scenes:     scene.DefaultConfig(),
		Coord:      coord.DefaultConfig(),
		fileName:   "conf.yaml",
	}
}

const defaultPersona = `You are Koe, a warm and curious companion who talks with the user by voice.
Keep replies short and conversational: usually one to three sentences.
Write plain spoken sentences: no markdown, no lists, no emoji.`

func defaultCharacter() conversation.Character {
	return conversation.Character{
		ConfName:  "koe",
		ConfUID:   "koe_default",
		Name:      "Koe",
		HumanName: "Human",
		Persona:   defaultPersona,
		ModelInfo: defaultModelInfo(),
		LLM:       agent.DefaultConfig(),
		Memory:    agent.DefaultMemoryConfig(),
		TTS:       tts.DefaultConfig(),
		Tools: tools.Config{
			Enabled: []string{}, MCPServers: []string{},
			Timeout: tools.DefaultTimeout, MaxResultChars: tools.DefaultMaxResultChars,
			Allow: []string{}, Deny: []string{}, Confirm: []string{}, AskTimeout: tools.DefaultAskTimeout, MaxQuestions: tools.DefaultMaxQuestions,
		},
		Overlay: conversation.OverlayConfig{Avatar: conversation.AvatarConfig{Threshold: conversation.DefaultOverlayThreshold}},
	}
}

// defaultModelInfo describes the Live2D model OLV ships (mao_pro); drop its
// folder into live2d_models_dir, or set character.model_info for another.
func defaultModelInfo() map[string]any {
	return map[string]any{
		"name":                 "mao_pro",
		"description":          "",
		"url":                  "/live2d-models/mao_pro/runtime/mao_pro.model3.json",
		"kScale":               0.5,
		"initialXshift":        0,
		"initialYshift":        0,
		"kXOffset":             1150,
		"idleMotionGroupName":  "Idle",
		"emotionMap":           map[string]any{"neutral": 0, "anger": 2, "disgust": 2, "fear": 1, "joy": 3, "smirk": 3, "sadness": 1, "surprise": 3},
		"tapMotions":           map[string]any{"HitAreaHead": map[string]any{"": 1}, "HitAreaBody": map[string]any{"": 1}},
		"defaultEmotion":       0,
		"pointerInteractive":   true,
		"scrollToResize":       true,
		"initialScale":         nil,
		"idleMotionGroupIndex": nil,
	}
}

// An Override changes the configuration after the file and the environment
// are applied and before anything is validated; main's command-line flags
// are overrides, so validation sees the values koe will run with.
type Override func(*Config)

// Load reads path. A missing file means the defaults, unless required (the
// user named the file explicitly). getenv supplies the overrides; pass
// os.Getenv. Every file in CharactersDir is checked too, so a broken
// character stops koe at start rather than when a client picks it.
func Load(path string, required bool, getenv func(string) string, overrides ...Override) (Config, error) {
	cfg := Default()
	cfg.fileName = baseName(path)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !required:
		slog.Info("no configuration file; using the defaults", "path", path)
	case err != nil:
		return Config{}, fmt.Errorf("read config: %w", err)
	default:
		root, err := parseDocument(path, data)
		if err != nil {
			return Config{}, err
		}
		deprecated, err := moveLegacyCoord(path, root)
		if err != nil {
			return Config{}, err
		}
		for _, d := range deprecated {
			slog.Warn("a key of the configuration file is in its old form, which koe still reads; write the new key instead",
				"file", path, "line", d.Line, "old", d.Old, "new", d.New)
		}
		if err := checkNode(path, root, reflect.TypeOf(cfg), ""); err != nil {
			return Config{}, err
		}
		// A configured model_info replaces the default one; merging the
		// two would mix another model's emotion map into the user's.
		cfg.Character.ModelInfo = nil
		if root != nil {
			if err := root.Decode(&cfg); err != nil {
				return Config{}, fmt.Errorf("config %s: %w", path, err)
			}
		}
	}
	cfg.Character = finishCharacter(cfg.Character, getenv)
	cfg.Server.ApplyEnv(getenv)
	cfg.Embeddings.ApplyEnv(getenv)
	cfg.Knowledge.ApplyEnv(getenv)
	cfg.LiveChat.ApplyEnv(getenv)
	cfg.Coord.ApplyEnv(getenv)
	if getenv != nil {
		if v := getenv(EnvDatabaseURL); v != "" {
			cfg.StoreDSN = v
		}
		if v := getenv(EnvInstance); v != "" {
			cfg.Instance = v
		}
	}
	for _, override := range overrides {
		override(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	if err := checkCharacterFiles(cfg, getenv); err != nil {
		return Config{}, err
	}
	// The TLS files are read now, so that a wrong path or a key that
	// does not match stops koe at start with the key and file named.
	if cfg.Server.TLSCert != "" {
		if _, err := server.LoadCertificate(cfg.Server.TLSCert, cfg.Server.TLSKey); err != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if lc := cfg.LiveChat; lc.Enabled && lc.Character != "" && lc.Character != cfg.Character.ConfUID {
		if _, ok := NewCharacters(cfg, getenv).Find(lc.Character); !ok {
			return Config{}, fmt.Errorf("config %s: live_chat.character %q: no character has that conf_uid", path, lc.Character)
		}
	}
	return cfg, nil
}

// Validate reports settings that can never work.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("data_dir is empty")
	}
	switch c.Store {
	case StoreBbolt:
	case StorePostgres:
		if strings.TrimSpace(c.StoreDSN) == "" {
			return fmt.Errorf("store is postgres but store_dsn (or %s) is empty: give a connection string such as postgres://koe@127.0.0.1:5432/koe", EnvDatabaseURL)
		}
	default:
		return fmt.Errorf("store %q: use %s (the file in data_dir) or %s (store_dsn)", c.Store, StoreBbolt, StorePostgres)
	}
	if c.StoreTimeout <= 0 {
		return fmt.Errorf("store_timeout %v: must be positive (e.g. 10s)", c.StoreTimeout)
	}
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		return err
	}
	if err := checkInstance(c.Instance); err != nil {
		return err
	}
	for _, v := range []interface{ Validate() error }{c.Server, c.Conversation, c.Character, c.ASR, c.MCP, c.Embeddings, c.Knowledge, c.LiveChat, c.Scenes, c.Coord} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	return c.checkMCPServers(c.Character)
}

// checkMCPServers refuses a character that enables MCP servers the file
// does not configure.
func (c Config) checkMCPServers(ch conversation.Character) error {
	if err := c.MCP.CheckServers(ch.Tools.MCPServers); err != nil {
		return fmt.Errorf("character %q: tools.mcp_servers: %w", ch.ConfName, err)
	}
	if ref := ch.PersonaPromptFrom; ref != nil {
		if err := c.MCP.CheckServers([]string{ref.Server}); err != nil {
			return fmt.Errorf("character %q: persona_prompt_from.server: %w", ch.ConfName, err)
		}
	}
	return c.checkMCPKnowledge(ch)
}

// ParseLogLevel accepts debug, info, warn and error.
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log_level %q: use debug, info, warn or error", s)
	}
	return l, nil
}

// finishCharacter fills what the file may leave out and applies the env.
func finishCharacter(ch conversation.Character, getenv func(string) string) conversation.Character {
	if ch.ModelInfo == nil {
		ch.ModelInfo = defaultModelInfo()
	}
	if getenv == nil {
		return ch
	}
	if v := getenv(EnvBaseURL); v != "" {
		ch.LLM.BaseURL = v
	}
	if v := getenv(EnvAPIKey); v != "" {
		ch.LLM.APIKey = v
	}
	if v := getenv(EnvModel); v != "" {
		ch.LLM.Model = v
	}
	return ch
}

func baseName(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[i+1:]
	}
	return path
}
