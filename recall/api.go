package recall

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"koe"
)

// What the memories API needs of a character's index besides recalling:
// listing it, and forgetting a conversation or everything.

// ErrCursor means a listing cursor is not one a listing gave.
var ErrCursor = errors.New("not a cursor of a memories listing")

// Page is a character's memories, newest first, as the API lists them.
type Page struct {
	Stats    Stats    `json:"stats"`
	Memories []Memory `json:"memories"`
	// Next, when set, lists the older memories that follow (the before
	// of the next call).
	Next string `json:"next,omitempty"`
}

// Newest lists up to limit of a character's memories said before the
// cursor before ("" = the newest), newest first. A listed Memory's Time is
// when it was said, and its Rank 0.
func (s *Service) Newest(ctx context.Context, confUID, before string, limit int) (Page, error) {
	var after *listKey
	if before != "" {
		k, err := parseCursor(before)
		if err != nil {
			return Page{}, err
		}
		after = &k
	}
	if limit < 1 {
		return Page{}, fmt.Errorf("list memories: limit %d, want at least 1", limit)
	}
	stats, err := s.Stats(ctx, confUID)
	if err != nil {
		return Page{}, err
	}
	c, err := s.character(ctx, confUID)
	if err != nil {
		return Page{}, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	// The newest limit+1 (one more tells whether a next page exists) in a
	// heap whose top is the oldest kept: one pass, however many memories.
	top := &newestHeap{c: c}
	for i := range c.entries {
		e := &c.entries[i]
		if e.dead || after != nil && !after.newer(keyOf(e)) {
			continue
		}
		heap.Push(top, i)
		if top.Len() > limit+1 {
			heap.Pop(top)
		}
	}
	ids := make([]int, top.Len())
	for i := len(ids) - 1; i >= 0; i-- {
		ids[i] = heap.Pop(top).(int)
	}
	p := Page{Stats: stats, Memories: []Memory{}}
	if len(ids) > limit {
		ids = ids[:limit]
		p.Next = keyOf(&c.entries[ids[limit-1]]).String()
	}
	for _, id := range ids {
		e := &c.entries[id]
		role := "ai"
		if e.human {
			role = "human"
		}
		p.Memories = append(p.Memories, Memory{
			HistoryUID: e.history, Seq: e.seq, Turn: e.turn, Role: role, Name: e.name,
			Time: e.time, Text: e.text, Meta: e.meta,
		})
	}
	return p, nil
}

// listKey orders a listing: newest said first, then by history and
// sequence, so that messages of the same second keep one order.
type listKey struct {
	unix    int64
	history string
	seq     uint64
}

func keyOf(e *entry) listKey { return listKey{e.time.Unix(), e.history, e.seq} }

// newer reports whether k comes before o in a listing.
func (k listKey) newer(o listKey) bool {
	if k.unix != o.unix {
		return k.unix > o.unix
	}
	if k.history != o.history {
		return k.history > o.history
	}
	return k.seq > o.seq
}

// String is the key as a cursor: the history uid goes last, as the one
// part that may hold the separator.
func (k listKey) String() string {
	return strconv.FormatInt(k.unix, 10) + "." + strconv.FormatUint(k.seq, 10) + "." + k.history
}

func parseCursor(s string) (listKey, error) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) != 3 || !koe.ValidID(parts[2]) {
		return listKey{}, ErrCursor
	}
	unix, err1 := strconv.ParseInt(parts[0], 10, 64)
	seq, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return listKey{}, ErrCursor
	}
	return listKey{unix, parts[2], seq}, nil
}

// newestHeap holds entry ids with the oldest on top.
type newestHeap struct {
	c   *character
	ids []int
}

func (h *newestHeap) Len() int { return len(h.ids) }
func (h *newestHeap) Less(i, j int) bool {
	return keyOf(&h.c.entries[h.ids[j]]).newer(keyOf(&h.c.entries[h.ids[i]]))
}
func (h *newestHeap) Swap(i, j int) { h.ids[i], h.ids[j] = h.ids[j], h.ids[i] }
func (h *newestHeap) Push(x any)    { h.ids = append(h.ids, x.(int)) }
func (h *newestHeap) Pop() any {
	x := h.ids[len(h.ids)-1]
	h.ids = h.ids[:len(h.ids)-1]
	return x
}

// ForgetConversation forgets for good every memory of what has been said
// in one history so far, messages not indexed yet included; the history
// itself stays, and what is said in it later is remembered. It reports
// how many indexed memories went.
func (s *Service) ForgetConversation(ctx context.Context, confUID, historyUID string) (int, error) {
	c, err := s.character(ctx, confUID)
	if err != nil {
		return 0, err
	}
	n, seqs, err := s.forgetStored(ctx, confUID, historyUID)
	if rerr := s.outlastIndexer(ctx, func() { c.removeAll(historyUID, seqs) }); err == nil {
		err = rerr
	}
	s.tell(newsForgot, confUID, historyUID)
	return n, err
}

// forgetStored forgets in the store every message of a history that the
// indexer would keep, and returns how many were indexed and the sequence
// numbers of them all. It reads the history's records, not the index:
// what the indexer has not reached yet must not be indexed after this.
func (s *Service) forgetStored(ctx context.Context, confUID, historyUID string) (int, []uint64, error) {
	var all []uint64
	forgotten := 0
	var after uint64
	for {
		recs, err := s.opts.Store.Since(ctx, confUID, historyUID, after, readBatch)
		if err != nil {
			return forgotten, all, fmt.Errorf("forget the memories of history %q: %w", historyUID, err)
		}
		var seqs []uint64
		for _, r := range recs {
			after = r.Seq
			if _, ok := entryOf(r, 0); ok {
				seqs = append(seqs, r.Seq)
			}
		}
		n, err := s.forgetSeqs(ctx, confUID, historyUID, seqs)
		forgotten += n
		if err != nil {
			return forgotten, all, err
		}
		all = append(all, seqs...)
		if len(recs) < readBatch {
			return forgotten, all, nil
		}
		if err := ctx.Err(); err != nil {
			return forgotten, all, err
		}
	}
}

// removeAll drops entries of one history from the index, and reports
// how many it held.
func (c *character) removeAll(historyUID string, seqs []uint64) int {
	n := 0
	for _, seq := range seqs {
		if c.remove(historyUID, seq) {
			n++
		}
	}
	return n
}

// outlastIndexer removes from the index (remove) what was just forgotten
// in the store, once no indexing job that began before can still add it
// back: a job that stored entries just before they were forgotten adds
// them to the index after. A job that starts later finds them forgotten
// in the store. When a job is running, it waits for the indexer to
// settle.
func (s *Service) outlastIndexer(ctx context.Context, remove func()) error {
	s.mu.Lock()
	busy := s.working
	s.mu.Unlock()
	var err error
	if busy {
		err = s.Settle(ctx)
	}
	remove()
	return err
}

func (s *Service) forgetSeqs(ctx context.Context, confUID, historyUID string, seqs []uint64) (int, error) {
	return s.opts.Store.ForgetRecalls(ctx, confUID, historyUID, seqs)
}

// ForgetEverything forgets for good every memory of a character, as
// ForgetConversation does for each of its histories.
func (s *Service) ForgetEverything(ctx context.Context, confUID string) (int, error) {
	c, err := s.character(ctx, confUID)
	if err != nil {
		return 0, err
	}
	list, err := s.opts.Store.List(ctx, confUID)
	if err != nil {
		return 0, fmt.Errorf("forget the memories of %q: %w", confUID, err)
	}
	uids := map[string]bool{}
	for _, h := range list {
		uids[h.UID] = true
	}
	// The index may hold a history the listing skips (one emptied since).
	c.mu.RLock()
	for uid := range c.byHistory {
		uids[uid] = true
	}
	c.mu.RUnlock()
	forgotten := 0
	done := map[string][]uint64{}
	for uid := range uids {
		n, seqs, ferr := s.forgetStored(ctx, confUID, uid)
		forgotten += n
		done[uid] = seqs
		if ferr != nil && !errors.Is(ferr, koe.ErrNotFound) { // deleted meanwhile: its memories went with it
			err = ferr
			break
		}
	}
	rerr := s.outlastIndexer(ctx, func() {
		for uid, seqs := range done {
			c.removeAll(uid, seqs)
		}
	})
	if err == nil {
		err = rerr
	}
	s.tell(newsForgot, confUID, "")
	return forgotten, err
}
