package bolt

import (
	"context"
	"fmt"

	"go.etcd.io/bbolt"

	"koe/history"
)

// ForgetRecalls forgets many entries of one history for good, in one
// transaction, as ForgetRecall forgets one: forgetting a whole
// conversation one transaction per message would wait for the disk
// thousands of times. It reports how many of the entries existed.
func (s *Store) ForgetRecalls(ctx context.Context, confUID, historyUID string, seqs []uint64) (int, error) {
	if err := history.CheckHistory(ctx, confUID, historyUID); err != nil {
		return 0, err
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	var existed int
	err := s.write(func(tx *bbolt.Tx) error {
		existed = 0 // a batched transaction may run again
		if historyBucket(tx, confUID, historyUID) == nil {
			return nil // nothing to forget, and no tombstones to leak
		}
		conf, err := recallConf(tx, confUID)
		if err != nil {
			return err
		}
		ents, forgotten := recallEntries(conf), conf.Bucket(bucketForgotten)
		for _, seq := range seqs {
			k := ents.key(historyUID, seq)
			had, err := ents.remove(k)
			if err != nil {
				return err
			}
			if had {
				existed++
			}
			if err := forgotten.Put(k, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("forget %d recall entries of history %q of conf %q: %w", len(seqs), historyUID, confUID, err)
	}
	return existed, nil
}
