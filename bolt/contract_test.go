package bolt

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"koe/history"
	"koe/history/historytest"
)

// The store contract, on a fresh koe.db per test.
func TestContract(t *testing.T) { historytest.Run(t, backend) }

func BenchmarkStoreAppend(b *testing.B) { historytest.BenchAppend(b, backend) }
func BenchmarkStoreLoad1k(b *testing.B) { historytest.BenchLoad1k(b, backend) }
func BenchmarkStoreList(b *testing.B)   { historytest.BenchList(b, backend) }

// backend shows the suite the buckets below the methods. One store per
// file (its lock): Second is nil.
var backend = historytest.Backend{
	Open: func(t testing.TB, now func() time.Time) history.Store {
		s, _ := openTest(t, Options{Now: now})
		return s
	},
	Dump: func(t testing.TB, s history.Store) string { return boltDump(t, s.(*Store)) },
	Records: func(t testing.TB, s history.Store, conf, uid string) []historytest.Stored {
		t.Helper()
		var out []historytest.Stored
		err := s.(*Store).db.View(func(tx *bbolt.Tx) error {
			return messagesBucket(tx, conf, uid).ForEach(func(k, v []byte) error {
				out = append(out, historytest.Stored{Seq: binary.BigEndian.Uint64(k), Body: bytes.Clone(v)})
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	},
	RecallRows: func(t testing.TB, s history.Store, conf, what, uid string) int {
		t.Helper()
		n := 0
		err := s.(*Store).db.View(func(tx *bbolt.Tx) error {
			b := recallSub(tx, conf, []byte(what))
			if b == nil {
				return nil
			}
			return b.ForEach(func(k, _ []byte) error {
				if what == string(bucketMarks) {
					if string(k) == uid {
						n++
					}
					return nil
				}
				if got, _, ok := recallEntries(nil).parse(k); ok && got == uid {
					n++
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	},
	Check: func(t testing.TB, s history.Store) {
		t.Helper()
		if err := s.(*Store).Check(t.Context()); err != nil {
			t.Fatalf("Check: %v", err)
		}
	},
}
