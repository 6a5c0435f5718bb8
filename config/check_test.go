package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// level decodes itself, as a settings type in another package might.
type level int

func (l *level) UnmarshalText(b []byte) error {
	switch string(b) {
	case "low":
		*l = 1
	case "high":
		*l = 2
	default:
		return fmt.Errorf("level %q: use low or high", b)
	}
	return nil
}

type common struct {
	Name string `yaml:"name"`
}

type item struct {
	ID    int   `yaml:"id"`
	Level level `yaml:"level"`
}

// shape has every way of tagging a field that yaml.v3 knows, so the checker
// is shown to follow the same rules on types it has never seen.
type shape struct {
	common   `yaml:",inline"`
	Untagged int
	Skipped  int               `yaml:"-"`
	Items    []item            `yaml:"items,omitempty"`
	Limits   map[string]int    `yaml:"limits"`
	Sub      *struct{ A bool } `yaml:"sub"`
	Wait     time.Duration     `yaml:"wait"`
	Ratio    float32           `yaml:"ratio"`
	Count    uint8             `yaml:"count"`
	Any      map[string]any    `yaml:"any"`
	secret   int               //lint:ignore U1000 an unexported field the walker must skip
}

type open struct {
	Known string         `yaml:"known"`
	Rest  map[string]int `yaml:",inline"`
}

func checkYAML(t *testing.T, typ reflect.Type, src string) error {
	t.Helper()
	root, err := parseDocument("f.yaml", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return checkNode("f.yaml", root, typ, "")
}

func TestCheckFollowsYAMLTags(t *testing.T) {
	typ := reflect.TypeOf(shape{})
	good := `
name: inline field
untagged: 3
items:
  - id: 1
    level: high
limits: {a: 1, b: 2}
sub: {a: true}
wait: 1m
ratio: 0.5
count: 255
any: {x: [1, {y: z}], w: ~}
`
	if err := checkYAML(t, typ, good); err != nil {
		t.Fatalf("check rejected a valid document: %v", err)
	}
	var s shape
	root, _ := parseDocument("f.yaml", []byte(good))
	if err := root.Decode(&s); err != nil {
		t.Fatalf("yaml.v3 rejects what the check accepted: %v", err)
	}

	for _, tc := range []struct{ src, want string }{
		{"skipped: 1\n", "f.yaml line 1: unknown key skipped"},
		{"secret: 1\n", "f.yaml line 1: unknown key secret"},
		{"nmae: x\n", "f.yaml line 1: unknown key nmae (did you mean name?)"},
		{"items:\n  - id: 1\n  - id: 2\n    levle: low\n", "f.yaml line 4: unknown key items[1].levle (did you mean level?)"},
		{"items:\n  - level: medium\n", `f.yaml line 2: items[0].level: level "medium": use low or high`},
		{"limits:\n  a: lots\n", `f.yaml line 2: limits.a: expected a whole number, got "lots"`},
		{"sub:\n  a: 2\n", `f.yaml line 2: sub.a: expected true or false, got "2"`},
		{"sub:\n  b: true\n", "f.yaml line 2: unknown key sub.b"},
		{"count: 256\n", `f.yaml line 1: count: expected a whole number, 0 or more, got "256"`},
		{"count: -1\n", `f.yaml line 1: count: expected a whole number, 0 or more, got "-1"`},
		{"wait: [1s]\n", "f.yaml line 1: wait: expected a duration such as 30s, 2m or 1h30m, got a list"},
		{"any: 3\n", `f.yaml line 1: any: expected a mapping, got "3"`},
		{"x: &a {ratio: 1}\n", "f.yaml line 1: unknown key x"},
		{"base: &b {ratio: fast}\n", "f.yaml line 1: unknown key base"},
	} {
		err := checkYAML(t, typ, tc.src)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.src, err, tc.want)
		}
	}

	// An inline map takes the keys no field claims, with its value type.
	if err := checkYAML(t, reflect.TypeOf(open{}), "known: k\nother: 1\n"); err != nil {
		t.Errorf("inline map: %v", err)
	}
	err := checkYAML(t, reflect.TypeOf(open{}), "known: k\nother: x\n")
	if err == nil || err.Error() != `f.yaml line 2: other: expected a whole number, got "x"` {
		t.Errorf("inline map value: %v", err)
	}
}

func TestCheckFollowsAliasesAndMerges(t *testing.T) {
	typ := reflect.TypeOf(shape{})
	src := "items:\n  - &one {id: 1}\n  - *one\nsub: &s {a: true}\n"
	if err := checkYAML(t, typ, src); err != nil {
		t.Errorf("aliases: %v", err)
	}
	type pair struct {
		A item `yaml:"a"`
		B item `yaml:"b"`
	}
	src = "a: &base\n  id: 1\n  lvl: low\nb:\n  <<: *base\n  id: 2\n"
	err := checkYAML(t, reflect.TypeOf(pair{}), src)
	var fe *FileError
	if !errors.As(err, &fe) || fe.Line != 3 || fe.Key != "a.lvl" {
		t.Errorf("merge: error %v, want a.lvl on line 3", err)
	}
	src = "a: &base\n  id: 1\nb:\n  <<: *base\n  id: 2\n"
	if err := checkYAML(t, reflect.TypeOf(pair{}), src); err != nil {
		t.Errorf("merge: %v", err)
	}
}

// Whatever yaml.v3 writes for the whole configuration, the check accepts:
// a setting another package adds is covered without a change here.
func TestCheckAcceptsEveryMarshalledSetting(t *testing.T) {
	cfg := Default()
	temp := float32(0.7)
	cfg.Character.LLM.Temperature = &temp
	cfg.Server.AllowedOrigins = []string{"http://a.example"}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root, err := parseDocument("all.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkNode("all.yaml", root, reflect.TypeOf(cfg), ""); err != nil {
		t.Fatalf("check rejects marshalled defaults: %v\n%s", err, data)
	}
	// And every key it wrote is one the check knows: any of them
	// renamed is an unknown key, reported on its own line.
	keys := 0
	forEachKey(root, func(k *yaml.Node) {
		keys++
		name := k.Value
		k.Value = name + "x"
		defer func() { k.Value = name }()
		err := checkNode("all.yaml", root, reflect.TypeOf(cfg), "")
		var fe *FileError
		if !errors.As(err, &fe) || fe.Line != k.Line || !strings.HasPrefix(fe.Problem, "unknown key ") ||
			!strings.HasSuffix(fe.Key, name+"x") {
			t.Errorf("renamed %q on line %d: error %v, want an unknown key there", name, k.Line, err)
		}
	})
	if keys < 50 {
		t.Errorf("only %d keys walked", keys)
	}
}

// forEachKey calls f with every mapping key of the tree but those inside
// model_info, whose keys are free-form.
func forEachKey(n *yaml.Node, f func(*yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		for _, c := range n.Content {
			forEachKey(c, f)
		}
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		f(n.Content[i])
		if n.Content[i].Value != "model_info" {
			forEachKey(n.Content[i+1], f)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"model", "model", 0}, {"modle", "model", 1}, {"mdel", "model", 1},
		{"modell", "model", 1}, {"prot", "port", 1}, {"", "ab", 2}, {"abc", "", 3},
		{"kitten", "sitting", 3},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
