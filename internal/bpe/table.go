package bpe

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"math"
	"strconv"
)

// Table maps a token's bytes to its rank (its id). It holds no pointers but
// its three slice headers: the garbage collector never looks inside it,
// where a map[string]int of 200,000 tokens costs it 200,000 string headers
// to scan at every cycle, and the process about four times the memory.
type Table struct {
	// arena holds every token's bytes, in rank order.
	arena []byte
	// off[r]..off[r+1] are rank r's bytes in arena; a rank with no token
	// (p50k_base skips 50256, its <|endoftext|>) is empty, and no piece is.
	off []uint32
	// slots is an open-addressing index with linear probing, at most half
	// full. A slot holds rank+1 in its low rankBits bits (0: empty) and,
	// above them, the top bits of the token's hash: a probe that meets
	// another token is nearly always told apart there, without reading
	// that token's offsets and bytes (two more cache misses).
	slots    []uint32
	mask     uint64
	rankBits uint
	seed     maphash.Seed
}

// noRank is what Rank returns for bytes that are no token.
const noRank = math.MaxUint32

// Rank returns the rank of the token whose bytes are s, or noRank.
func (t *Table) Rank(s string) uint32 {
	h := maphash.String(t.seed, s)
	tag := t.tag(h)
	rankMask := uint32(1)<<t.rankBits - 1
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		v := t.slots[i]
		if v == 0 {
			return noRank
		}
		if v&^rankMask != tag {
			continue
		}
		r := v&rankMask - 1
		a, b := t.off[r], t.off[r+1]
		if int(b-a) == len(s) && string(t.arena[a:b]) == s {
			return r
		}
	}
}

// tag is the part of a slot that holds hash h's top bits.
func (t *Table) tag(h uint64) uint32 {
	if t.rankBits >= 32 {
		return 0
	}
	return uint32(h>>(32+t.rankBits)) << t.rankBits
}

// Len returns the number of tokens in t.
func (t *Table) Len() int {
	n := 0
	for r := range len(t.off) - 1 {
		if t.off[r+1] > t.off[r] {
			n++
		}
	}
	return n
}

// Token returns the bytes of rank r ("" if r is no token's rank).
func (t *Table) Token(r uint32) string {
	if int(r)+1 >= len(t.off) {
		return ""
	}
	return string(t.arena[t.off[r]:t.off[r+1]])
}

// Bytes returns the memory t keeps: arena, offsets and index.
func (t *Table) Bytes() int {
	return cap(t.arena) + 4*cap(t.off) + 4*cap(t.slots)
}

// ReadTable builds a Table from a tiktoken ranks file in fsys: one token a
// line, its bytes in standard base64, a space, its rank; ranks increasing.
// It reads the file twice, first to size the arrays exactly (growing them
// would leave their earlier copies behind as garbage), never holding more
// of it than a line at a time.
func ReadTable(fsys fs.FS, name string) (*Table, error) {
	var tokens, bytesTotal int
	maxRank := -1
	err := scanRanks(fsys, name, func(_ []byte, n int, rank int) error {
		if rank <= maxRank {
			return fmt.Errorf("bpe: %s: rank %d out of order, after %d", name, rank, maxRank)
		}
		tokens++
		bytesTotal += n
		maxRank = rank
		return nil
	})
	if err != nil {
		return nil, err
	}
	if tokens == 0 {
		return nil, fmt.Errorf("bpe: %s holds no token", name)
	}
	if bytesTotal > math.MaxUint32 || maxRank >= math.MaxUint32/2 {
		return nil, fmt.Errorf("bpe: %s is too large for a table (%d bytes, rank %d)", name, bytesTotal, maxRank)
	}

	size := 1
	for size < 2*tokens {
		size *= 2
	}
	rankBits := uint(1)
	for 1<<rankBits < maxRank+2 { // rank+1 fits
		rankBits++
	}
	t := &Table{
		arena:    make([]byte, 0, bytesTotal),
		off:      make([]uint32, maxRank+2),
		slots:    make([]uint32, size),
		mask:     uint64(size - 1),
		rankBits: rankBits,
		seed:     maphash.MakeSeed(),
	}
	rankMask := uint32(1)<<rankBits - 1
	next := 0 // the next rank to fill in off
	err = scanRanks(fsys, name, func(token []byte, _ int, rank int) error {
		if rank < next || rank > maxRank { // the file changed between the passes
			return fmt.Errorf("bpe: %s: rank %d out of order", name, rank)
		}
		if len(token) == 0 {
			return fmt.Errorf("bpe: %s: rank %d has no bytes", name, rank)
		}
		for ; next <= rank; next++ {
			t.off[next] = uint32(len(t.arena))
		}
		h := maphash.Bytes(t.seed, token)
		tag := t.tag(h)
		i := h & t.mask
		for ; t.slots[i] != 0; i = (i + 1) & t.mask {
			if v := t.slots[i]; v&^rankMask == tag {
				if r := v&rankMask - 1; bytes.Equal(t.arena[t.off[r]:t.off[r+1]], token) {
					return fmt.Errorf("bpe: %s: rank %d repeats the bytes of rank %d", name, rank, r)
				}
			}
		}
		t.slots[i] = tag | (uint32(rank) + 1)
		t.arena = append(t.arena, token...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.off[maxRank+1] = uint32(len(t.arena))
	return t, nil
}

// scanRanks calls f with each line's token bytes (valid until the next
// call), their length and the rank.
func scanRanks(fsys fs.FS, name string, f func(token []byte, n int, rank int) error) error {
	file, err := fsys.Open(name)
	if err != nil {
		return fmt.Errorf("bpe: %w", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	var token []byte
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if len(text) == 0 {
			continue
		}
		enc, num, ok := bytes.Cut(text, []byte{' '})
		if !ok {
			return fmt.Errorf("bpe: %s line %d: no rank", name, line)
		}
		rank, err := strconv.Atoi(string(num))
		if err != nil || rank < 0 {
			return fmt.Errorf("bpe: %s line %d: rank %q is not a number", name, line, num)
		}
		token = token[:0]
		token, err = base64.StdEncoding.AppendDecode(token, enc)
		if err != nil {
			return fmt.Errorf("bpe: %s line %d: %w", name, line, err)
		}
		if err := f(token, len(token), rank); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && err != io.EOF {
		return fmt.Errorf("bpe: reading %s: %w", name, err)
	}
	return nil
}
