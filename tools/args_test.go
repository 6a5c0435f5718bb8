package tools

import (
	"strings"
	"testing"
)

func TestDecodeArgs(t *testing.T) {
	schema := newSchema(map[string]property{
		"name":  {Type: "string", Description: "a name"},
		"count": {Type: "number", Description: "a count"},
		"loud":  {Type: "boolean", Description: "shout"},
	}, "name")
	type args struct {
		Name  string  `json:"name"`
		Count float64 `json:"count"`
		Loud  bool    `json:"loud"`
	}
	tests := []struct {
		in      string
		want    args
		wantErr string // substring; "" means success
	}{
		{in: `{"name":"x"}`, want: args{Name: "x"}},
		{in: ` {"name":"x","count":2.5,"loud":true} `, want: args{Name: "x", Count: 2.5, Loud: true}},
		{in: `{"name":"x","count":null}`, want: args{Name: "x"}},
		{in: `{"name":"ü\u00e9"}`, want: args{Name: "üé"}},

		{in: ``, wantErr: `missing required argument "name"`},
		{in: `   `, wantErr: `missing required argument "name"`},
		{in: `{}`, wantErr: `missing required argument "name" (expected "count": number, optional; "loud": boolean, optional; "name": string)`},
		{in: `{"name":null}`, wantErr: `missing required argument "name"`},
		{in: `{"name":"x","colour":"red"}`, wantErr: `unknown argument "colour" (expected "count": number, optional;`},
		// encoding/json would match this case-insensitively.
		{in: `{"Name":"x"}`, wantErr: `unknown argument "Name"`},
		{in: `{"name":"x","` + strings.Repeat("k", 500) + `":1}`, wantErr: `unknown argument "kkkk`},
		{in: `{"name":5}`, wantErr: `argument "name" must be a string, not a number`},
		{in: `{"name":true}`, wantErr: `argument "name" must be a string, not a boolean`},
		{in: `{"name":{}}`, wantErr: `argument "name" must be a string, not an object`},
		{in: `{"name":["x"]}`, wantErr: `argument "name" must be a string, not an array`},
		{in: `{"name":"x","count":"2"}`, wantErr: `argument "count" must be a number, not a string`},
		{in: `{"name":"x","loud":"yes"}`, wantErr: `argument "loud" must be a boolean, not a string`},
		{in: `[]`, wantErr: "the arguments must be a JSON object, not an array"},
		{in: `"x"`, wantErr: "the arguments must be a JSON object, not a string"},
		{in: `42`, wantErr: "the arguments must be a JSON object, not a number"},
		{in: `null`, wantErr: "the arguments must be a JSON object, not null"},
		{in: `true`, wantErr: "the arguments must be a JSON object, not a boolean"},
		{in: `{"name":"x"`, wantErr: "the arguments are not valid JSON: unexpected end of JSON input"},
		{in: `{"name":"x"} {}`, wantErr: "the arguments are not valid JSON: invalid character '{' after top-level value"},
		{in: `name=x`, wantErr: "the arguments are not valid JSON"},
		{in: `{'name':'x'}`, wantErr: "the arguments are not valid JSON"},
	}
	for _, tt := range tests {
		checkDecode(t, schema, tt.in, tt.want, tt.wantErr)
		var got args
		if err := schema.decode(tt.in, &got); err != nil && len(err.Error()) > maxErrorChars {
			t.Errorf("decode(%q): error of %d bytes: %v", tt.in, len(err.Error()), err)
		}
	}
}

func TestDecodeArgsNoProperties(t *testing.T) {
	schema := newSchema(map[string]property{})
	var got struct{}
	if err := schema.decode(`{}`, &got); err != nil {
		t.Fatal(err)
	}
	err := schema.decode(`{"x":1}`, &got)
	if err == nil || !strings.Contains(err.Error(), `unknown argument "x" (this tool takes no arguments)`) {
		t.Fatalf("got %v", err)
	}
}

func TestDecodeIntegerArgs(t *testing.T) {
	schema := newSchema(map[string]property{
		"days":  integer(1, 7, "how many days"),
		"start": integer(0, -1, "where to start"),
	})
	type args struct {
		Days  int `json:"days"`
		Start int `json:"start"`
	}
	tests := []struct {
		in      string
		want    args
		wantErr string
	}{
		{in: `{}`, want: args{}},
		{in: `{"days":1}`, want: args{Days: 1}},
		{in: `{"days":7,"start":123456789}`, want: args{Days: 7, Start: 123456789}},
		{in: `{"days":3.0}`, want: args{Days: 3}},
		{in: `{"days":3e0}`, want: args{Days: 3}},
		{in: `{"days":null}`, want: args{}},
		{in: `{"days":2,"days":5}`, want: args{Days: 5}},

		{in: `{"days":0}`, wantErr: `argument "days" must be a whole number from 1 to 7, not 0`},
		{in: `{"days":8}`, wantErr: `argument "days" must be a whole number from 1 to 7, not 8`},
		{in: `{"days":-1}`, wantErr: `from 1 to 7, not -1`},
		{in: `{"days":2.5}`, wantErr: `from 1 to 7, not 2.5`},
		{in: `{"days":1e400}`, wantErr: `from 1 to 7, not 1e400`},
		{in: `{"days":"3"}`, wantErr: `argument "days" must be an integer, not a string`},
		{in: `{"start":-1}`, wantErr: `argument "start" must be a whole number of at least 0, not -1`},
		{in: `{"start":1e300}`, wantErr: `argument "start" must be a whole number of at least 0, not 1e300`},
		{in: `{"start":9007199254740993}`, wantErr: `of at least 0, not 9007199254740993`},
		{in: `{"x":1}`, wantErr: `unknown argument "x" (expected "days": integer 1..7, optional; "start": integer >= 0, optional)`},
	}
	for _, tt := range tests {
		checkDecode(t, schema, tt.in, tt.want, tt.wantErr)
	}
	// The model is told the range.
	if got := string(schema.json()); !strings.Contains(got, `"days":{"type":"integer","description":"how many days","minimum":1,"maximum":7}`) ||
		!strings.Contains(got, `"start":{"type":"integer","description":"where to start","minimum":0}`) {
		t.Errorf("schema %s", got)
	}
}

// checkDecode decodes in with schema and wants either want or an error
// containing wantErr.
func checkDecode[T comparable](t *testing.T, schema objectSchema, in string, want T, wantErr string) {
	t.Helper()
	var got T
	err := schema.decode(in, &got)
	if wantErr == "" {
		if err != nil {
			t.Errorf("decode(%q): %v", in, err)
		} else if got != want {
			t.Errorf("decode(%q) = %+v, want %+v", in, got, want)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Errorf("decode(%q) = %v, want an error containing %q", in, err, wantErr)
	}
}
