package history

import (
	"bytes"
	"strconv"
)

// Records written before images were kept apart hold each picture as a
// base64 string under "data". encoding/json validates and scans every byte
// of such a record, twice, which made reading a history of photos take a
// second of CPU. measureInlineImages rewrites a record so that each such
// string becomes its decoded size, a JSON number; inlineImage accepts
// either. It finds strings with bytes.IndexByte, which skips megabytes of
// base64 at memory speed.
//
// Only keys and values are told apart, not nesting: a "data" key anywhere
// is rewritten, which is harmless because only images' "data" is read.

// legacyMarker is how a record with inline images is recognised. It cannot
// occur inside a JSON string (quotes there are escaped), so it means a key
// or value "data", never message text.
var legacyMarker = []byte(`"data"`)

// measureInlineImages returns v with every string value of a "data" key
// replaced by its decoded size, or v itself if it has none. Malformed JSON
// is returned unchanged, for json.Unmarshal to report.
func measureInlineImages(v []byte) []byte {
	if !bytes.Contains(v, legacyMarker) {
		return v
	}
	var out []byte
	copied := 0      // v[:copied] is already in out
	dataKey := false // the last string was the key "data" and a ':' followed
	for i := 0; i < len(v); {
		c := v[i]
		if c != '"' {
			if c != ':' && !isJSONSpace(c) {
				dataKey = false
			}
			i++
			continue
		}
		end, ok := stringEnd(v, i)
		if !ok {
			return v
		}
		lit := v[i : end+1]
		if dataKey {
			size, ok := inlineSize(lit)
			if !ok {
				return v
			}
			if out == nil {
				out = make([]byte, 0, 1024)
			}
			out = append(out, v[copied:i]...)
			out = strconv.AppendInt(out, int64(size), 10)
			copied = end + 1
			dataKey = false
		} else if bytes.Equal(lit, legacyMarker) {
			j := end + 1
			for j < len(v) && isJSONSpace(v[j]) {
				j++
			}
			dataKey = j < len(v) && v[j] == ':'
		}
		i = end + 1
	}
	if out == nil {
		return v
	}
	return append(out, v[copied:]...)
}

// stringEnd returns the index of the quote closing the JSON string that
// opens at v[start]. A quote is escaped only by an odd run of backslashes.
func stringEnd(v []byte, start int) (int, bool) {
	i := start + 1
	for {
		n := bytes.IndexByte(v[i:], '"')
		if n < 0 {
			return 0, false
		}
		q := i + n
		backslashes := 0
		for k := q - 1; k > start && v[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q, true
		}
		i = q + 1
	}
}

func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}
