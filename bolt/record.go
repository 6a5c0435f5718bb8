package bolt

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"

	"koe"
	"koe/history"
)

// decodeRecord reads the stored record under key k of a messages bucket.
func decodeRecord(k, v []byte) (koe.Record, error) {
	if v == nil {
		return koe.Record{}, fmt.Errorf("record %x: unexpected nested bucket", k)
	}
	if len(k) != 8 {
		return koe.Record{}, fmt.Errorf("record %x: key is not a sequence number", k)
	}
	return history.DecodeRecord(binary.BigEndian.Uint64(k), v)
}

func seqKey(seq uint64) [8]byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k
}

// putRecord appends p to history h under the next sequence number, its
// images beside it. The images bucket is created by the first record that
// has images, so histories without any, and older ones, simply lack it.
func putRecord(h *bbolt.Bucket, p history.EncodedRecord) error {
	msgs := h.Bucket(bucketMessages)
	seq, err := msgs.NextSequence()
	if err != nil {
		return fmt.Errorf("next sequence: %w", err)
	}
	key := seqKey(seq)
	if err := msgs.Put(key[:], p.JSON); err != nil {
		return fmt.Errorf("put record: %w", err)
	}
	if len(p.Images) == 0 {
		return nil
	}
	imgs, err := h.CreateBucketIfNotExists(bucketImages)
	if err != nil {
		return fmt.Errorf("images bucket: %w", err)
	}
	for i, raw := range p.Images {
		k := imageKey(seq, uint32(i))
		if err := imgs.Put(k[:], raw); err != nil {
			return fmt.Errorf("put image %d of record %d: %w", i, seq, err)
		}
	}
	return nil
}
