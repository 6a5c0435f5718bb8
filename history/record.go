package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"koe"
)

// storedRecord is a Record as every backend stores it. It is kept
// apart from Record so that the exported type can carry read-side fields
// (Seq, image refs) and change its JSON for the wire without touching the
// stored format, which must stay Open-LLM-VTuber's.
type storedRecord struct {
	Role        string        `json:"role"`
	Timestamp   string        `json:"timestamp"`
	Content     string        `json:"content"`
	Name        string        `json:"name,omitempty"`
	Avatar      string        `json:"avatar,omitempty"`
	Interrupted bool          `json:"interrupted,omitempty"`
	Images      []storedImage `json:"images,omitempty"`
	// koe's tool steps (roles tool_call and tool), not in OLV's format.
	ToolCalls  []koe.ToolCall    `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
	Meta       map[string]string `json:"metadata,omitempty"`
}

// storedImage describes an image of a stored record. Records written since
// images moved to their own bucket carry Size; older ones carry the
// picture itself as base64 in Data, which is never rewritten.
type storedImage struct {
	Source   string       `json:"source"`
	MimeType string       `json:"mime_type"`
	Size     int          `json:"size,omitempty"`
	Data     *inlineImage `json:"data,omitempty"`
}

// inlineImage stands for the base64 data of an image stored inline by older
// versions. Decoding a record only measures it: reading a history must not
// copy megabytes of pictures nobody asked for.
type inlineImage struct {
	size int
}

// UnmarshalJSON records the decoded size of a base64 JSON string, or takes
// a number as that size already measured (see measureInlineImages). It
// works on the raw token, which encoding/json hands over without copying.
func (d *inlineImage) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] != '"' {
		n, err := strconv.Atoi(string(b))
		if err != nil || n < 0 {
			return fmt.Errorf("image data is neither a string nor a size")
		}
		d.size = n
		return nil
	}
	size, ok := inlineSize(b)
	if !ok {
		return fmt.Errorf("image data is not a valid string")
	}
	d.size = size
	return nil
}

// inlineSize is the decoded size of the base64 (or data: URL) in the JSON
// string literal lit, quotes included.
func inlineSize(lit []byte) (int, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return 0, false
	}
	payload := lit[1 : len(lit)-1]
	if bytes.IndexByte(payload, '\\') >= 0 {
		// Escapes (e.g. "\/" from some encoders) change the length, so only
		// then pay for a real unquote.
		var s string
		if err := json.Unmarshal(lit, &s); err != nil {
			return 0, false
		}
		payload = []byte(s)
	}
	return base64Size(stripDataURL(payload)), true
}

// stripDataURL returns the payload of a "data:<type>;base64,<payload>" URL,
// or b itself if it is not one.
func stripDataURL(b []byte) []byte {
	if !bytes.HasPrefix(b, []byte("data:")) {
		return b
	}
	if _, payload, ok := bytes.Cut(b, []byte(",")); ok {
		return payload
	}
	return b
}

// base64Size is the number of bytes b decodes to, counted without decoding.
func base64Size(b []byte) int {
	n := len(b)
	for i := 0; i < 2 && n > 0 && b[n-1] == '='; i++ {
		n--
	}
	return n * 3 / 4
}

// EncodedRecord is a record ready to be written: its JSON and the decoded
// bytes of its images, in order, and its role. Encoding happens before a
// write begins, so a bad image stores nothing (and bbolt can rerun a
// batch cheaply).
type EncodedRecord struct {
	JSON   []byte
	Images [][]byte
	Role   string
}

// EncodeHistory encodes what CreateWith stores: a new history's metadata
// record, then records, each stamped now when it has no timestamp.
func EncodeHistory(now time.Time, records []koe.Record) ([]EncodedRecord, error) {
	stamp := now.Format(koe.TimestampLayout)
	out := make([]EncodedRecord, 0, len(records)+1)
	for _, r := range append([]koe.Record{{Role: koe.RoleMetadata, Timestamp: stamp}}, records...) {
		if r.Timestamp == "" {
			r.Timestamp = stamp
		}
		p, err := EncodeRecord(r)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// EncodeRecord turns r into what every backend stores. Images must carry
// their data (standard base64, optionally as a data: URL); it is decoded
// once here and kept as raw bytes, and the record keeps only each image's
// description.
func EncodeRecord(r koe.Record) (EncodedRecord, error) {
	sr := storedRecord{
		Role: r.Role, Timestamp: r.Timestamp, Content: r.Content,
		Name: r.Name, Avatar: r.Avatar, Interrupted: r.Interrupted,
		ToolCalls: r.ToolCalls, ToolCallID: r.ToolCallID, Meta: r.Meta,
	}
	p := EncodedRecord{Role: r.Role}
	for i, img := range r.Images {
		raw, err := img.DecodeData()
		if err != nil {
			return EncodedRecord{}, fmt.Errorf("image %d: %w: %w", i+1, err, koe.ErrInvalidRecord)
		}
		p.Images = append(p.Images, raw)
		sr.Images = append(sr.Images, storedImage{Source: img.Source, MimeType: img.MimeType, Size: len(raw)})
	}
	v, err := json.Marshal(sr)
	if err != nil {
		return EncodedRecord{}, fmt.Errorf("encode record: %w", err)
	}
	p.JSON = v
	return p, nil
}

// DecodeRecord reads the stored record body with sequence number seq.
// Images come back with a ref and size but never their bytes, whichever
// format they were stored in.
func DecodeRecord(seq uint64, body []byte) (koe.Record, error) {
	var sr storedRecord
	if err := json.Unmarshal(measureInlineImages(body), &sr); err != nil {
		return koe.Record{}, fmt.Errorf("decode record %016x: %w", seq, err)
	}
	r := koe.Record{
		Seq:  seq,
		Role: sr.Role, Timestamp: sr.Timestamp, Content: sr.Content,
		Name: sr.Name, Avatar: sr.Avatar, Interrupted: sr.Interrupted,
		ToolCalls: sr.ToolCalls, ToolCallID: sr.ToolCallID, Meta: sr.Meta,
	}
	for i, si := range sr.Images {
		size := si.Size
		if si.Data != nil {
			size = si.Data.size
		}
		r.Images = append(r.Images, koe.Image{Source: si.Source, MimeType: si.MimeType, Size: size, Ref: imageRef(seq, i)})
	}
	return r, nil
}

// RecordRole is the role of the stored record body, read without the rest.
func RecordRole(body []byte) (string, error) {
	var role struct {
		Role string `json:"role"`
	}
	if err := json.Unmarshal(measureInlineImages(body), &role); err != nil {
		return "", err
	}
	return role.Role, nil
}
