package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koe/config"
)

// Errors in conf.yaml name the YAML key path and the line, and say what was
// expected, never a Go type.
func TestLoadErrorsNameKeyPathAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       string
	}{
		{"unknown deep key", "server:\n  port: 1\ncharacter:\n  llm:\n    modle: x\n",
			"conf.yaml line 5: unknown key character.llm.modle (did you mean model?)"},
		{"unknown top key", "log_levle: info\n",
			"conf.yaml line 1: unknown key log_levle (did you mean log_level?)"},
		{"unknown key, nothing close", "server:\n  frobnicate: 1\n",
			"conf.yaml line 2: unknown key server.frobnicate"},
		{"key in the wrong section", "character:\n  temperature: 0.5\n",
			"conf.yaml line 2: unknown key character.temperature (did you mean character.llm.temperature?)"},
		{"key in the wrong section, two candidates", "character:\n  model: x\n",
			"conf.yaml line 2: unknown key character.model (did you mean character.llm.model or character.tts.openai.model?)"},
		{"fraction for a whole number", "conversation:\n  vad:\n    start_ms: 1.5\n",
			`conf.yaml line 3: conversation.vad.start_ms: expected a whole number, got "1.5"`},
		{"float", "character:\n  llm:\n    temperature: hot\n",
			`conf.yaml line 3: character.llm.temperature: expected a number, got "hot"`},
		{"int", "server:\n  port: abc\n",
			`conf.yaml line 2: server.port: expected a whole number, got "abc"`},
		{"duration", "\nserver:\n  write_timeout: soon\n",
			`conf.yaml line 3: server.write_timeout: expected a duration such as 30s, 2m or 1h30m, got "soon"`},
		{"bare number as duration", "server:\n  write_timeout: 10\n",
			`conf.yaml line 2: server.write_timeout: expected a duration such as 30s, 2m or 1h30m, got "10"`},
		{"bool", "character:\n  llm:\n    vision: maybe\n",
			`conf.yaml line 3: character.llm.vision: expected true or false, got "maybe"`},
		{"section given a scalar", "server: 8080\n",
			`conf.yaml line 1: server: expected a mapping of keys, got "8080"`},
		{"list given a mapping", "server:\n  allowed_origins:\n    a: b\n",
			"conf.yaml line 3: server.allowed_origins: expected a list, got a mapping"},
		{"list element", "server:\n  allowed_origins:\n    - ok\n    - [nested]\n",
			"conf.yaml line 4: server.allowed_origins[1]: expected text, got a list"},
		{"text given a mapping", "character:\n  persona_prompt:\n    x: y\n",
			"conf.yaml line 3: character.persona_prompt: expected text, got a mapping"},
		{"duplicate key", "server:\n  port: 1\n  port: 2\n",
			"conf.yaml line 3: server.port is set twice (first on line 2)"},
		{"overflow", "server:\n  port: 99999999999999999999999\n",
			`conf.yaml line 2: server.port: expected a whole number, got "99999999999999999999999"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "conf.yaml", tc.yaml)
			_, err := config.Load(path, true, env(nil))
			if err == nil {
				t.Fatal("Load accepted the file")
			}
			if !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("error\n %q\nwant it to end in\n %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "type ") || strings.Contains(err.Error(), "!!") {
				t.Errorf("error %q speaks of Go or YAML types", err)
			}
		})
	}
}

func TestLoadSyntaxErrorNamesFileAndLine(t *testing.T) {
	path := writeFile(t, t.TempDir(), "conf.yaml", "log_level: info\nserver: [port\n")
	_, err := config.Load(path, true, env(nil))
	if err == nil {
		t.Fatal("Load accepted malformed YAML")
	}
	if !strings.Contains(err.Error(), "conf.yaml line 2: ") || strings.Contains(err.Error(), "yaml:") {
		t.Errorf("error %q does not read `conf.yaml line 2: ...`", err)
	}
}

// mikaTypo has the typo on line 7 of the character file; merged over the
// default character, the same key would sit on another line.
const mikaTypo = `# Mika, the astronomy student.
conf_name: Mika
conf_uid: mika
persona_prompt: You are Mika.

llm:
  modle: llama3
`

func TestLoadChecksCharacterFilesAtStart(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"unknown key", mikaTypo, "mika.yaml line 7: unknown key llm.modle (did you mean model?)"},
		{"type error", "conf_uid: mika\n\nllm:\n  temperature: hot\n",
			`mika.yaml line 4: llm.temperature: expected a number, got "hot"`},
		{"syntax error", "conf_uid: mika\nllm: [x\n", "mika.yaml line "},
		{"invalid value", "conf_name: Mika\nconf_uid: ../x\n", `mika.yaml: character "Mika": conf_uid "../x"`},
		{"not a mapping", "- a\n- b\n", "mika.yaml line 1: expected a mapping of keys, got a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			chars := filepath.Join(dir, "characters")
			if err := os.Mkdir(chars, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, chars, "alice.yaml", "conf_name: Alice\nconf_uid: alice\n")
			writeFile(t, chars, "mika.yaml", tc.file)
			path := writeFile(t, dir, "conf.yaml", "characters_dir: "+filepath.ToSlash(chars)+"\n")
			_, err := config.Load(path, true, env(nil))
			if err == nil {
				t.Fatal("Load accepted a broken character file")
			}
			want := filepath.Join(chars, tc.want)
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error\n %q\nwant it to start with\n %q", err, want)
			}
		})
	}
}

func TestCharactersLoadErrorsUseTheFilesLines(t *testing.T) {
	c, chars := setup(t, baseConf, nil, nil)
	// Broken after start: switch-config must report it as well as start-up.
	writeFile(t, chars, "mika.yaml", mikaTypo)
	_, err := c.Load("mika.yaml")
	want := filepath.Join(chars, "mika.yaml") + " line 7: unknown key llm.modle (did you mean model?)"
	if err == nil || err.Error() != want {
		t.Errorf("Load error = %v, want %q", err, want)
	}

	writeFile(t, chars, "mika.yaml", "conf_uid: mika\ntts:\n  espeak_ng:\n    rate: fast\n")
	_, err = c.Load("mika.yaml")
	want = filepath.Join(chars, "mika.yaml") + ` line 4: tts.espeak_ng.rate: expected a whole number, got "fast"`
	if err == nil || err.Error() != want {
		t.Errorf("Load error = %v, want %q", err, want)
	}
}

func TestCharactersMergeNestedSections(t *testing.T) {
	c, _ := setup(t, baseConf+"  tts:\n    espeak_ng:\n      voice: en-gb\n      rate: 200\n", map[string]string{
		"v.yaml": "conf_uid: v\ntts:\n  espeak_ng:\n    rate: 120\n",
	}, nil)
	ch, err := c.Load("v.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if ch.TTS.Espeak.Rate != 120 || ch.TTS.Espeak.Voice != "en-gb" || ch.TTS.Espeak.Binary != "espeak-ng" {
		t.Errorf("espeak = %+v, want rate 120 from the file, voice en-gb from conf, binary from the defaults", ch.TTS.Espeak)
	}
	if ch.LLM.Model != "base-model" {
		t.Errorf("model = %q, want the base's", ch.LLM.Model)
	}
}

// Loading a character must not change the default character, even through
// the pointer-valued temperature.
func TestCharactersLoadLeavesDefaultAlone(t *testing.T) {
	c, _ := setup(t, "character:\n  llm:\n    temperature: 0.2\n", map[string]string{
		"t.yaml": "conf_uid: t\nllm:\n  temperature: 0.9\n",
	}, nil)
	ch, err := c.Load("t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if ch.LLM.Temperature == nil || *ch.LLM.Temperature != 0.9 {
		t.Errorf("temperature = %v, want 0.9", ch.LLM.Temperature)
	}
	if d := c.Default().LLM.Temperature; d == nil || *d != 0.2 {
		t.Errorf("default temperature = %v, want 0.2", d)
	}
}
