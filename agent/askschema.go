package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// An elicitation's requested schema is a flat object of strings, numbers,
// integers, booleans and enums (single or multiple choice), as MCP
// allows. The user's spoken or typed answer is read against it by rules
// where one field is asked or the user names the fields ("name: Ada,
// age: 36"); otherwise one structured-output LLM call reads it, within
// tools.timeout. What is read is checked against the schema either way.

// field is one property of a requested schema.
type field struct {
	name, title string
	typ         string   // string, number, integer, boolean, array
	options     []string // enum values (for array: the items' values)
	optionTitle []string // their titles, where given
	min, max    *float64
	minLen      *int
	maxLen      *int
	required    bool
}

type formSchema struct {
	fields []field
}

type rawProp struct {
	Type      string            `json:"type"`
	Title     string            `json:"title"`
	Enum      []any             `json:"enum"`
	EnumNames []string          `json:"enumNames"`
	OneOf     []rawConst        `json:"oneOf"`
	Items     *rawProp          `json:"items"`
	AnyOf     []rawConst        `json:"anyOf"`
	Minimum   *float64          `json:"minimum"`
	Maximum   *float64          `json:"maximum"`
	MinLength *int              `json:"minLength"`
	MaxLength *int              `json:"maxLength"`
	Props     map[string]any    `json:"properties"`
	Extra     map[string]string `json:"-"`
}

type rawConst struct {
	Const any    `json:"const"`
	Title string `json:"title"`
}

// parseForm reads a requested schema.
func parseForm(schema json.RawMessage) (formSchema, error) {
	var raw struct {
		Properties map[string]rawProp `json:"properties"`
		Required   []string           `json:"required"`
	}
	if len(schema) > 0 {
		if err := json.Unmarshal(schema, &raw); err != nil {
			return formSchema{}, fmt.Errorf("the requested schema: %w", err)
		}
	}
	names := make([]string, 0, len(raw.Properties))
	for n := range raw.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	var f formSchema
	for _, n := range names {
		p := raw.Properties[n]
		fl := field{name: n, title: p.Title, typ: p.Type, min: p.Minimum, max: p.Maximum, minLen: p.MinLength, maxLen: p.MaxLength}
		opts := func(enum []any, titles []string, consts []rawConst) {
			for i, e := range enum {
				fl.options = append(fl.options, fmt.Sprint(e))
				t := ""
				if i < len(titles) {
					t = titles[i]
				}
				fl.optionTitle = append(fl.optionTitle, t)
			}
			for _, c := range consts {
				fl.options = append(fl.options, fmt.Sprint(c.Const))
				fl.optionTitle = append(fl.optionTitle, c.Title)
			}
		}
		switch {
		case p.Type == "array" && p.Items != nil:
			opts(p.Items.Enum, nil, p.Items.AnyOf)
		default:
			opts(p.Enum, p.EnumNames, p.OneOf)
			if fl.typ == "" && len(fl.options) > 0 {
				fl.typ = "string"
			}
		}
		for _, r := range raw.Required {
			if r == n {
				fl.required = true
			}
		}
		f.fields = append(f.fields, fl)
	}
	return f, nil
}

// label is how a field is named to people.
func (fl field) label() string {
	if fl.title != "" {
		return fl.title
	}
	return strings.ReplaceAll(fl.name, "_", " ")
}

// describe says what a field takes, for the question's text.
func (fl field) describe() string {
	switch {
	case len(fl.options) > 0:
		names := make([]string, len(fl.options))
		for i := range fl.options {
			names[i] = fl.optionLabel(i)
		}
		if fl.typ == "array" {
			return fl.label() + " (any of " + strings.Join(names, ", ") + ")"
		}
		return fl.label() + " (" + strings.Join(names, ", ") + ")"
	case fl.typ == "boolean":
		return fl.label() + " (yes or no)"
	}
	return fl.label()
}

func (fl field) optionLabel(i int) string {
	if fl.optionTitle[i] != "" {
		return fl.optionTitle[i]
	}
	return fl.options[i]
}

// ElicitQuestion words a server's question for the user: its message,
// then what it asks for.
func ElicitQuestion(message string, schema json.RawMessage) (text, speech string, options []string, err error) {
	f, err := parseForm(schema)
	if err != nil {
		return "", "", nil, err
	}
	text = strings.TrimSpace(message)
	var parts []string
	for _, fl := range f.fields {
		parts = append(parts, fl.describe())
	}
	if len(f.fields) == 1 && len(f.fields[0].options) > 0 && f.fields[0].typ != "array" {
		for i := range f.fields[0].options {
			options = append(options, f.fields[0].optionLabel(i))
		}
	}
	switch {
	case len(parts) == 1 && len(f.fields[0].options) == 0 && f.fields[0].typ != "boolean":
		// The message already asks for the one value.
	case len(parts) > 0:
		text += " " + sentence(strings.Join(parts, "; "))
	}
	return text, text, options, nil
}

func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	return "(" + s + ")"
}

// readElicited reads the user's words into content for q's schema:
// "cancel"/"stop" cancel, "no"/"never mind" decline (except as a yes-or-no
// field's answer), and values that cannot be read decline, saying why.
func (a *Agent) readElicited(ctx context.Context, q Question, text string) Answer {
	f, err := parseForm(q.Schema)
	if err != nil {
		return Answer{Action: Decline, Text: text, Reason: err.Error()}
	}
	w := words(text)
	oneBool := len(f.fields) == 1 && f.fields[0].typ == "boolean"
	switch {
	case startsWithAny(w, cancelWords):
		return Answer{Action: Cancel, Text: text}
	case startsWithAny(w, declineWords) && !(oneBool && (w == "no" || strings.HasPrefix(w, "no "))):
		return Answer{Action: Decline, Text: text}
	case len(f.fields) == 0:
		return Answer{Action: Accept, Text: text, Content: map[string]any{}}
	}
	content, missing := f.byRules(text)
	if len(missing) > 0 && a.opts.LLM != nil {
		if read, err := a.readByModel(ctx, q, text); err != nil {
			a.log.Info("could not read an answer with the model", "err", err)
		} else {
			content, missing = f.check(read)
		}
	}
	if len(missing) > 0 {
		return Answer{Action: Decline, Text: text, Reason: "koe could not read " + strings.Join(missing, ", ") + " from the answer"}
	}
	return Answer{Action: Accept, Text: text, Content: content}
}

// byRules reads one field from the whole answer, or several named ones
// ("name: Ada, age: 36"). It returns what it read and the labels of the
// required fields it could not read.
func (f formSchema) byRules(text string) (map[string]any, []string) {
	if len(f.fields) == 1 {
		out := map[string]any{}
		if v, ok := f.fields[0].fromText(text); ok {
			out[f.fields[0].name] = v
			return out, nil
		}
		return out, []string{f.fields[0].label()}
	}
	named := map[string]any{}
	for _, part := range splitNamed.Split(text, -1) {
		k, v, ok := cutNamed(part)
		if !ok {
			continue
		}
		for _, fl := range f.fields {
			if words(k) == words(fl.name) || words(k) == words(fl.label()) {
				if val, ok := fl.fromText(v); ok {
					named[fl.name] = val
				}
			}
		}
	}
	return f.check(named)
}

var (
	splitNamed = regexp.MustCompile(`[,;\n]|\band\b`)
	numberRe   = regexp.MustCompile(`-?\d+(?:[.,]\d+)?`)
)

// cutNamed splits "name: value", "name = value" or "name is value".
func cutNamed(s string) (string, string, bool) {
	for _, sep := range []string{":", "=", " is "} {
		if k, v, ok := strings.Cut(s, sep); ok && strings.TrimSpace(k) != "" && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(k), strings.TrimSpace(v), true
		}
	}
	return "", "", false
}

// check keeps the values that fit their fields and names the required
// fields without one.
func (f formSchema) check(in map[string]any) (map[string]any, []string) {
	out := map[string]any{}
	var missing []string
	for _, fl := range f.fields {
		v, ok := in[fl.name]
		if ok && v != nil {
			if s, isText := v.(string); isText && fl.typ != "string" {
				v, ok = fl.fromText(s)
			} else {
				v, ok = fl.fit(v)
			}
		}
		if ok && v != nil {
			out[fl.name] = v
		} else if fl.required {
			missing = append(missing, fl.label())
		}
	}
	return out, missing
}

// fromText reads a field's value from words.
func (fl field) fromText(text string) (any, bool) {
	t := strings.TrimSpace(text)
	t = strings.Trim(t, `"'“”`)
	switch fl.typ {
	case "boolean":
		w := words(t)
		switch {
		case startsWithAny(w, yesWords):
			return true, true
		case startsWithAny(w, declineWords), startsWithAny(w, falseWords):
			return false, true
		}
		return nil, false
	case "number", "integer":
		m := numberRe.FindString(t)
		if m == "" {
			if n, ok := numberWords[words(t)]; ok {
				return fl.fit(float64(n))
			}
			return nil, false
		}
		n, err := strconv.ParseFloat(strings.ReplaceAll(m, ",", "."), 64)
		if err != nil {
			return nil, false
		}
		return fl.fit(n)
	case "array":
		var picked []any
		w := " " + words(t) + " "
		for i := range fl.options {
			if strings.Contains(w, " "+words(fl.options[i])+" ") || fl.optionTitle[i] != "" && strings.Contains(w, " "+words(fl.optionTitle[i])+" ") {
				picked = append(picked, fl.options[i])
			}
		}
		if len(picked) == 0 {
			return nil, false
		}
		return picked, true
	}
	if len(fl.options) > 0 {
		return fl.pick(t)
	}
	t = strings.TrimRight(t, ".!")
	return fl.fit(t)
}

// pick finds the one option the words name: the whole answer, or an
// option named within it.
func (fl field) pick(t string) (any, bool) {
	w := words(t)
	for i := range fl.options {
		if w == words(fl.options[i]) || fl.optionTitle[i] != "" && w == words(fl.optionTitle[i]) {
			return fl.options[i], true
		}
	}
	found := -1
	for i := range fl.options {
		if strings.Contains(" "+w+" ", " "+words(fl.options[i])+" ") || fl.optionTitle[i] != "" && strings.Contains(" "+w+" ", " "+words(fl.optionTitle[i])+" ") {
			if found >= 0 {
				return nil, false // two options named: not an answer
			}
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	return fl.options[found], true
}

// fit checks a value against its field, converting JSON numbers.
func (fl field) fit(v any) (any, bool) {
	switch fl.typ {
	case "number", "integer":
		var n float64
		ok := true
		switch x := v.(type) {
		case float64:
			n = x
		case int64:
			n = float64(x)
		default:
			ok = false
		}
		if !ok || math.IsNaN(n) || math.IsInf(n, 0) {
			return nil, false
		}
		if fl.min != nil && n < *fl.min || fl.max != nil && n > *fl.max {
			return nil, false
		}
		if fl.typ == "integer" {
			if n != math.Trunc(n) {
				return nil, false
			}
			return int64(n), true
		}
		return n, true
	case "boolean":
		b, ok := v.(bool)
		return b, ok
	case "array":
		items, ok := v.([]any)
		if !ok {
			return nil, false
		}
		for _, it := range items {
			s, ok := it.(string)
			if !ok || !contains(fl.options, s) {
				return nil, false
			}
		}
		return items, true
	}
	s, ok := v.(string)
	if !ok {
		return nil, false
	}
	if len(fl.options) > 0 {
		return fl.pick(s)
	}
	n := len([]rune(s))
	if n == 0 || fl.minLen != nil && n < *fl.minLen || fl.maxLen != nil && n > *fl.maxLen {
		return nil, false
	}
	return s, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var numberWords = map[string]int{
	"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
	"nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
	"sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
	"forty": 40, "fifty": 50, "hundred": 100, "a hundred": 100,
}

const readAnswerInstructions = `Read a person's spoken answer to a question into JSON that follows the given schema. ` +
	`Use only what the answer says; leave out a field it does not give. Answer with the JSON object only.`

// readByModel asks the model once, in JSON mode, within tools.timeout.
func (a *Agent) readByModel(ctx context.Context, q Question, text string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.ToolTimeout)
	defer cancel()
	zero := float32(0)
	req := Request{
		Messages: []WireMessage{
			{Role: RoleSystem, Content: readAnswerInstructions},
			{Role: RoleUser, Content: "Question: " + q.Text + "\nAnswer: " + text},
		},
		Temperature: &zero,
		JSONSchema:  &JSONSchema{Name: "answer", Schema: q.Schema},
	}
	out, _, err := a.opts.LLM.Complete(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(jsonObject(out)), &m); err != nil {
		return nil, fmt.Errorf("the model's reading is not a JSON object: %w", err)
	}
	return m, nil
}
