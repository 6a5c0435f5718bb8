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
		var got args
		err := schema.decode(tt.in, &got)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("decode(%q): %v", tt.in, err)
			} else if got != tt.want {
				t.Errorf("decode(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("decode(%q) = %v, want an error containing %q", tt.in, err, tt.wantErr)
		}
		if err != nil && len(err.Error()) > maxErrorChars {
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
