package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"koe/conversation"
	"koe/protocol"
)

// Characters lists and loads the selectable characters: the configuration
// file's own character plus every YAML file in CharactersDir.
type Characters struct {
	cfg    Config
	getenv func(string) string
}

// NewCharacters serves the characters of cfg.
func NewCharacters(cfg Config, getenv func(string) string) *Characters {
	return &Characters{cfg: cfg, getenv: getenv}
}

// Default is the configuration file's own character.
func (c *Characters) Default() conversation.Character { return c.cfg.Character }

// List returns the default character first, then the files by name. A file
// that does not parse is listed under its file name and logged, so one
// broken file does not hide the others.
func (c *Characters) List() ([]protocol.ConfigFile, error) {
	out := []protocol.ConfigFile{{Filename: c.cfg.fileName, Name: c.cfg.Character.ConfName}}
	names, err := c.files()
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		ch, err := c.Load(name)
		label := ch.ConfName
		if err != nil {
			label = name
		}
		out = append(out, protocol.ConfigFile{Filename: name, Name: label})
	}
	return out, nil
}

func (c *Characters) files() ([]string, error) {
	entries, err := os.ReadDir(c.cfg.CharactersDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list characters: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && isYAML(e.Name()) && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

func isYAML(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return ext == ".yaml" || ext == ".yml"
}

// Load returns the character of file: the default for the configuration
// file's own name, otherwise characters/<file> deep-merged over the default
// character (as configured, defaults included). file
// comes from a client, so it must be a plain YAML file name.
func (c *Characters) Load(file string) (conversation.Character, error) {
	if file == c.cfg.fileName {
		return c.cfg.Character, nil
	}
	if file == "" || file != filepath.Base(file) || strings.HasPrefix(file, ".") || !isYAML(file) {
		return conversation.Character{}, fmt.Errorf("%q is not a character file name", file)
	}
	data, err := os.ReadFile(filepath.Join(c.cfg.CharactersDir, file))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return conversation.Character{}, fmt.Errorf("no character file %q in %s", file, c.cfg.CharactersDir)
		}
		return conversation.Character{}, fmt.Errorf("read character: %w", err)
	}
	var overlay map[string]any
	if err := yaml.Unmarshal(data, &overlay); err != nil {
		return conversation.Character{}, fmt.Errorf("character %s: %w", file, err)
	}
	base, err := asMap(c.cfg.Character)
	if err != nil {
		return conversation.Character{}, fmt.Errorf("character %s: %w", file, err)
	}
	if _, ok := overlay["model_info"]; ok {
		delete(base, "model_info") // replaced, not merged: see Load
	}
	merged, err := yaml.Marshal(DeepMerge(base, overlay))
	if err != nil {
		return conversation.Character{}, fmt.Errorf("character %s: %w", file, err)
	}
	var ch conversation.Character
	if err := decodeStrict(merged, &ch); err != nil {
		return conversation.Character{}, fmt.Errorf("character %s: %w", file, err)
	}
	ch = finishCharacter(ch, c.getenv)
	if err := ch.Validate(); err != nil {
		return conversation.Character{}, fmt.Errorf("character %s: %w", file, err)
	}
	return ch, nil
}

// asMap turns a settings struct into the generic shape overlays merge into.
func asMap(v any) (map[string]any, error) {
	data, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// DeepMerge returns base with overlay merged in: maps merge key by key,
// anything else in overlay replaces the base value. Neither input changes.
func DeepMerge(base, overlay map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(overlay))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range overlay {
		bm, bok := out[k].(map[string]any)
		om, ook := v.(map[string]any)
		if bok && ook {
			out[k] = DeepMerge(bm, om)
		} else {
			out[k] = v
		}
	}
	return out
}
