package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// A FileError is a mistake at one place in a YAML file, told in the file's
// own terms: the key path as written (character.llm.temperature) and the
// line in that file, never a Go type.
type FileError struct {
	File string
	// Line is 1-based; 0 when the mistake has no single place.
	Line int
	// Key is the dotted key path, with [i] for list items; empty for a
	// syntax error or a problem with the whole document.
	Key string
	// Problem is the whole message after the place, key included.
	Problem string
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s line %d: %s", e.File, e.Line, e.Problem)
	}
	return e.File + ": " + e.Problem
}

// parseDocument reads the one YAML document of file. An empty document
// (nothing, comments, or a bare null) gives a nil node.
func parseDocument(file string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(file, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &FileError{File: file, Line: next.Line, Problem: "a second YAML document starts here; koe reads one"}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(file, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if isNull(root) {
		return nil, nil
	}
	return root, nil
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?s)^yaml: (?:line (\d+): )?(.*)$`)
})

// parserProblems are the messages of yaml.v3's parser (as opposed to its
// scanner). yaml.v3 reports their line 0-based, and leaves the line out on
// the first line, so koe corrects them.
var parserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

func syntaxError(file string, err error) error {
	m := yamlLine().FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	line, _ := strconv.Atoi(m[1])
	if slices.Contains(parserProblems, m[2]) {
		line++
	}
	return &FileError{File: file, Line: line, Problem: m[2]}
}

// checkNode reports the first place where n does not fit t, the type it
// will be decoded into, walking t's yaml tags so that every settings struct
// of every package is covered without a list of keys here. prefix is the
// key path of n itself.
func checkNode(file string, n *yaml.Node, t reflect.Type, prefix string) error {
	if n == nil {
		return nil
	}
	if p := check(n, t, prefix); p != nil {
		p.File = file
		return p
	}
	return nil
}

var (
	durationType        = reflect.TypeOf(time.Duration(0))
	yamlUnmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

func check(n *yaml.Node, t reflect.Type, path string) *FileError {
	n = unalias(n)
	// A null leaves the setting as it is (or clears a list or a map),
	// which is what yaml.v3 does with it.
	if isNull(n) {
		return nil
	}
	// A type that decodes itself is the judge of its own syntax.
	if pt := reflect.PointerTo(t); pt.Implements(yamlUnmarshalerType) || pt.Implements(textUnmarshalerType) {
		return checkByDecoding(n, t, path)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return check(n, t.Elem(), path)
	case reflect.Interface:
		return nil // takes anything (model_info's values)
	case reflect.Struct:
		return checkStruct(n, t, path)
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return mismatch(n, t, path)
		}
		for i, item := range n.Content {
			if p := check(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); p != nil {
				return p
			}
		}
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return mismatch(n, t, path)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := unalias(n.Content[i]), n.Content[i+1]
			if p := check(k, t.Key(), path); p != nil {
				return p
			}
			if p := check(v, t.Elem(), joinKey(path, k.Value)); p != nil {
				return p
			}
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		// yaml.v3 silently cuts 1.5 down to 1; a setting should not.
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" {
			if f, err := strconv.ParseFloat(n.Value, 64); err != nil || f != math.Trunc(f) {
				return mismatch(n, t, path)
			}
		}
		fallthrough
	default:
		if n.Kind != yaml.ScalarNode {
			return mismatch(n, t, path)
		}
		return checkByDecoding(n, t, path)
	}
}

// checkByDecoding decodes n into a throwaway value of type t; yaml.v3's own
// rules (durations, overflow, yes/no booleans) decide, koe only words it.
func checkByDecoding(n *yaml.Node, t reflect.Type, path string) *FileError {
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return nil
	}
	var typeErr *yaml.TypeError
	if describe(t) == "" || !errors.As(err, &typeErr) {
		// A type with its own decoder explains itself.
		return &FileError{Line: n.Line, Key: path, Problem: withKey(path, strings.TrimPrefix(err.Error(), "yaml: "))}
	}
	return mismatch(n, t, path)
}

func mismatch(n *yaml.Node, t reflect.Type, path string) *FileError {
	want := describe(t)
	if want == "" {
		want = "another kind of value"
	}
	return &FileError{Line: n.Line, Key: path, Problem: withKey(path, fmt.Sprintf("expected %s, got %s", want, describeNode(n)))}
}

// describe says what a value of t looks like in YAML.
func describe(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 30s, 2m or 1h30m"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return describe(t.Elem())
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "text"
	case reflect.Struct:
		return "a mapping of keys"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map:
		return "a mapping"
	}
	return ""
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if r := []rune(v); len(r) > 40 {
		v = string(r[:40]) + "…"
	}
	return strconv.Quote(v)
}

func checkStruct(n *yaml.Node, t reflect.Type, path string) *FileError {
	if n.Kind != yaml.MappingNode {
		return mismatch(n, t, path)
	}
	fields := yamlFields(t)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := unalias(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			if p := checkMerge(v, t, path); p != nil {
				return p
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return &FileError{Line: k.Line, Key: path, Problem: withKey(path, "keys must be plain names, got "+describeNode(k))}
		}
		key := joinKey(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			return &FileError{Line: k.Line, Key: key, Problem: fmt.Sprintf("%s is set twice (first on line %d)", key, first)}
		}
		seen[k.Value] = k.Line
		ft, known := fields.byName[k.Value]
		if !known && fields.rest == nil {
			return &FileError{Line: k.Line, Key: key, Problem: "unknown key " + key + suggest(k.Value, t, path)}
		}
		if !known {
			ft = fields.rest
		}
		if p := check(v, ft, key); p != nil {
			return p
		}
	}
	return nil
}

// checkMerge checks the value of a "<<" merge key: a mapping or a list of
// mappings whose keys land in t.
func checkMerge(v *yaml.Node, t reflect.Type, path string) *FileError {
	v = unalias(v)
	sources := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		sources = v.Content
	}
	for _, s := range sources {
		if p := checkStruct(unalias(s), t, path); p != nil {
			return p
		}
	}
	return nil
}

type fieldSet struct {
	byName map[string]reflect.Type
	// rest is the value type of an ",inline" map that takes the keys no
	// field claims; nil when unknown keys are errors.
	rest reflect.Type
}

// names returns the keys of the fields, sorted, so that what is built
// from them comes out the same every time.
func (fs fieldSet) names() []string {
	return slices.Sorted(maps.Keys(fs.byName))
}

// yamlFields lists the keys yaml.v3 decodes into struct t, following the
// same tag rules: yaml:"name", "-" to skip, ",inline" to flatten, and the
// lower-cased field name when there is no tag.
func yamlFields(t reflect.Type) fieldSet {
	fs := fieldSet{byName: map[string]reflect.Type{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "" && !strings.Contains(string(f.Tag), ":") {
			tag = string(f.Tag)
		}
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Map:
				fs.rest = ft.Elem()
			case reflect.Struct:
				inner := yamlFields(ft)
				for k, v := range inner.byName {
					fs.byName[k] = v
				}
				if inner.rest != nil {
					fs.rest = inner.rest
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fs.byName[name] = f.Type
	}
	return fs
}

// suggest offers the keys a mistyped one was probably meant to be: a
// sibling within a typo or two, else the same key one or two sections
// further down (temperature written under character instead of llm).
func suggest(key string, t reflect.Type, path string) string {
	names := yamlFields(t).names()

	// One slip in a short key, two in a longer one; never so many that
	// any short key looks like any other.
	limit := 2
	switch n := len([]rune(key)); {
	case n <= 2:
		limit = 0
	case n <= 4:
		limit = 1
	}
	var close []string
	best := limit
	for _, name := range names {
		d := editDistance(strings.ToLower(key), name)
		switch {
		case d > best:
		case d < best || close == nil:
			best, close = d, []string{name}
		default:
			close = append(close, name)
		}
	}
	if len(close) == 0 {
		close = nestedKeys(key, t, path, 2)
	}
	if len(close) == 0 || len(close) > 3 {
		return ""
	}
	return " (did you mean " + strings.Join(close, " or ") + "?)"
}

// nestedKeys finds key in the sections below struct t (at prefix), depth
// levels deep, and returns their full key paths.
func nestedKeys(key string, t reflect.Type, prefix string, depth int) []string {
	if depth == 0 {
		return nil
	}
	var found []string
	fields := yamlFields(t)
	for _, name := range fields.names() {
		ft := fields.byName[name]
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() != reflect.Struct || reflect.PointerTo(ft).Implements(yamlUnmarshalerType) || reflect.PointerTo(ft).Implements(textUnmarshalerType) {
			continue
		}
		section := joinKey(prefix, name)
		if _, ok := yamlFields(ft).byName[key]; ok {
			found = append(found, section+"."+key)
		}
		found = append(found, nestedKeys(key, ft, section, depth-1)...)
	}
	return found
}

// editDistance counts the insertions, deletions, substitutions and swaps
// of neighbours that turn a into b (optimal string alignment), so that
// "modle" is one step from "model".
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

func unalias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// hasKey reports whether mapping n sets key, directly or through a merge.
func hasKey(n *yaml.Node, key string) bool {
	n = unalias(n)
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := unalias(n.Content[i])
		if k.Kind != yaml.ScalarNode {
			continue
		}
		if k.Value == key && k.ShortTag() != "!!merge" {
			return true
		}
		if k.ShortTag() == "!!merge" {
			v := unalias(n.Content[i+1])
			sources := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				sources = v.Content
			}
			for _, s := range sources {
				if hasKey(s, key) {
					return true
				}
			}
		}
	}
	return false
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func withKey(path, msg string) string {
	if path == "" {
		return msg
	}
	return path + ": " + msg
}
