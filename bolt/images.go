package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"

	"koe"
	"koe/history"
)

// Image bytes sit in the history's "images" bucket, beside the records
// (see package bolt on why they are kept apart).

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
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return "", nil, err
	}
	seq, index, err := history.ParseImageRef(ref)
	if err != nil {
		return "", nil, err
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		h := historyBucket(tx, confUID, historyUID)
		if h == nil {
			return koe.ErrNotFound
		}
		key := seqKey(seq)
		v := h.Bucket(bucketMessages).Get(key[:])
		if v == nil {
			return koe.ErrNotFound
		}
		var apart []byte
		if imgs := h.Bucket(bucketImages); imgs != nil {
			k := imageKey(seq, index)
			// bbolt values live in the memory map only while the
			// transaction is open.
			apart = bytes.Clone(imgs.Get(k[:]))
		}
		var err error
		mime, data, err = history.ReadImage(seq, v, index, apart)
		return err
	})
	if err != nil {
		return "", nil, fmt.Errorf("read image %s of history %q of conf %q: %w", ref, historyUID, confUID, err)
	}
	return mime, data, nil
}
