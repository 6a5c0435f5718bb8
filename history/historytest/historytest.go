// Package historytest is the store contract's test suite: what every
// backend of history.Store must do, the same way, checked by running Run
// from the backend's own tests with a Backend that opens its stores. It
// also holds fixtures for a backend's tests of its own.
package historytest

import (
	"fmt"
	"testing"
	"time"

	"koe/history"
)

// Backend is what the suite needs of a backend besides its stores: a way
// to open one, and to look at what it holds below its methods.
type Backend struct {
	// Open returns a fresh, empty store whose clock (ids and timestamps)
	// is now (nil: time.Now), closed when t ends.
	Open func(t testing.TB, now func() time.Time) history.Store
	// Second returns another store on the database s is on, as a second
	// koe instance opens it (its own connections, say). nil: the backend
	// allows one store per database, and s stands for both.
	Second func(t testing.TB, s history.Store, now func() time.Time) history.Store
	// Dump renders everything the store holds, so that a test can tell
	// that a call changed nothing.
	Dump func(t testing.TB, s history.Store) string
	// Records returns a history's records as stored: each one's sequence
	// number and JSON, in order.
	Records func(t testing.TB, s history.Store, conf, uid string) []Stored
	// RecallRows counts what the store keeps of a history's recall, read
	// below its methods (an orphan vector is invisible to ForEachRecall):
	// what is "entries", "vectors", "forgotten" or "marks".
	RecallRows func(t testing.TB, s history.Store, conf, what, uid string) int
	// Check verifies the database's own consistency (nil: nothing to
	// check beyond what the database enforces itself).
	Check func(t testing.TB, s history.Store)
}

// Stored is a record as a backend keeps it.
type Stored struct {
	Seq  uint64
	Body []byte
}

// contract is every test of the suite, by name.
var contract = []struct {
	name string
	test func(t *testing.T, be Backend)
}{
	{"CancelledContext", testCancelledContext},
	{"RoundTrip", testRoundTrip},
	{"StoredJSON", testStoredJSON},
	{"ListOrdering", testListOrdering},
	{"ListSkipsTrailingMetadata", testListSkipsTrailingMetadata},
	{"ListUnknownConf", testListUnknownConf},
	{"ListOpening", testListOpening},
	{"Delete", testDelete},
	{"AppendMissing", testAppendMissing},
	{"AppendMissingConcurrentWithValid", testAppendMissingConcurrentWithValid},
	{"InvalidIDs", testInvalidIDs},
	{"InvalidIDMessage", testInvalidIDMessage},
	{"NowOption", testNowOption},
	{"ConcurrentAppends", testConcurrentAppends},
	{"LastSeq", testLastSeq},
	{"SummaryOverwrite", testSummaryOverwrite},
	{"InvalidSummary", testInvalidSummary},
	{"InvalidSummaryMessage", testInvalidSummaryMessage},
	{"MemoryInvalidIDs", testMemoryInvalidIDs},
	{"SummaryMissingHistory", testSummaryMissingHistory},
	{"DeleteRemovesSummaries", testDeleteRemovesSummaries},
	{"MessagesIgnoreSummaries", testMessagesIgnoreSummaries},
	{"Prompts", testPrompts},
	{"PromptTooLong", testPromptTooLong},
	{"ConcurrentSummariesAndAppends", testConcurrentSummariesAndAppends},
	{"ImageErrors", testImageErrors},
	{"BadImageData", testBadImageData},
	{"DeleteRemovesImages", testDeleteRemovesImages},
	{"ConcurrentImageAppends", testConcurrentImageAppends},
	{"Page", testPage},
	{"PageEmptyHistory", testPageEmptyHistory},
	{"PageErrors", testPageErrors},
	{"RecallRoundTrip", testRecallRoundTrip},
	{"SaveRecallMissingHistory", testSaveRecallMissingHistory},
	{"ForgetRecallTombstone", testForgetRecallTombstone},
	{"ForgetRecallMissingHistoryLeavesNoTombstone", testForgetRecallMissingHistoryLeavesNoTombstone},
	{"DeleteDropsRecall", testDeleteDropsRecall},
	{"SetRecallVectorsModel", testSetRecallVectorsModel},
	{"Since", testSince},
	{"RecordMetaRoundTrip", testRecordMetaRoundTrip},
	{"Confs", testConfs},
	{"ForgetRecalls", testForgetRecalls},
	{"SaveRecallMarkMoved", testSaveRecallMarkMoved},
	{"SaveRecallRace", testSaveRecallRace},
	{"RecallSince", testRecallSince},
	{"ForgottenRecalls", testForgottenRecalls},
	{"FillRecallVectors", testFillRecallVectors},
	{"KnowledgeDocRoundTrip", testKnowledgeDocRoundTrip},
	{"KnowledgeDocPagesChecked", testKnowledgeDocPagesChecked},
	{"KnowledgeChunksRoundTripAndOrder", testKnowledgeChunksRoundTripAndOrder},
	{"KnowledgeChunksReplace", testKnowledgeChunksReplace},
	{"KnowledgeChunksRefused", testKnowledgeChunksRefused},
	{"KnowledgeDeleteDoc", testKnowledgeDeleteDoc},
	{"KnowledgeConfs", testKnowledgeConfs},
	{"KnowledgeInvalidIDs", testKnowledgeInvalidIDs},
}

// Run runs the whole contract against be, a subtest per test.
func Run(t *testing.T, be Backend) {
	for _, c := range contract {
		t.Run(c.name, func(t *testing.T) { c.test(t, be) })
	}
}

// check runs the backend's consistency check, if it has one.
func (be Backend) check(t testing.TB, s history.Store) {
	t.Helper()
	if be.Check != nil {
		be.Check(t, s)
	}
}

// second is another store on s's database, or s.
func (be Backend) second(t testing.TB, s history.Store, now func() time.Time) history.Store {
	t.Helper()
	if be.Second == nil {
		return s
	}
	return be.Second(t, s, now)
}

// rawRecords returns a history's stored records as "key json", the key
// being the sequence number as bbolt keys it (8 bytes big-endian, in hex).
func rawRecords(t testing.TB, be Backend, s history.Store, conf, uid string) []string {
	t.Helper()
	var out []string
	for _, r := range be.Records(t, s, conf, uid) {
		out = append(out, fmt.Sprintf("%016x %s", r.Seq, r.Body))
	}
	return out
}

// rawRecord is a stored record's JSON.
func rawRecord(t testing.TB, be Backend, s history.Store, conf, uid string, seq uint64) []byte {
	t.Helper()
	for _, r := range be.Records(t, s, conf, uid) {
		if r.Seq == seq {
			return r.Body
		}
	}
	t.Fatalf("no record %d in history %s of conf %s", seq, uid, conf)
	return nil
}
