package bolt

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"koe"
	"koe/history/historytest"
)

// rawValues returns the values of bucket name of a history, keyed by hex key.
func rawValues(t *testing.T, s *Store, conf, uid string, name []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketHistories).Bucket([]byte(conf)).Bucket([]byte(uid)).Bucket(name)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			out[fmt.Sprintf("%x", k)] = append([]byte(nil), v...)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImagesStoredApart(t *testing.T) {
	ctx := t.Context()
	s, _ := openTest(t, Options{Now: historytest.StepClock(historytest.T0)})
	png, jpeg, gif := historytest.Picture(1, 3000), historytest.Picture(2, 5001), historytest.Picture(3, 7)
	uid := koe.NewHistoryUID(historytest.T0)
	// The first message creates the history, as a conversation's does.
	err := s.CreateWith(ctx, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "look", Images: []koe.Image{{Source: "camera", MimeType: "image/png", Data: historytest.Base64(png)}}})
	if err != nil {
		t.Fatalf("CreateWith: %v", err)
	}
	historytest.MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleAI, Content: "a cat"})
	historytest.MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "and these?", Images: []koe.Image{
		{Source: "screen", MimeType: "image/jpeg", Data: historytest.Base64(jpeg), Ref: "ignored", Size: 99},
		{Source: "upload", MimeType: "image/gif", Data: "data:image/gif;base64," + historytest.Base64(gif)},
	}})

	want := []koe.Record{
		{Seq: 1, Role: koe.RoleMetadata, Timestamp: "2025-03-04T05:06:07"},
		{Seq: 2, Role: koe.RoleHuman, Timestamp: "2025-03-04T05:06:07", Content: "look", Images: []koe.Image{{Source: "camera", MimeType: "image/png", Size: 3000, Ref: "2-0"}}},
		{Seq: 3, Role: koe.RoleAI, Timestamp: "2025-03-04T05:06:08", Content: "a cat"},
		{Seq: 4, Role: koe.RoleHuman, Timestamp: "2025-03-04T05:06:09", Content: "and these?", Images: []koe.Image{
			{Source: "screen", MimeType: "image/jpeg", Size: 5001, Ref: "4-0"},
			{Source: "upload", MimeType: "image/gif", Size: 7, Ref: "4-1"},
		}},
	}
	got, err := s.Messages(ctx, "c", uid)
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Messages:\n got %+v\nwant %+v", got, want)
	}
	page, more, err := s.Page(ctx, "c", uid, 0, 10)
	if err != nil || more || !reflect.DeepEqual(page, want[1:]) {
		t.Fatalf("Page = %+v, %v, %v; want %+v", page, more, err, want[1:])
	}
	list, err := s.List(ctx, "c")
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0].LatestMessage, want[3]) {
		t.Fatalf("List = %+v, %v; want latest %+v", list, err, want[3])
	}

	// The record keeps OLV's fields and a description of each image; the
	// bytes sit raw in the images bucket.
	recs := rawValues(t, s, "c", uid, bucketMessages)
	if got, want := string(recs["0000000000000004"]), `{"role":"human","timestamp":"2025-03-04T05:06:09","content":"and these?","images":[{"source":"screen","mime_type":"image/jpeg","size":5001},{"source":"upload","mime_type":"image/gif","size":7}]}`; got != want {
		t.Fatalf("stored record:\n got %s\nwant %s", got, want)
	}
	imgs := rawValues(t, s, "c", uid, bucketImages)
	wantImgs := map[string][]byte{"000000000000000200000000": png, "000000000000000400000000": jpeg, "000000000000000400000001": gif}
	if !reflect.DeepEqual(imgs, wantImgs) {
		t.Fatalf("images bucket has keys %v, want %v", keys(imgs), keys(wantImgs))
	}

	for ref, w := range map[string]struct {
		mime string
		data []byte
	}{"2-0": {"image/png", png}, "4-0": {"image/jpeg", jpeg}, "4-1": {"image/gif", gif}} {
		mime, data := historytest.MustImage(t, s, "c", uid, ref)
		if mime != w.mime || !bytes.Equal(data, w.data) {
			t.Errorf("Image(%s) = %s, %d bytes; want %s, %d bytes", ref, mime, len(data), w.mime, len(w.data))
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Histories written before images were kept apart hold base64 in the
// record. They read like new ones, are served by ref, and stay as they are.
func TestLegacyInlineImages(t *testing.T) {
	ctx := t.Context()
	s, _ := openTest(t, Options{Now: historytest.StepClock(historytest.T0)})
	uid := historytest.MustCreate(t, s, "c")
	jpeg, png := historytest.Picture(9, 4096), historytest.Picture(4, 10)
	// Some encoders escape "/", which base64 contains.
	escaped := strings.ReplaceAll(historytest.Base64(png), "/", `\/`)
	legacy := []string{
		`{"role":"human","timestamp":"2024-05-06T07:08:09","content":"old","name":"Human","images":[{"source":"camera","mime_type":"image/jpeg","data":"` + historytest.Base64(jpeg) + `"},{"source":"upload","mime_type":"image/png","data":"` + escaped + `"}]}`,
		`{"role":"human","timestamp":"2024-05-06T07:08:10","content":"url","images":[{"source":"clipboard","mime_type":"","data":"data:image/png;base64,` + historytest.Base64(png) + `"}]}`,
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		for _, v := range legacy {
			if err := putRawRecord(messagesBucket(tx, "c", uid), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	before := boltDump(t, s)

	want := []koe.Record{
		{Seq: 2, Role: koe.RoleHuman, Timestamp: "2024-05-06T07:08:09", Content: "old", Name: "Human", Images: []koe.Image{
			{Source: "camera", MimeType: "image/jpeg", Size: len(jpeg), Ref: "2-0"},
			{Source: "upload", MimeType: "image/png", Size: len(png), Ref: "2-1"},
		}},
		{Seq: 3, Role: koe.RoleHuman, Timestamp: "2024-05-06T07:08:10", Content: "url", Images: []koe.Image{
			{Source: "clipboard", Size: len(png), Ref: "3-0"},
		}},
	}
	got, err := s.Messages(ctx, "c", uid)
	if err != nil || len(got) != 3 || !reflect.DeepEqual(got[1:], want) {
		t.Fatalf("Messages = %+v, %v; want metadata then %+v", got, err, want)
	}
	page, _, err := s.Page(ctx, "c", uid, 0, 1)
	if err != nil || !reflect.DeepEqual(page, want[1:]) {
		t.Fatalf("Page = %+v, %v; want %+v", page, err, want[1:])
	}
	list, err := s.List(ctx, "c")
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0].LatestMessage, want[1]) {
		t.Fatalf("List = %+v, %v", list, err)
	}
	for ref, w := range map[string]struct {
		mime string
		data []byte
	}{"2-0": {"image/jpeg", jpeg}, "2-1": {"image/png", png}, "3-0": {"image/png", png}} {
		mime, data := historytest.MustImage(t, s, "c", uid, ref)
		if mime != w.mime || !bytes.Equal(data, w.data) {
			t.Errorf("Image(%s) = %s, %d bytes; want %s, %d bytes", ref, mime, len(data), w.mime, len(w.data))
		}
	}
	if after := boltDump(t, s); after != before {
		t.Fatal("reading a legacy history changed the database")
	}

	// New messages in an old history go to the images bucket.
	historytest.MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleHuman, Images: []koe.Image{{Source: "camera", MimeType: "image/png", Data: historytest.Base64(png)}}})
	if _, data := historytest.MustImage(t, s, "c", uid, "4-0"); !bytes.Equal(data, png) {
		t.Fatalf("new image in legacy history = %d bytes", len(data))
	}
	if _, data := historytest.MustImage(t, s, "c", uid, "2-0"); !bytes.Equal(data, jpeg) {
		t.Fatalf("legacy image after a new append = %d bytes", len(data))
	}
}
