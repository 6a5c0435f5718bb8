package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// objectSchema is the JSON schema of a tool's arguments. The same value
// is sent to the model and checks what the model wrote, so the two cannot
// drift apart.
type objectSchema struct {
	Type                 string              `json:"type"` // always "object"
	Properties           map[string]property `json:"properties"`
	Required             []string            `json:"required"`
	AdditionalProperties bool                `json:"additionalProperties"`
}

// property is one argument. Type is a JSON schema type: "string",
// "number", "boolean", "object" or "array".
type property struct {
	Type        string `json:"type"`
	Description string `json:"description"`
}

// newSchema builds the schema of an object with the given properties, the
// required ones named; any other property is refused.
func newSchema(props map[string]property, required ...string) objectSchema {
	return objectSchema{Type: "object", Properties: props, Required: append([]string{}, required...)}
}

func (s objectSchema) json() json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		// A schema is a literal of this package: failing here is a
		// programming error, found by any test that builds a Box.
		panic(fmt.Sprintf("tools: schema does not marshal: %v", err))
	}
	return b
}

// decode reads the arguments the model wrote into dst, strictly: they must
// be a JSON object with only the schema's properties, each of its type,
// and every required one present. Empty arguments count as {}. The error
// says what is wrong in words the model can act on.
func (s objectSchema) decode(args string, dst any) error {
	raw := []byte(strings.TrimSpace(args))
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	var whole json.RawMessage
	if err := json.Unmarshal(raw, &whole); err != nil {
		return fmt.Errorf("the arguments are not valid JSON: %v", err)
	}
	if kind := jsonKind(raw); kind != "object" {
		return fmt.Errorf("the arguments must be a JSON object, not %s", withArticle(kind))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("the arguments are not valid JSON: %v", err)
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p, ok := s.Properties[name]
		if !ok {
			return fmt.Errorf("unknown argument %q (%s)", clip(name), s.expected())
		}
		kind := jsonKind(fields[name])
		if kind != p.Type && kind != "null" {
			return fmt.Errorf("argument %q must be %s, not %s", name, withArticle(p.Type), withArticle(kind))
		}
	}
	for _, name := range s.Required {
		if v, ok := fields[name]; !ok || jsonKind(v) == "null" {
			return fmt.Errorf("missing required argument %q (%s)", name, s.expected())
		}
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("the arguments could not be read: %v", err)
	}
	return nil
}

// expected lists the arguments the schema takes.
func (s objectSchema) expected() string {
	if len(s.Properties) == 0 {
		return "this tool takes no arguments"
	}
	var parts []string
	for name, p := range s.Properties {
		part := fmt.Sprintf("%q: %s", name, p.Type)
		if !slices.Contains(s.Required, name) {
			part += ", optional"
		}
		parts = append(parts, part)
	}
	slices.Sort(parts)
	return "expected " + strings.Join(parts, "; ")
}

// jsonKind is the JSON schema type of a valid JSON value, told by its first
// byte.
func jsonKind(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "null"
	}
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func withArticle(kind string) string {
	switch kind {
	case "object", "array":
		return "an " + kind
	case "null":
		return kind
	}
	return "a " + kind
}
