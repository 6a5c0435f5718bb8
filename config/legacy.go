package config

import (
	"fmt"
	"reflect"

	"gopkg.in/yaml.v3"

	"koe/coord"
)

// legacyCoordKeys are the coordination keys as they were written before
// the coord section existed, at the top level of the file, each with the
// key of the section it became. Files written then keep working: koe moves
// the old keys into the section as it reads the file, and warns.
var legacyCoordKeys = []struct{ old, key string }{
	{"redis_url", "redis_url"},
	{"coord_lease", "lease"},
	{"coord_wait", "wait"},
	{"coord_relay_queue", "relay_queue"},
}

// A deprecation is a key written in a form koe still reads but no longer
// documents.
type deprecation struct {
	Line int
	// Old is the key as written (coord_lease), New the key path to write
	// instead (coord.lease).
	Old, New string
}

// moveLegacyCoord rewrites the old forms of the coordination keys in root,
// the top-level mapping of file, into the coord section: a scalar
// `coord: redis` becomes coord.backend, and the top-level redis_url,
// coord_lease, coord_wait and coord_relay_queue become coord's keys. The
// nodes keep their lines, so later errors still point at what the user
// wrote. A key set both ways is an error, since neither can be said to win.
func moveLegacyCoord(file string, root *yaml.Node) ([]deprecation, error) {
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, nil // not a mapping: checkNode says so
	}
	var found []deprecation
	var moved []*yaml.Node // key, value, key, value… of the old keys
	kept := make([]*yaml.Node, 0, len(root.Content))
	section := -1 // index in kept of the coord key
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if _, legacy := newCoordKey(k); legacy {
			moved = append(moved, k, v)
			continue
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() != "!!merge" && k.Value == "coord" && section < 0 {
			section = len(kept)
			if s := unalias(v); s.Kind == yaml.ScalarNode && !isNull(s) {
				found = append(found, deprecation{Line: k.Line, Old: "coord: " + s.Value, New: "coord.backend"})
				v = mapping(s.Line, s.Column, scalar("backend", s.Line, s.Column), s)
			}
		}
		kept = append(kept, k, v)
	}
	root.Content = kept
	if len(moved) == 0 {
		return found, nil
	}
	if section < 0 {
		section = len(root.Content)
		root.Content = append(root.Content, scalar("coord", moved[0].Line, moved[0].Column), nil)
	}
	target := root.Content[section+1]
	if target == nil || isNull(unalias(target)) {
		target = mapping(moved[0].Line, moved[0].Column)
		root.Content[section+1] = target
	}
	target = unalias(target)
	if target.Kind != yaml.MappingNode {
		return found, nil // coord is neither a backend nor a section: checkNode says so
	}
	fields := yamlFields(reflect.TypeOf(coord.Config{}))
	for i := 0; i+1 < len(moved); i += 2 {
		k, v := moved[i], moved[i+1]
		key, _ := newCoordKey(k)
		if p := check(v, fields.byName[key], k.Value); p != nil {
			p.File = file
			return nil, p
		}
		if line, ok := keyLine(target, key); ok {
			return nil, &FileError{File: file, Line: k.Line, Key: k.Value, Problem: fmt.Sprintf(
				"%s is set twice: here, in its old place, and as coord.%s on line %d; keep coord.%s", k.Value, key, line, key)}
		}
		target.Content = append(target.Content, scalar(key, k.Line, k.Column), v)
		found = append(found, deprecation{Line: k.Line, Old: k.Value, New: "coord." + key})
	}
	return found, nil
}

// newCoordKey reports whether k is a top-level key of the old form, and
// the coord key it became.
func newCoordKey(k *yaml.Node) (string, bool) {
	if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
		return "", false
	}
	for _, l := range legacyCoordKeys {
		if k.Value == l.old {
			return l.key, true
		}
	}
	return "", false
}

// keyLine finds key in mapping n and returns the line it is on.
func keyLine(n *yaml.Node, key string) (int, bool) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := unalias(n.Content[i]); k.Kind == yaml.ScalarNode && k.Value == key {
			return k.Line, true
		}
	}
	return 0, false
}

func scalar(value string, line, column int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value, Line: line, Column: column}
}

func mapping(line, column int, content ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line, Column: column, Content: content}
}
