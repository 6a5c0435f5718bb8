package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
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
// "number", "integer", "boolean", "object" or "array".
type property struct {
	Type        string `json:"type"`
	Description string `json:"description"`
	// Minimum and Maximum bound an integer, inclusive; the schema tells
	// the model and decode checks.
	Minimum *int `json:"minimum,omitempty"`
	Maximum *int `json:"maximum,omitempty"`
}

// integer is an integer property of the inclusive range [lo, hi]; hi
// below lo means no upper bound.
func integer(lo, hi int, description string) property {
	p := property{Type: "integer", Description: description, Minimum: &lo}
	if hi >= lo {
		p.Maximum = &hi
	}
	return p
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
		if p.Type == "integer" && kind == "number" {
			n, err := p.integer(name, fields[name])
			if err != nil {
				return err
			}
			// Models write 3.0 now and then; the Go field takes 3.
			fields[name] = json.RawMessage(strconv.FormatInt(n, 10))
			continue
		}
		if kind != p.Type && kind != "null" {
			return fmt.Errorf("argument %q must be %s, not %s", name, withArticle(p.Type), withArticle(kind))
		}
	}
	for _, name := range s.Required {
		if v, ok := fields[name]; !ok || jsonKind(v) == "null" {
			return fmt.Errorf("missing required argument %q (%s)", name, s.expected())
		}
	}
	// The checked fields, not raw: integers may have been rewritten, and
	// a repeated key was already settled by the map (the last one wins, as
	// it would in dst).
	checked, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("the arguments could not be read: %v", err)
	}
	if err := json.Unmarshal(checked, dst); err != nil {
		return fmt.Errorf("the arguments could not be read: %v", err)
	}
	return nil
}

// integer reads a number argument of an integer property: a whole number
// within the property's range.
func (p property) integer(name string, raw json.RawMessage) (int64, error) {
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	whole := err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53
	switch {
	case whole && (p.Minimum == nil || f >= float64(*p.Minimum)) && (p.Maximum == nil || f <= float64(*p.Maximum)):
		return int64(f), nil
	case p.Minimum != nil && p.Maximum != nil:
		return 0, fmt.Errorf("argument %q must be a whole number from %d to %d, not %s", name, *p.Minimum, *p.Maximum, clip(string(raw)))
	case p.Minimum != nil:
		return 0, fmt.Errorf("argument %q must be a whole number of at least %d, not %s", name, *p.Minimum, clip(string(raw)))
	case p.Maximum != nil:
		return 0, fmt.Errorf("argument %q must be a whole number of at most %d, not %s", name, *p.Maximum, clip(string(raw)))
	}
	return 0, fmt.Errorf("argument %q must be a whole number, not %s", name, clip(string(raw)))
}

// expected lists the arguments the schema takes.
func (s objectSchema) expected() string {
	if len(s.Properties) == 0 {
		return "this tool takes no arguments"
	}
	var parts []string
	for name, p := range s.Properties {
		part := fmt.Sprintf("%q: %s", name, p.Type)
		switch {
		case p.Minimum != nil && p.Maximum != nil:
			part += fmt.Sprintf(" %d..%d", *p.Minimum, *p.Maximum)
		case p.Minimum != nil:
			part += fmt.Sprintf(" >= %d", *p.Minimum)
		}
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
	case "object", "array", "integer":
		return "an " + kind
	case "null":
		return kind
	}
	return "a " + kind
}
