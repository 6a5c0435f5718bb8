package config_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"koe/config"
)

// env returns a getenv backed by a map, so tests never see the real
// environment.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadMissingFileUsesDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf.yaml")
	cfg, err := config.Load(path, false, env(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	def := config.Default()
	if cfg.Server.Port != 12393 || cfg.Server.Port != def.Server.Port {
		t.Errorf("port = %d, want 12393", cfg.Server.Port)
	}
	if cfg.DataDir != "data" || cfg.CharactersDir != "characters" || cfg.LogLevel != "info" {
		t.Errorf("data_dir=%q characters_dir=%q log_level=%q, want data, characters, info", cfg.DataDir, cfg.CharactersDir, cfg.LogLevel)
	}
	if cfg.Character.LLM.BaseURL != "http://127.0.0.1:11434/v1" || cfg.Character.LLM.Model != "qwen2.5:7b" {
		t.Errorf("llm = %q %q, want the local Ollama default", cfg.Character.LLM.BaseURL, cfg.Character.LLM.Model)
	}
	if cfg.Character.ConfUID != "koe_default" {
		t.Errorf("conf_uid = %q, want koe_default", cfg.Character.ConfUID)
	}
	if got := cfg.Character.ModelInfo["name"]; got != "mao_pro" {
		t.Errorf("model_info.name = %v, want the default mao_pro", got)
	}
}

func TestLoadMissingRequiredFileFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mine.yaml")
	_, err := config.Load(path, true, env(nil))
	if err == nil {
		t.Fatal("Load of a missing required file succeeded")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %q is not fs.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), "mine.yaml") {
		t.Errorf("error %q does not name the missing file", err)
	}
}

func TestLoadEmptyFileUsesDefaults(t *testing.T) {
	path := writeFile(t, t.TempDir(), "conf.yaml", "# nothing configured yet\n")
	cfg, err := config.Load(path, true, env(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Server.Port != 12393 || cfg.Character.LLM.Model != "qwen2.5:7b" {
		t.Errorf("port=%d model=%q, want defaults", cfg.Server.Port, cfg.Character.LLM.Model)
	}
}

func TestLoadFileOverridesDefaults(t *testing.T) {
	path := writeFile(t, t.TempDir(), "conf.yaml", `
data_dir: /var/lib/koe
log_level: debug
server:
  port: 8080
  write_timeout: 30s
conversation:
  playback_timeout: 1m30s
character:
  conf_name: Aiko
  conf_uid: aiko-1
  llm:
    base_url: https://llm.example.org/v1
    model: llama3
    idle_timeout: 2m
    temperature: 0.5
`)
	cfg, err := config.Load(path, true, env(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.DataDir != "/var/lib/koe" || cfg.LogLevel != "debug" || cfg.Server.Port != 8080 {
		t.Errorf("data_dir=%q log_level=%q port=%d", cfg.DataDir, cfg.LogLevel, cfg.Server.Port)
	}
	if cfg.Server.WriteTimeout != 30*time.Second {
		t.Errorf("write_timeout = %v, want 30s", cfg.Server.WriteTimeout)
	}
	if cfg.Conversation.PlaybackTimeout != 90*time.Second {
		t.Errorf("playback_timeout = %v, want 1m30s", cfg.Conversation.PlaybackTimeout)
	}
	llm := cfg.Character.LLM
	if llm.BaseURL != "https://llm.example.org/v1" || llm.Model != "llama3" || llm.IdleTimeout != 2*time.Minute {
		t.Errorf("llm = %+v", llm)
	}
	if llm.Temperature == nil || *llm.Temperature != 0.5 {
		t.Errorf("temperature = %v, want 0.5", llm.Temperature)
	}
	// Keys the file leaves out keep their defaults.
	if cfg.Server.PingInterval != 30*time.Second || cfg.Character.Name != "Koe" {
		t.Errorf("ping_interval=%v character_name=%q, want defaults", cfg.Server.PingInterval, cfg.Character.Name)
	}
	if cfg.Character.ConfName != "Aiko" || cfg.Character.ConfUID != "aiko-1" {
		t.Errorf("conf_name=%q conf_uid=%q", cfg.Character.ConfName, cfg.Character.ConfUID)
	}
}

func TestLoadRejectsUnknownKeys(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, key string
	}{
		{"top level", "data_dirr: x\n", "data_dirr"},
		{"nested", "server:\n  prot: 1\n", "prot"},
		{"deep", "character:\n  llm:\n    modle: x\n", "modle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "conf.yaml", tc.yaml)
			_, err := config.Load(path, true, env(nil))
			if err == nil {
				t.Fatal("Load accepted an unknown key")
			}
			if !strings.Contains(err.Error(), tc.key) {
				t.Errorf("error %q does not name the key %q", err, tc.key)
			}
		})
	}
}

func TestLoadRejectsMalformedYAML(t *testing.T) {
	path := writeFile(t, t.TempDir(), "conf.yaml", "server: [port\n")
	if _, err := config.Load(path, true, env(nil)); err == nil {
		t.Fatal("Load accepted malformed YAML")
	}
	path = writeFile(t, t.TempDir(), "conf.yaml", "server:\n  write_timeout: soon\n")
	if _, err := config.Load(path, true, env(nil)); err == nil {
		t.Fatal(`Load accepted write_timeout: soon`)
	}
}

func TestLoadEnvOverridesFile(t *testing.T) {
	path := writeFile(t, t.TempDir(), "conf.yaml", `
character:
  llm:
    base_url: http://file.example:8080/v1
    api_key: from-file
    model: file-model
`)
	cfg, err := config.Load(path, true, env(map[string]string{
		config.EnvBaseURL: "http://env.example:9000/v1",
		config.EnvAPIKey:  "sk-env",
		config.EnvModel:   "env-model",
	}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	llm := cfg.Character.LLM
	if llm.BaseURL != "http://env.example:9000/v1" || llm.APIKey != "sk-env" || llm.Model != "env-model" {
		t.Errorf("llm = %q %q %q, want the env values", llm.BaseURL, llm.APIKey, llm.Model)
	}

	// Unset (empty) variables leave the file's values alone.
	cfg, err = config.Load(path, true, env(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	llm = cfg.Character.LLM
	if llm.BaseURL != "http://file.example:8080/v1" || llm.APIKey != "from-file" || llm.Model != "file-model" {
		t.Errorf("llm = %q %q %q, want the file values", llm.BaseURL, llm.APIKey, llm.Model)
	}
}

func TestLoadEnvNames(t *testing.T) {
	if config.EnvBaseURL != "OPENAI_BASE_URL" || config.EnvAPIKey != "OPENAI_API_KEY" || config.EnvModel != "KOE_LLM_MODEL" {
		t.Errorf("env names = %s %s %s", config.EnvBaseURL, config.EnvAPIKey, config.EnvModel)
	}
}

func TestLoadValidates(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		want       string // substring of the error
	}{
		{"port too big", "server:\n  port: 70000\n", nil, "port"},
		{"negative port", "server:\n  port: -1\n", nil, "port"},
		{"base_url not http", "character:\n  llm:\n    base_url: ftp://x/v1\n", nil, "base_url"},
		{"base_url no host", "character:\n  llm:\n    base_url: http:///v1\n", nil, "base_url"},
		{"base_url from env", "", map[string]string{config.EnvBaseURL: "localhost:11434"}, "base_url"},
		{"empty model", "character:\n  llm:\n    model: \"\"\n", nil, "model"},
		{"conf_uid traversal", "character:\n  conf_uid: ../x\n", nil, "conf_uid"},
		{"conf_uid slash", "character:\n  conf_uid: a/b\n", nil, "conf_uid"},
		{"empty conf_uid", "character:\n  conf_uid: \"\"\n", nil, "conf_uid"},
		{"log level", "log_level: loud\n", nil, "log_level"},
		{"empty data_dir", "data_dir: \"\"\n", nil, "data_dir"},
		{"playback timeout", "conversation:\n  playback_timeout: 0s\n", nil, "playback_timeout"},
		{"negative idle timeout", "character:\n  llm:\n    idle_timeout: -1s\n", nil, "idle_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "conf.yaml", tc.yaml)
			_, err := config.Load(path, true, env(tc.env))
			if err == nil {
				t.Fatal("Load accepted an invalid configuration")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestEnvModelRescuesEmptyModel(t *testing.T) {
	path := writeFile(t, t.TempDir(), "conf.yaml", "character:\n  llm:\n    model: \"\"\n")
	cfg, err := config.Load(path, true, env(map[string]string{config.EnvModel: "m"}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Character.LLM.Model != "m" {
		t.Errorf("model = %q, want m", cfg.Character.LLM.Model)
	}
}

func TestParseLogLevel(t *testing.T) {
	for _, ok := range []string{"debug", "info", "warn", "error", "INFO"} {
		if _, err := config.ParseLogLevel(ok); err != nil {
			t.Errorf("ParseLogLevel(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "loud", "verbose"} {
		if _, err := config.ParseLogLevel(bad); err == nil {
			t.Errorf("ParseLogLevel(%q) succeeded", bad)
		}
	}
}

func TestDefaultValidates(t *testing.T) {
	if err := config.Default().Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
}

func TestModelInfoDefaultAndReplaced(t *testing.T) {
	path := writeFile(t, t.TempDir(), "conf.yaml", "character:\n  persona_prompt: hi\n")
	cfg, err := config.Load(path, true, env(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	mi := cfg.Character.ModelInfo
	if mi["name"] != "mao_pro" || mi["url"] != "/live2d-models/mao_pro/runtime/mao_pro.model3.json" {
		t.Errorf("default model_info = %v", mi)
	}
	if _, ok := mi["emotionMap"].(map[string]any); !ok {
		t.Errorf("default model_info has no emotionMap: %v", mi)
	}

	path = writeFile(t, t.TempDir(), "conf.yaml", `
character:
  model_info:
    name: shizuku
    url: /live2d-models/shizuku/shizuku.model.json
`)
	cfg, err = config.Load(path, true, env(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	mi = cfg.Character.ModelInfo
	if len(mi) != 2 || mi["name"] != "shizuku" || mi["url"] != "/live2d-models/shizuku/shizuku.model.json" {
		t.Errorf("configured model_info = %v, want exactly the two configured keys (not merged with the default)", mi)
	}
}

// The example file in the repository is the documentation of every key: it
// must load, and its values must be the defaults it claims to show, in
// every section.
func TestExampleConfigIsTheDefaults(t *testing.T) {
	cfg, err := config.Load("../conf.example.yaml", true, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	// The file shows tls: true; the default leaves it unset, which means
	// the same.
	if cfg.LiveChat.Twitch.UseTLS() == want.LiveChat.Twitch.UseTLS() {
		cfg.LiveChat.Twitch.TLS = want.LiveChat.Twitch.TLS
	}
	got, exp := reflect.ValueOf(&cfg).Elem(), reflect.ValueOf(&want).Elem()
	for i := range got.NumField() {
		f := got.Type().Field(i)
		if !f.IsExported() {
			continue // the file's own name
		}
		// The file writes an empty list or map as [] or {}, which the
		// defaults leave nil: the same setting.
		g, e := emptyAsNil(got.Field(i)), emptyAsNil(exp.Field(i))
		if !reflect.DeepEqual(g.Interface(), e.Interface()) {
			t.Errorf("conf.example.yaml's %s differs from the defaults:\n got %+v\nwant %+v", f.Name, g, e)
		}
	}
}

// emptyAsNil returns a copy of v in which the empty lists and maps of
// structs (not behind pointers or inside maps, which the copy shares) are
// nil.
func emptyAsNil(v reflect.Value) reflect.Value {
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	var walk func(reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Map, reflect.Slice:
			if v.Len() == 0 && v.CanSet() {
				v.Set(reflect.Zero(v.Type()))
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		}
	}
	walk(c)
	return c
}

// MCP servers are configured at the top level, as OLV users write them,
// and a character may only enable servers that are configured.
func TestMCPServersConfig(t *testing.T) {
	path := writeFile(t, t.TempDir(), "conf.yaml", `
mcp_servers:
  time:
    command: uvx
    args: [mcp-server-time]
  search:
    url: http://127.0.0.1:8931/mcp
character:
  tts:
    engine: none
  tools:
    mcp_servers: [time]
`)
	cfg, err := config.Load(path, true, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.MCP.Servers["time"]; s.Command != "uvx" || len(s.Args) != 1 || cfg.MCP.Servers["search"].URL == "" {
		t.Errorf("mcp_servers = %+v", cfg.MCP.Servers)
	}
	if got := cfg.Character.Tools.MCPServers; len(got) != 1 || got[0] != "time" {
		t.Errorf("tools.mcp_servers = %q", got)
	}

	path = writeFile(t, t.TempDir(), "conf.yaml", `
mcp_servers:
  time: {command: uvx}
character:
  tts: {engine: none}
  tools: {mcp_servers: [weather]}
`)
	if _, err := config.Load(path, true, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "tools.mcp_servers") || !strings.Contains(err.Error(), "weather") {
		t.Errorf("an unknown server: %v", err)
	}
	path = writeFile(t, t.TempDir(), "conf.yaml", `
mcp_servers:
  time: {command: uvx, url: http://127.0.0.1:1/mcp}
`)
	if _, err := config.Load(path, true, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "mcp_servers.time") {
		t.Errorf("command and url: %v", err)
	}
}
