package config

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"koe/conversation"
	"koe/internal/quote"
	"koe/protocol"
)

// Characters lists and loads the selectable characters: the configuration
// file's own character plus every YAML file in CharactersDir. Files may be
// added, edited or removed while koe runs; every call sees the directory as
// it is then. A parsed file is kept until its size or modification time
// changes, so listing and Has cost a directory read and a stat per file,
// not a parse.
type Characters struct {
	cfg    Config
	getenv func(string) string

	mu    sync.Mutex
	cache map[string]characterFile // by file name
	// changed, if set, is called when a file is read anew or has gone.
	changed func()
}

// OnChange makes f be called whenever a character file is read anew (new
// or changed) or is found gone. Set it before use; f must not block.
func (c *Characters) OnChange(f func()) { c.changed = f }

// characterFile is one parsed file and the stat it was parsed after.
type characterFile struct {
	size int64
	mod  time.Time
	ch   conversation.Character
	err  error
}

// NewCharacters serves the characters of cfg.
func NewCharacters(cfg Config, getenv func(string) string) *Characters {
	return &Characters{cfg: cfg, getenv: getenv, cache: map[string]characterFile{}}
}

// Default is the configuration file's own character.
func (c *Characters) Default() conversation.Character { return c.cfg.Character }

// List returns the default character first, then the files by name. A file
// that does not load is listed under its file name (and logged when it is
// read), so one broken file does not hide the others.
func (c *Characters) List() ([]protocol.ConfigFile, error) {
	out := []protocol.ConfigFile{{Filename: c.cfg.fileName, Name: c.cfg.Character.ConfName}}
	files, err := c.scan()
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		label := f.name
		if f.err == nil {
			label = f.ch.ConfName
		}
		out = append(out, protocol.ConfigFile{Filename: f.name, Name: label})
	}
	return out, nil
}

// Has reports whether confUID belongs to a character a client can pick:
// the default one or a character file that loads. A file added while koe
// runs counts from the next call on.
func (c *Characters) Has(confUID string) bool {
	_, ok := c.Find(confUID)
	return ok
}

// Find returns the character whose conf_uid is confUID, as Has finds it.
func (c *Characters) Find(confUID string) (conversation.Character, bool) {
	if confUID == c.cfg.Character.ConfUID {
		return c.cfg.Character, true
	}
	files, err := c.scan()
	if err != nil {
		slog.Warn("cannot list the characters", "err", err)
		return conversation.Character{}, false
	}
	for _, f := range files {
		if f.err == nil && f.ch.ConfUID == confUID {
			return f.ch, true
		}
	}
	return conversation.Character{}, false
}

// Load returns the character of file: the default for the configuration
// file's own name, otherwise characters/<file> deep-merged over the default
// character (as configured, defaults included). file comes from a client,
// so it must be a plain YAML file name. The file is always read afresh: a
// user who just saved it gets what is on disk.
func (c *Characters) Load(file string) (conversation.Character, error) {
	if file == c.cfg.fileName {
		return c.cfg.Character, nil
	}
	if !isCharacterFileName(file) {
		return conversation.Character{}, characterError{conversation.ErrNoCharacter, fmt.Errorf("%q is not a character file name", quote.Shorten(file, 80))}
	}
	info, err := os.Stat(filepath.Join(c.cfg.CharactersDir, file))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return conversation.Character{}, characterError{conversation.ErrNoCharacter, fmt.Errorf("there is no character file %q", file)}
		}
		return conversation.Character{}, fmt.Errorf("read character: %w", err)
	}
	if !info.Mode().IsRegular() {
		return conversation.Character{}, characterError{conversation.ErrNoCharacter, fmt.Errorf("character %s is not a regular file", file)}
	}
	f := c.read(file, info)
	if f.err != nil {
		return conversation.Character{}, characterError{conversation.ErrBrokenCharacter, f.err}
	}
	return f.ch, nil
}

// characterError is a character a client cannot have, worded for the
// client, and of the kind conversation tells apart.
type characterError struct {
	kind error // conversation.ErrNoCharacter or ErrBrokenCharacter
	err  error
}

func (e characterError) Error() string   { return e.err.Error() }
func (e characterError) Unwrap() []error { return []error{e.kind, e.err} }

// namedFile is a character file as scan found it.
type namedFile struct {
	name string
	characterFile
}

// scan returns every character file by name, parsing only the files that
// changed since they were last read.
func (c *Characters) scan() ([]namedFile, error) {
	names, err := characterFileNames(c.cfg.CharactersDir)
	if err != nil {
		return nil, err
	}
	files := make([]namedFile, 0, len(names))
	present := make(map[string]bool, len(names))
	for _, name := range names {
		info, err := os.Stat(filepath.Join(c.cfg.CharactersDir, name))
		if err != nil || !info.Mode().IsRegular() {
			continue // gone since the listing, or a directory named x.yaml
		}
		present[name] = true
		c.mu.Lock()
		f, ok := c.cache[name]
		c.mu.Unlock()
		if !ok || f.size != info.Size() || !f.mod.Equal(info.ModTime()) {
			f = c.read(name, info)
		}
		files = append(files, namedFile{name: name, characterFile: f})
	}
	gone := false
	c.mu.Lock()
	for name := range c.cache {
		if !present[name] {
			delete(c.cache, name)
			gone = true
		}
	}
	c.mu.Unlock()
	if gone && c.changed != nil {
		c.changed()
	}
	return files, nil
}

// read parses file and caches it under info, the stat taken before the
// read: if the file changes in between, the next scan sees a newer stat and
// reads it again, so the cache is never stale for good.
func (c *Characters) read(file string, info fs.FileInfo) characterFile {
	ch, err := readCharacter(c.cfg, c.getenv, file)
	if err != nil {
		slog.Warn("character file does not load; clients cannot pick it", "err", err)
	}
	f := characterFile{size: info.Size(), mod: info.ModTime(), ch: ch, err: err}
	c.mu.Lock()
	prev, had := c.cache[file]
	c.cache[file] = f
	c.mu.Unlock()
	// Load reads a file each time: only a new stat is a change.
	if c.changed != nil && (!had || prev.size != f.size || !prev.mod.Equal(f.mod)) {
		c.changed()
	}
	return f
}

// checkCharacterFiles loads every character file of cfg and returns the
// first error, for Load to refuse a configuration with a broken character.
func checkCharacterFiles(cfg Config, getenv func(string) string) error {
	names, err := characterFileNames(cfg.CharactersDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		path := filepath.Join(cfg.CharactersDir, name)
		info, err := os.Stat(path)
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if name == cfg.fileName {
			return fmt.Errorf("%s: a character file cannot have the configuration file's name (clients pick the default character by it); rename it", path)
		}
		if _, err := readCharacter(cfg, getenv, name); err != nil {
			return err
		}
	}
	return nil
}

// characterFileNames lists the YAML files of dir by name; a missing
// directory has none.
func characterFileNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list characters: %w", err)
	}
	var names []string
	for _, e := range entries {
		if isCharacterFileName(e.Name()) && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

func isCharacterFileName(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return name != "" && len(name) <= 255 && name == filepath.Base(name) && !strings.HasPrefix(name, ".") &&
		(ext == ".yaml" || ext == ".yml")
}

var characterType = reflect.TypeOf(conversation.Character{})

// readCharacter loads characters_dir/file over cfg's own character. Errors
// name the file as found on disk and its own lines.
func readCharacter(cfg Config, getenv func(string) string, file string) (conversation.Character, error) {
	path := filepath.Join(cfg.CharactersDir, file)
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return conversation.Character{}, fmt.Errorf("no character file %q in %s", file, cfg.CharactersDir)
		}
		return conversation.Character{}, fmt.Errorf("read character: %w", err)
	}
	root, err := parseDocument(path, data)
	if err != nil {
		return conversation.Character{}, err
	}
	if err := checkNode(path, root, characterType, ""); err != nil {
		return conversation.Character{}, err
	}
	// Decoding the file straight over a copy of the default character
	// is the deep merge: sections merge key by key, lists and scalars
	// replace, and every line number stays the file's own.
	ch, err := copyCharacter(cfg.Character)
	if err != nil {
		return conversation.Character{}, fmt.Errorf("%s: %w", path, err)
	}
	if root != nil {
		if hasKey(root, "model_info") {
			ch.ModelInfo = nil // replaced, not merged: see Load
		}
		if err := root.Decode(&ch); err != nil {
			return conversation.Character{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	ch = finishCharacter(ch, getenv)
	if err := ch.Validate(); err != nil {
		return conversation.Character{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := cfg.checkMCPServers(ch); err != nil {
		return conversation.Character{}, fmt.Errorf("%s: %w", path, err)
	}
	return ch, nil
}

// copyCharacter returns a copy of ch that shares no map or pointer with it,
// so decoding into the copy never changes the default character.
func copyCharacter(ch conversation.Character) (conversation.Character, error) {
	data, err := yaml.Marshal(ch)
	if err != nil {
		return conversation.Character{}, fmt.Errorf("copy the default character: %w", err)
	}
	var out conversation.Character
	if err := yaml.Unmarshal(data, &out); err != nil {
		return conversation.Character{}, fmt.Errorf("copy the default character: %w", err)
	}
	return out, nil
}
