package history

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"koe"
)

// What both backends store byte for byte besides records: a migration
// from one to the other copies these as they are.

// EncodeText is how a knowledge document's text is stored: a uvarint
// page count, the pages' uvarint offsets, then the text as is (a 10 MiB
// document is not worth escaping into JSON).
func EncodeText(text string, pages []int) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64*(len(pages)+1)+len(text))
	b = binary.AppendUvarint(b, uint64(len(pages)))
	for _, p := range pages {
		b = binary.AppendUvarint(b, uint64(p))
	}
	return append(b, text...)
}

// DecodeText reads what EncodeText wrote. It copies: a backend's bytes
// may be valid only while it reads them.
func DecodeText(b []byte) (string, []int, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return "", nil, errors.New("stored text is malformed")
	}
	b = b[w:]
	var pages []int
	if n > 0 {
		pages = make([]int, n)
	}
	for i := range pages {
		p, w := binary.Uvarint(b)
		if w <= 0 || p > math.MaxInt32 {
			return "", nil, errors.New("stored page offsets are malformed")
		}
		pages[i], b = int(p), b[w:]
	}
	return string(b), pages, nil
}

// EncodeDoc checks a knowledge document of conf and encodes it as stored:
// its listing entry's JSON (meta) and its text with its pages (body).
func EncodeDoc(conf string, d koe.KnowledgeDoc, text string, pages []int) (meta, body []byte, err error) {
	if err := koe.CheckPages(text, pages); err != nil {
		return nil, nil, fmt.Errorf("put document %q of conf %q: %w", d.ID, conf, err)
	}
	meta, err = json.Marshal(d)
	if err != nil {
		return nil, nil, fmt.Errorf("encode document %q: %w", d.ID, err)
	}
	return meta, EncodeText(text, pages), nil
}

// DecodeDoc reads the listing entry meta of document id.
func DecodeDoc(id string, meta []byte) (koe.KnowledgeDoc, error) {
	var d koe.KnowledgeDoc
	if err := json.Unmarshal(meta, &d); err != nil {
		return koe.KnowledgeDoc{}, fmt.Errorf("decode document %q: %w", id, err)
	}
	d.ID = id
	return d, nil
}

// EncodeVector is how an embedding is stored: little-endian float32s.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// DecodeVector reads what EncodeVector wrote (nil: none, or malformed).
// It copies, as DecodeText does.
func DecodeVector(b []byte) []float32 {
	if len(b) == 0 || len(b)%4 != 0 {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// EncodeChunks checks the chunks of document docID of conf (each of it
// or of no document, seqs distinct and within 32 bits) and encodes each
// as stored.
func EncodeChunks(conf, docID string, chunks []koe.KnowledgeChunk) ([][]byte, error) {
	vals := make([][]byte, len(chunks))
	seen := make(map[int]bool, len(chunks))
	for i, c := range chunks {
		if c.DocID != "" && c.DocID != docID {
			return nil, fmt.Errorf("put chunks of document %q of conf %q: chunk %d belongs to document %q: %w",
				docID, conf, c.Seq, QuoteID(c.DocID), koe.ErrInvalidRecord)
		}
		if c.Seq < 0 || int64(c.Seq) > math.MaxUint32 || seen[c.Seq] {
			return nil, fmt.Errorf("put chunks of document %q of conf %q: chunk seq %d is negative, too large or repeated: %w",
				docID, conf, c.Seq, koe.ErrInvalidRecord)
		}
		seen[c.Seq] = true
		v, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encode chunk %d: %w", c.Seq, err)
		}
		vals[i] = v
	}
	return vals, nil
}
