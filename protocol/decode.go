package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// DecodeError is a client message koe cannot read; its text is for the
// client.
type DecodeError struct{ msg string }

func (e *DecodeError) Error() string { return e.msg }

// Decode reads one client text frame. Its errors name the problem in the
// protocol's own terms (a field and the JSON type it needs), never Go's.
func Decode(data []byte) (Inbound, error) {
	var in Inbound
	// Nearly every frame is one valid object, which Unmarshal reads
	// without the Decoder's struct and buffer (about 1 KB a frame). It
	// refuses anything else, and the Decoder then reads the frame again
	// to say why in the words it always has (or to accept what follows
	// the object when it is only space, as it always did).
	if json.Unmarshal(data, &in) == nil {
		if in.Type == "" {
			return Inbound{}, &DecodeError{msg: `invalid message: it has no "type"`}
		}
		return in, nil
	}
	return decodeWithDecoder(data)
}

// decodeWithDecoder reads data with a json.Decoder, whose errors and
// leniency (space after the object is any Unicode space) Decode keeps.
func decodeWithDecoder(data []byte) (Inbound, error) {
	var in Inbound
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&in); err != nil {
		return Inbound{}, &DecodeError{msg: "invalid message: " + describeJSONError(err)}
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return Inbound{}, &DecodeError{msg: "invalid message: send one JSON object per frame, with nothing after it"}
	}
	if in.Type == "" {
		return Inbound{}, &DecodeError{msg: `invalid message: it has no "type"`}
	}
	return in, nil
}

// describeJSONError words encoding/json's errors for a client.
func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return fmt.Sprintf("a message must be a JSON object, not %s", jsonKind(typeErr.Value))
		}
		return fmt.Sprintf("%q must be %s, not %s", typeErr.Field, wantKind(typeErr.Type.Kind().String()), jsonKind(typeErr.Value))
	case errors.As(err, &syntaxErr):
		if strings.Contains(syntaxErr.Error(), "max depth") {
			return "it is nested too deeply"
		}
		return fmt.Sprintf("not valid JSON (at byte %d)", syntaxErr.Offset)
	case err.Error() == "unexpected EOF" || err.Error() == "EOF":
		return "not valid JSON (it ends too early)"
	}
	// The remaining errors of encoding/json (nesting too deep, …) are
	// already worded without Go types.
	return err.Error()
}

// jsonKind names the JSON type encoding/json reports as a value.
func jsonKind(v string) string {
	switch {
	case v == "number" || len(v) > 6 && v[:6] == "number":
		return "a number"
	case v == "string":
		return "a string"
	case v == "bool":
		return "true or false"
	case v == "array":
		return "an array"
	case v == "object":
		return "an object"
	}
	return v
}

// wantKind names the JSON type a Go kind decodes from.
func wantKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "float32", "float64":
		return "a number"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	case "ptr":
		return "a value of another type"
	}
	return "another type"
}
