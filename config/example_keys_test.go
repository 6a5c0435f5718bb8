package config

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// exampleFile is the key reference users read: every key koe takes is in
// it, with a comment.
const exampleFile = "../conf.example.yaml"

// notInExample are key paths koe reads that the example leaves out on
// purpose; each says why.
var notInExample = map[string]string{
	"character.llm.max_tokens": "the old name of character.llm.max_reply_tokens, still read; the example names the new key beside it",

	"character.persona_prompt_from":           "needs an MCP server that offers prompts; the example shows it in a comment below persona_prompt",
	"character.persona_prompt_from.server":    "needs an MCP server that offers prompts; the example shows it in a comment below persona_prompt",
	"character.persona_prompt_from.prompt":    "needs an MCP server that offers prompts; the example shows it in a comment below persona_prompt",
	"character.persona_prompt_from.arguments": "needs an MCP server that offers prompts; the example shows it in a comment below persona_prompt",
}

// A path segment that stands for any entry of a map, or any item of a
// list.
const (
	anyEntry = "*"
	anyItem  = "[]"
)

// keyPaths lists every key path the configuration file can hold below
// struct t, following the decoder's tag rules (yamlFields) and descending
// into maps and lists of settings structs. Types that decode themselves
// and free-form values (model_info's) end a path.
func keyPaths(t reflect.Type, prefix []string) [][]string {
	var paths [][]string
	fields := yamlFields(t)
	for _, name := range fields.names() {
		path := append(slices.Clip(prefix), name)
		paths = append(paths, path)
		paths = append(paths, keyPathsBelow(fields.byName[name], path)...)
	}
	return paths
}

func keyPathsBelow(t reflect.Type, path []string) [][]string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if decodesItself(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return keyPaths(t, path)
	case reflect.Map:
		return keyPathsBelow(t.Elem(), append(slices.Clip(path), anyEntry))
	case reflect.Slice, reflect.Array:
		return keyPathsBelow(t.Elem(), append(slices.Clip(path), anyItem))
	}
	return nil
}

func decodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return pt.Implements(yamlUnmarshalerType) || pt.Implements(textUnmarshalerType)
}

// TestExampleNamesEveryKey: conf.example.yaml is the one reference of
// keys, so every key of config.Config must be in it. Maps and lists of
// settings (mcp_servers) are empty by default; their keys are checked in
// an entry, or in the commented-out example that follows an empty one.
func TestExampleNamesEveryKey(t *testing.T) {
	data, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	root, err := parseDocument(exampleFile, data)
	if err != nil {
		t.Fatal(err)
	}
	ex := &example{t: t, lines: strings.Split(string(data), "\n"), checked: map[int]bool{}}
	var missing []string
	for _, path := range keyPaths(reflect.TypeOf(Config{}), nil) {
		key := strings.Join(path, ".")
		if _, ok := notInExample[key]; ok {
			continue
		}
		if !ex.has(root, reflect.TypeOf(Config{}), path) {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s does not name %d keys koe reads; add each with a one-line comment (or to notInExample, saying why):\n  %s",
			exampleFile, len(missing), strings.Join(missing, "\n  "))
	}
}

// example is conf.example.yaml as the test reads it.
type example struct {
	t     *testing.T
	lines []string
	// checked holds the lines whose commented-out example was loaded.
	checked map[int]bool
}

// has reports whether path can be found below node n, whose settings are
// of type typ.
func (x *example) has(n *yaml.Node, typ reflect.Type, path []string) bool {
	if len(path) == 0 {
		return true
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	n = unalias(n)
	seg, rest := path[0], path[1:]
	switch seg {
	case anyEntry, anyItem:
		var entries []*yaml.Node
		switch {
		case seg == anyEntry && n.Kind == yaml.MappingNode:
			for i := 1; i < len(n.Content); i += 2 {
				entries = append(entries, n.Content[i])
			}
		case seg == anyItem && n.Kind == yaml.SequenceNode:
			entries = n.Content
		}
		for _, e := range entries {
			if x.has(e, typ.Elem(), rest) {
				return true
			}
		}
		return false
	}
	if n.Kind != yaml.MappingNode {
		return false
	}
	ft := yamlFields(typ).byName[seg]
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := unalias(n.Content[i]), n.Content[i+1]
		if k.Value != seg {
			continue
		}
		if len(rest) > 0 && (rest[0] == anyEntry || rest[0] == anyItem) && isEmpty(v) {
			ex := commentedExample(x.t, x.lines, k.Line)
			if ex == nil {
				return false
			}
			// The example is what users copy: it must be right too.
			if p := check(ex, ft, seg); p != nil && !x.checked[k.Line] {
				x.t.Errorf("%s: the commented-out example below line %d does not load: line %d of it: %s", exampleFile, k.Line, p.Line, p.Problem)
			}
			x.checked[k.Line] = true
			return x.has(ex, ft, rest)
		}
		return x.has(v, ft, rest)
	}
	return false
}

func isEmpty(n *yaml.Node) bool {
	n = unalias(n)
	return isNull(n) || ((n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && len(n.Content) == 0)
}

// commentedExample reads the commented-out YAML right below line (1-based):
// the run of comment lines that follows an empty map or list shows what
// its entries look like. Each line loses its first '#', and the block its
// common indentation.
func commentedExample(t *testing.T, lines []string, line int) *yaml.Node {
	var block []string
	for _, l := range lines[line:] {
		trimmed := strings.TrimSpace(l)
		if !strings.HasPrefix(trimmed, "#") {
			break
		}
		block = append(block, strings.Replace(l, "#", "", 1))
	}
	if len(block) == 0 {
		return nil
	}
	indent := -1
	for _, l := range block {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " ")); indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range block {
		if len(l) >= indent {
			block[i] = l[indent:]
		}
	}
	text := strings.Join(block, "\n")
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil || len(doc.Content) == 0 {
		t.Errorf("%s line %d: the commented-out example below it is not YAML: %v\n%s", exampleFile, line, err, text)
		return nil
	}
	return doc.Content[0]
}

// The walk itself must see through inline sections and into maps of
// settings, or the test above would pass on keys it never looked for.
func TestKeyPathsReachEverySection(t *testing.T) {
	var got []string
	for _, p := range keyPaths(reflect.TypeOf(Config{}), nil) {
		got = append(got, strings.Join(p, "."))
	}
	for _, want := range []string{
		"data_dir",
		"mcp_max_line_bytes",             // inline section at the top level
		"mcp_servers.*.timeout",          // inside the entries of a map
		"character.llm.max_line_bytes",   // a nested settings struct
		"character.overlay.avatar.idle",  // two levels down
		"character.tools.python.uid",     // a tool's own settings
		"live_chat.twitch.reconnect_max", // the live chat's platform
		"knowledge.max_concurrent_ingests",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("keyPaths misses %s; it found:\n%s", want, fmt.Sprint(got))
		}
	}
}
