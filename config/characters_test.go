package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"koe/config"
	"koe/protocol"
)

// setup writes the configuration file main.yaml (with characters_dir
// pointing at a fresh directory) and the given character files, and loads
// the configuration.
func setup(t *testing.T, base string, files map[string]string, vars map[string]string) (*config.Characters, string) {
	t.Helper()
	dir := t.TempDir()
	chars := filepath.Join(dir, "chars")
	if err := os.Mkdir(chars, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		writeFile(t, chars, name, content)
	}
	// filepath.ToSlash keeps the YAML valid on Windows too.
	conf := "characters_dir: " + filepath.ToSlash(chars) + "\n" + base
	path := writeFile(t, dir, "main.yaml", conf)
	cfg, err := config.Load(path, true, env(vars))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return config.NewCharacters(cfg, env(vars)), chars
}

const baseConf = `
character:
  conf_name: Base
  conf_uid: base
  persona_prompt: You are the base.
  llm:
    base_url: http://base.example:8080/v1
    api_key: base-key
    model: base-model
`

func TestCharactersList(t *testing.T) {
	c, chars := setup(t, baseConf, map[string]string{
		"zed.yaml":     "conf_name: Zed\nconf_uid: zed\n",
		"alice.yml":    "conf_name: Alice\nconf_uid: alice\n",
		"notes.txt":    "conf_name: Notes\n",
		".hidden.yaml": "conf_name: Hidden\nconf_uid: hidden\n",
	}, nil)
	// Broken after start (start-up refuses them): still listed.
	writeFile(t, chars, "broken.yaml", "conf_name: [unclosed\n")
	writeFile(t, chars, "typo.yaml", "conf_nmae: Typo\n")
	writeFile(t, chars, "bad-uid.yaml", "conf_name: BadUID\nconf_uid: ../x\n")
	// A directory with a YAML name is not a character.
	if err := os.Mkdir(filepath.Join(chars, "dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}

	got, err := c.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := []protocol.ConfigFile{
		{Filename: "main.yaml", Name: "Base"},
		{Filename: "alice.yml", Name: "Alice"},
		{Filename: "bad-uid.yaml", Name: "bad-uid.yaml"},
		{Filename: "broken.yaml", Name: "broken.yaml"},
		{Filename: "typo.yaml", Name: "typo.yaml"},
		{Filename: "zed.yaml", Name: "Zed"},
	}
	// .hidden.yaml cannot be loaded (Load refuses dot files); whether it
	// is listed is a matter of taste, so drop it before comparing, but it
	// must never be listed under a loaded name.
	var filtered []protocol.ConfigFile
	for _, f := range got {
		if f.Filename == ".hidden.yaml" {
			if f.Name != ".hidden.yaml" {
				t.Errorf("hidden file listed as %q", f.Name)
			}
			continue
		}
		filtered = append(filtered, f)
	}
	if !reflect.DeepEqual(filtered, want) {
		t.Errorf("List =\n %v\nwant\n %v", filtered, want)
	}
}

func TestCharactersListWithoutDirectory(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "conf.yaml", "characters_dir: "+filepath.ToSlash(filepath.Join(dir, "absent"))+"\n")
	cfg, err := config.Load(path, true, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.NewCharacters(cfg, env(nil)).List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := []protocol.ConfigFile{{Filename: "conf.yaml", Name: "koe"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
}

func TestCharactersLoadDefault(t *testing.T) {
	c, _ := setup(t, baseConf, nil, nil)
	ch, err := c.Load("main.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !reflect.DeepEqual(ch, c.Default()) {
		t.Errorf("Load(main.yaml) = %+v, want the default %+v", ch, c.Default())
	}
	if ch.ConfName != "Base" || ch.LLM.Model != "base-model" {
		t.Errorf("default = %q %q", ch.ConfName, ch.LLM.Model)
	}
}

func TestCharactersLoadMergesOverBase(t *testing.T) {
	c, _ := setup(t, baseConf, map[string]string{
		"mika.yaml": `
conf_name: Mika
conf_uid: mika
persona_prompt: You are Mika.
llm:
  model: mika-model
`,
	}, nil)
	ch, err := c.Load("mika.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if ch.ConfName != "Mika" || ch.ConfUID != "mika" || ch.Persona != "You are Mika." {
		t.Errorf("character = %q %q %q", ch.ConfName, ch.ConfUID, ch.Persona)
	}
	if ch.LLM.Model != "mika-model" {
		t.Errorf("model = %q, want mika-model", ch.LLM.Model)
	}
	// Kept from the base section as written in the file.
	if ch.LLM.BaseURL != "http://base.example:8080/v1" || ch.LLM.APIKey != "base-key" {
		t.Errorf("base_url=%q api_key=%q, want the base's", ch.LLM.BaseURL, ch.LLM.APIKey)
	}
	// Set by neither: the documented defaults.
	if ch.Name != "Koe" || ch.HumanName != "Human" || ch.LLM.IdleTimeout <= 0 {
		t.Errorf("character_name=%q human_name=%q idle_timeout=%v, want defaults", ch.Name, ch.HumanName, ch.LLM.IdleTimeout)
	}
	if ch.ModelInfo["name"] != "mao_pro" {
		t.Errorf("model_info = %v, want the default", ch.ModelInfo)
	}
	// The default character is untouched by loading another.
	if d := c.Default(); d.Persona != "You are the base." || d.LLM.Model != "base-model" {
		t.Errorf("default changed: %q %q", d.Persona, d.LLM.Model)
	}
}

func TestCharactersLoadWithoutBaseSection(t *testing.T) {
	c, _ := setup(t, "", map[string]string{"a.yaml": "conf_name: A\nconf_uid: a\n"}, nil)
	ch, err := c.Load("a.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if ch.ConfName != "A" || ch.LLM.BaseURL != "http://127.0.0.1:11434/v1" || ch.Persona == "" {
		t.Errorf("character = %q %q persona=%q, want defaults under the file", ch.ConfName, ch.LLM.BaseURL, ch.Persona)
	}
}

func TestCharactersLoadAppliesEnv(t *testing.T) {
	vars := map[string]string{
		config.EnvBaseURL: "http://env.example:8080/v1",
		config.EnvAPIKey:  "env-key",
		config.EnvModel:   "env-model",
	}
	c, _ := setup(t, baseConf, map[string]string{
		"e.yaml": "conf_name: E\nconf_uid: e\nllm:\n  model: file-model\n  base_url: http://file.example:8080/v1\n",
	}, vars)
	ch, err := c.Load("e.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if ch.LLM.BaseURL != "http://env.example:8080/v1" || ch.LLM.APIKey != "env-key" || ch.LLM.Model != "env-model" {
		t.Errorf("llm = %q %q %q, want the env values", ch.LLM.BaseURL, ch.LLM.APIKey, ch.LLM.Model)
	}
}

func TestCharactersLoadModelInfo(t *testing.T) {
	c, _ := setup(t, baseConf, map[string]string{
		"m.yaml": "conf_name: M\nconf_uid: m\nmodel_info:\n  name: shizuku\n  kScale: 0.3\n",
	}, nil)
	ch, err := c.Load("m.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := map[string]any{"name": "shizuku", "kScale": 0.3}
	if !reflect.DeepEqual(ch.ModelInfo, want) {
		t.Errorf("model_info = %v, want %v (not merged with the default)", ch.ModelInfo, want)
	}
}

func TestCharactersLoadRejects(t *testing.T) {
	c, chars := setup(t, baseConf, map[string]string{".hidden.yaml": "conf_uid: h\n"}, nil)
	// Broken after start (start-up refuses them).
	writeFile(t, chars, "typo.yaml", "conf_nmae: T\n")
	writeFile(t, chars, "bad-uid.yaml", "conf_uid: ../x\n")
	writeFile(t, chars, "bad-url.yaml", "conf_uid: u\nllm:\n  base_url: nope\n")
	for _, tc := range []struct{ file, want string }{
		{"../x.yaml", "not a character file name"},
		{"a/b.yaml", "not a character file name"},
		{`a\b.yaml`, ""},
		{".hidden.yaml", "not a character file name"},
		{"x.txt", "not a character file name"},
		{"", "not a character file name"},
		{"missing.yaml", "missing.yaml"},
		{"typo.yaml", "conf_nmae"},
		{"bad-uid.yaml", "conf_uid"},
		{"bad-url.yaml", "base_url"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			ch, err := c.Load(tc.file)
			if err == nil {
				t.Fatalf("Load(%q) = %+v, want an error", tc.file, ch)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}
