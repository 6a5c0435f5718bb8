package history

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"koe"
)

// Every backend keeps image bytes out of the records, so that reading a
// history costs the size of its text, not of its pictures: a record keeps
// each image's source, type and size, and reads hand out a ref
// ("<sequence>-<index>") that the store's Image resolves. Records written
// before this hold the pictures as base64 inside them; they are read in
// place, never rewritten, and Image serves their pictures from the record.

// maxRefLen bounds a ref before it is parsed: the longest valid one is a
// 20-digit sequence, a dash and a 10-digit index.
const maxRefLen = 31

// imageRef names image index of record seq. It is derived from where the
// image is, never stored, so old records get refs without a migration.
func imageRef(seq uint64, index int) string {
	return strconv.FormatUint(seq, 10) + "-" + strconv.Itoa(index)
}

// ParseImageRef reads an Image.Ref: the record's sequence number and the
// image's index in it. A ref of any other form is ErrInvalidID.
func ParseImageRef(ref string) (seq uint64, index uint32, err error) {
	seq, index, ok := parseRef(ref)
	if !ok {
		return 0, 0, fmt.Errorf("image ref %q: %w", QuoteID(ref), koe.ErrInvalidID)
	}
	return seq, index, nil
}

// parseRef accepts exactly the refs imageRef produces: decimal numbers
// without signs or leading zeros, a sequence of at least 1, an index that
// fits the key. Anything else is a client's garbage.
func parseRef(ref string) (seq uint64, index uint32, ok bool) {
	if len(ref) > maxRefLen {
		return 0, 0, false
	}
	s, i, found := strings.Cut(ref, "-")
	if !found || !canonicalUint(s) || !canonicalUint(i) {
		return 0, 0, false
	}
	seq, err := strconv.ParseUint(s, 10, 64)
	if err != nil || seq == 0 {
		return 0, 0, false
	}
	idx, err := strconv.ParseUint(i, 10, 32)
	if err != nil {
		return 0, 0, false
	}
	return seq, uint32(idx), true
}

func canonicalUint(s string) bool {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ReadImage is image index of the stored record body with sequence seq:
// its type and the bytes the store keeps apart (apart; nil: none), or,
// for a record written before images were kept apart, the picture inside
// it. A record without that image is ErrNotFound.
func ReadImage(seq uint64, body []byte, index uint32, apart []byte) (mime string, data []byte, err error) {
	var sr storedRecord
	if err := json.Unmarshal(measureInlineImages(body), &sr); err != nil {
		return "", nil, fmt.Errorf("decode record %d: %w", seq, err)
	}
	if uint64(index) >= uint64(len(sr.Images)) {
		return "", nil, koe.ErrNotFound
	}
	if sr.Images[index].Data != nil {
		return legacyImage(body, index)
	}
	if apart == nil {
		// The record says the image was stored: the database is damaged,
		// which the client did nothing to cause.
		return "", nil, fmt.Errorf("bytes of image %d of record %d are missing", index, seq)
	}
	return sr.Images[index].MimeType, apart, nil
}

// legacyImage decodes image index of a record written before images were
// kept apart. Only this path copies inline base64, and only when a client
// asks for the picture.
func legacyImage(v []byte, index uint32) (string, []byte, error) {
	var lr struct {
		Images []struct {
			MimeType string `json:"mime_type"`
			Data     string `json:"data"`
		} `json:"images"`
	}
	if err := json.Unmarshal(v, &lr); err != nil {
		return "", nil, fmt.Errorf("decode record: %w", err)
	}
	img := lr.Images[index]
	mime, payload := img.MimeType, img.Data
	if rest, ok := strings.CutPrefix(payload, "data:"); ok {
		header, data, _ := strings.Cut(rest, ",")
		if mime == "" {
			mime, _, _ = strings.Cut(header, ";")
		}
		payload = data
	}
	if payload == "" {
		return "", nil, koe.ErrNotFound
	}
	raw, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", nil, fmt.Errorf("decode inline image %d: %w", index, err)
	}
	return mime, raw, nil
}
