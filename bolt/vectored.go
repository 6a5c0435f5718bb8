package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"

	"koe/history"
)

// Text plus vector keyed by owner and sequence: recall's entries (each
// owned by a history) and knowledge's chunks (each owned by a document)
// are both JSON bodies in one bucket with their embeddings under the same
// keys in another. A key is the owner, 0x00, then the big-endian sequence
// number, so that an owner's keys are one range, in sequence order; valid
// ids hold no 0x00, so owners that prefix one another stay apart.
type vectored struct {
	// bodies and vectors are the buckets; when reading, either may be
	// nil: nothing stored yet.
	bodies, vectors *bbolt.Bucket
	// seqLen is the bytes of a key's sequence number: 8 or 4.
	seqLen int
	// body, vector and keyName name what is stored, for errors.
	body, vector, keyName string
}

// recallEntries is a conf's recall entries (b: its recall bucket; nil: none).
func recallEntries(b *bbolt.Bucket) vectored {
	v := vectored{seqLen: 8, body: "recall entry", vector: "recall vector", keyName: "recall key"}
	if b != nil {
		v.bodies, v.vectors = b.Bucket(bucketEntries), b.Bucket(bucketVectors)
	}
	return v
}

// knowledgeChunks is a conf's knowledge chunks (b: its knowledge bucket;
// nil: none).
func knowledgeChunks(b *bbolt.Bucket) vectored {
	v := vectored{seqLen: 4, body: "chunk", vector: "chunk vector", keyName: "chunk key"}
	if b != nil {
		v.bodies, v.vectors = b.Bucket(bucketChunks), b.Bucket(bucketChunkVecs)
	}
	return v
}

func (v vectored) key(owner string, seq uint64) []byte {
	k := make([]byte, 0, len(owner)+1+v.seqLen)
	k = append(k, owner...)
	k = append(k, 0)
	if v.seqLen == 4 {
		return binary.BigEndian.AppendUint32(k, uint32(seq))
	}
	return binary.BigEndian.AppendUint64(k, seq)
}

func (v vectored) parse(k []byte) (owner string, seq uint64, ok bool) {
	i := bytes.IndexByte(k, 0)
	if i < 0 || len(k) != i+1+v.seqLen {
		return "", 0, false
	}
	if v.seqLen == 4 {
		return string(k[:i]), uint64(binary.BigEndian.Uint32(k[i+1:])), true
	}
	return string(k[:i]), binary.BigEndian.Uint64(k[i+1:]), true
}

// ownerPrefix is the start of every key of owner.
func ownerPrefix(owner string) []byte { return append([]byte(owner), 0) }

// put stores body under k and vec beside it; a nil vec leaves a vector
// stored under k as it is.
func (v vectored) put(k, body []byte, vec []float32) error {
	if err := v.bodies.Put(k, body); err != nil {
		return fmt.Errorf("put %s: %w", v.body, err)
	}
	if vec == nil {
		return nil
	}
	return v.putVector(k, vec)
}

func (v vectored) putVector(k []byte, vec []float32) error {
	if err := v.vectors.Put(k, history.EncodeVector(vec)); err != nil {
		return fmt.Errorf("put %s: %w", v.vector, err)
	}
	return nil
}

// has reports whether a body is stored under k.
func (v vectored) has(k []byte) bool { return v.bodies != nil && v.bodies.Get(k) != nil }

// vectorOf is the vector stored under k (nil: none).
func (v vectored) vectorOf(k []byte) []float32 {
	if v.vectors == nil {
		return nil
	}
	return history.DecodeVector(v.vectors.Get(k))
}

// remove deletes the body and vector under k and reports whether there
// was a body.
func (v vectored) remove(k []byte) (bool, error) {
	existed := v.has(k)
	if err := v.bodies.Delete(k); err != nil {
		return false, err
	}
	if err := v.vectors.Delete(k); err != nil {
		return false, err
	}
	return existed, nil
}

// drop deletes every key of owner, in the bodies and vectors and in also
// (buckets keyed alike), and reports how many bodies there were.
func (v vectored) drop(owner string, also ...*bbolt.Bucket) (n int, err error) {
	prefix := ownerPrefix(owner)
	for i, b := range append([]*bbolt.Bucket{v.bodies, v.vectors}, also...) {
		if b == nil {
			continue
		}
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := c.Delete(); err != nil {
				return 0, err
			}
			if i == 0 {
				n++
			}
		}
	}
	return n, nil
}

// eachVectored calls fn with the bodies whose keys start with prefix,
// from key from on (nil: the first), decoded as T, with their owner,
// sequence number and vector, in key order, at most limit of them (0:
// all). A walk may be long: it stops when ctx ends. The values are
// copies: fn may keep them, but must not call the store.
func eachVectored[T any](ctx context.Context, v vectored, prefix, from []byte, limit int, fn func(owner string, seq uint64, t T, vec []float32) error) error {
	n := 0
	return scan(v.bodies, prefix, from, func(k, body []byte) error {
		if limit > 0 && n == limit {
			return errStop
		}
		n++
		if err := ctx.Err(); err != nil {
			return err
		}
		owner, seq, ok := v.parse(k)
		if !ok {
			return fmt.Errorf("%s %x is malformed", v.keyName, k)
		}
		var t T
		if err := json.Unmarshal(body, &t); err != nil {
			return fmt.Errorf("decode %s %x: %w", v.body, k, err)
		}
		return fn(owner, seq, t, v.vectorOf(k))
	})
}

// eachStored calls fn with owner's bodies and vectors (nil: none) as
// stored, copied, in sequence order: what a migration carries.
func (v vectored) eachStored(owner string, fn func(seq uint64, body, vector []byte) error) error {
	return scan(v.bodies, ownerPrefix(owner), nil, func(k, body []byte) error {
		_, seq, ok := v.parse(k)
		if !ok || body == nil {
			return fmt.Errorf("%s %x is malformed", v.keyName, k)
		}
		var vector []byte
		if v.vectors != nil {
			vector = bytes.Clone(v.vectors.Get(k))
		}
		return fn(seq, bytes.Clone(body), vector)
	})
}

// errStop ends a scan early, and is not an error.
var errStop = errors.New("stop")

// scan calls fn with each key of b (nil: none) that starts with prefix,
// from key from on (nil: the first of prefix), and its value, in key
// order.
func scan(b *bbolt.Bucket, prefix, from []byte, fn func(k, v []byte) error) error {
	if b == nil {
		return nil
	}
	if from == nil {
		from = prefix
	}
	c := b.Cursor()
	k, val := c.First()
	if len(from) > 0 {
		k, val = c.Seek(from)
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, val = c.Next() {
		if err := fn(k, val); err != nil {
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
	}
	return nil
}
