package history

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"

	"koe"
)

// maxRefLen bounds a ref before it is parsed: the longest valid one is a
// 20-digit sequence, a dash and a 10-digit index.
const maxRefLen = 31

// imageRef names image index of record seq. It is derived from where the
// image is, never stored, so old records get refs without a migration.
func imageRef(seq uint64, index int) string {
	return strconv.FormatUint(seq, 10) + "-" + strconv.Itoa(index)
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

// imageKey is the images bucket key: record sequence then image index,
// big-endian, so a record's images sit together in order.
func imageKey(seq uint64, index uint32) [12]byte {
	var k [12]byte
	binary.BigEndian.PutUint64(k[:8], seq)
	binary.BigEndian.PutUint32(k[8:], index)
	return k
}

// Image returns the type and bytes of the image ref (an Image.Ref from a
// read) of a history. An unknown ref is ErrNotFound; a ref that is not of
// the form Image.Ref has is ErrInvalidID.
func (s *Store) Image(ctx context.Context, confUID, historyUID, ref string) (mime string, data []byte, err error) {
	if err := CheckHistory(ctx, confUID, historyUID); err != nil {
		return "", nil, err
	}
	seq, index, ok := parseRef(ref)
	if !ok {
		return "", nil, fmt.Errorf("image ref %q: %w", QuoteID(ref), koe.ErrInvalidID)
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		h := historyBucket(tx, confUID, historyUID)
		if h == nil {
			return koe.ErrNotFound
		}
		key := seqKey(seq)
		v := h.Bucket(bucketMessages).Get(key[:])
		if v == nil {
			return koe.ErrNotFound
		}
		var sr storedRecord
		if err := json.Unmarshal(measureInlineImages(v), &sr); err != nil {
			return fmt.Errorf("decode record %d: %w", seq, err)
		}
		if uint64(index) >= uint64(len(sr.Images)) {
			return koe.ErrNotFound
		}
		if sr.Images[index].Data != nil {
			mime, data, err = legacyImage(v, index)
			return err
		}
		mime = sr.Images[index].MimeType
		var raw []byte
		if imgs := h.Bucket(bucketImages); imgs != nil {
			k := imageKey(seq, index)
			raw = imgs.Get(k[:])
		}
		if raw == nil {
			// The record says the image was stored: the database is damaged,
			// which the client did nothing to cause.
			return fmt.Errorf("bytes of image %d of record %d are missing", index, seq)
		}
		// bbolt values live in the memory map only while the transaction
		// is open.
		data = append([]byte(nil), raw...)
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("read image %s of history %q of conf %q: %w", ref, historyUID, confUID, err)
	}
	return mime, data, nil
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
