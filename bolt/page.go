package bolt

import (
	"context"
	"fmt"

	"go.etcd.io/bbolt"

	"koe"
	"koe/history"
)

// Page returns up to limit records of a history that are older than the
// record with sequence number before (0: the newest records), oldest first,
// and whether older ones remain. Metadata records are skipped and do not
// count: a page is what a client shows or an agent remembers. A before
// past the end reads from the end.
//
// Pages are read backwards with a cursor, so a page costs the same at the
// start of a long history as at its end. To walk back through a history,
// pass the Seq of the first record of a page as before for the next.
func (s *Store) Page(ctx context.Context, confUID, historyUID string, before uint64, limit int) (records []koe.Record, more bool, err error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return nil, false, err
	}
	if err := koe.CheckPageLimit(limit); err != nil {
		return nil, false, fmt.Errorf("page of history %q of conf %q: %w", historyUID, confUID, err)
	}
	records = []koe.Record{}
	err = s.db.View(func(tx *bbolt.Tx) error {
		msgs := messagesBucket(tx, confUID, historyUID)
		if msgs == nil {
			return koe.ErrNotFound
		}
		c := msgs.Cursor()
		k, v := c.Last()
		if before != 0 {
			key := seqKey(before)
			// Seek lands on the first key at or after before; the page
			// starts just below it. Nothing at or after it: start at the end.
			if k, _ = c.Seek(key[:]); k != nil {
				k, v = c.Prev()
			} else {
				k, v = c.Last()
			}
		}
		for ; k != nil; k, v = c.Prev() {
			r, err := decodeRecord(k, v)
			if err != nil {
				return err
			}
			if r.Role == koe.RoleMetadata {
				continue
			}
			if len(records) == limit {
				more = true
				return nil
			}
			records = append(records, r)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("read page of history %q of conf %q: %w", historyUID, confUID, err)
	}
	for i, j := 0, len(records)-1; i < j; i, j = i+1, j-1 {
		records[i], records[j] = records[j], records[i]
	}
	return records, more, nil
}
