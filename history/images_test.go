package history

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"koe"
)

// picture returns n distinct bytes, so a mix-up between images shows.
func picture(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func mustImage(t *testing.T, s testStore, conf, uid, ref string) (string, []byte) {
	t.Helper()
	ctx := t.Context()
	mime, data, err := s.Image(ctx, conf, uid, ref)
	if err != nil {
		t.Fatalf("Image(%q): %v", ref, err)
	}
	return mime, data
}

// rawValues returns the values of bucket name of a history, keyed by hex key.
func rawValues(t *testing.T, s *Store, conf, uid string, name []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := s.db.View(func(tx *bolt.Tx) error {
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
	s, _ := openTest(t, Options{Now: stepClock(t0)})
	png, jpeg, gif := picture(1, 3000), picture(2, 5001), picture(3, 7)
	uid := koe.NewHistoryUID(t0)
	// The first message creates the history, as a conversation's does.
	err := s.CreateWith(ctx, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "look", Images: []koe.Image{{Source: "camera", MimeType: "image/png", Data: b64(png)}}})
	if err != nil {
		t.Fatalf("CreateWith: %v", err)
	}
	mustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleAI, Content: "a cat"})
	mustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "and these?", Images: []koe.Image{
		{Source: "screen", MimeType: "image/jpeg", Data: b64(jpeg), Ref: "ignored", Size: 99},
		{Source: "upload", MimeType: "image/gif", Data: "data:image/gif;base64," + b64(gif)},
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
		mime, data := mustImage(t, s, "c", uid, ref)
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
	s, _ := openTest(t, Options{Now: stepClock(t0)})
	uid := mustCreate(t, s, "c")
	jpeg, png := picture(9, 4096), picture(4, 10)
	// Some encoders escape "/", which base64 contains.
	escaped := strings.ReplaceAll(b64(png), "/", `\/`)
	legacy := []string{
		`{"role":"human","timestamp":"2024-05-06T07:08:09","content":"old","name":"Human","images":[{"source":"camera","mime_type":"image/jpeg","data":"` + b64(jpeg) + `"},{"source":"upload","mime_type":"image/png","data":"` + escaped + `"}]}`,
		`{"role":"human","timestamp":"2024-05-06T07:08:10","content":"url","images":[{"source":"clipboard","mime_type":"","data":"data:image/png;base64,` + b64(png) + `"}]}`,
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
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
	before := dump(t, s)

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
		mime, data := mustImage(t, s, "c", uid, ref)
		if mime != w.mime || !bytes.Equal(data, w.data) {
			t.Errorf("Image(%s) = %s, %d bytes; want %s, %d bytes", ref, mime, len(data), w.mime, len(w.data))
		}
	}
	if after := dump(t, s); after != before {
		t.Fatal("reading a legacy history changed the database")
	}

	// New messages in an old history go to the images bucket.
	mustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleHuman, Images: []koe.Image{{Source: "camera", MimeType: "image/png", Data: b64(png)}}})
	if _, data := mustImage(t, s, "c", uid, "4-0"); !bytes.Equal(data, png) {
		t.Fatalf("new image in legacy history = %d bytes", len(data))
	}
	if _, data := mustImage(t, s, "c", uid, "2-0"); !bytes.Equal(data, jpeg) {
		t.Fatalf("legacy image after a new append = %d bytes", len(data))
	}
}

func TestImageErrors(t *testing.T) { eachBackend(t, testImageErrors) }

func testImageErrors(t *testing.T, open opener) {
	ctx := t.Context()
	s := open(t, Options{})
	uid := mustCreate(t, s, "c")
	mustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "pic", Images: []koe.Image{{Source: "camera", MimeType: "image/png", Data: b64(picture(1, 5))}}})
	mustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleAI, Content: "text only"})
	if _, data := mustImage(t, s, "c", uid, "2-0"); len(data) != 5 {
		t.Fatalf("Image(2-0) = %d bytes, want 5", len(data))
	}

	notFound := []struct{ conf, uid, ref string }{
		{"c", uid, "2-1"},                    // index past the record's images
		{"c", uid, "3-0"},                    // record without images
		{"c", uid, "1-0"},                    // metadata
		{"c", uid, "4-0"},                    // no such record
		{"c", uid, "18446744073709551615-0"}, // largest sequence
		{"c", "other", "2-0"},                // no such history
		{"d", uid, "2-0"},                    // no such conf
	}
	for _, c := range notFound {
		if _, _, err := s.Image(ctx, c.conf, c.uid, c.ref); !errors.Is(err, koe.ErrNotFound) {
			t.Errorf("Image(%q, %q, %q): err = %v, want ErrNotFound", c.conf, c.uid, c.ref, err)
		}
	}

	garbage := []string{"", "2", "2-", "-0", "2-0-0", "02-0", "2-00", "0-0", "+2-0", "2-+0", " 2-0", "2-0 ", "2_0",
		"a-b", "2-x", "18446744073709551616-0", "2-4294967296", "١-0", strings.Repeat("9", 40) + "-0", "2-0\x00"}
	for _, ref := range garbage {
		_, _, err := s.Image(ctx, "c", uid, ref)
		if !errors.Is(err, koe.ErrInvalidID) {
			t.Errorf("Image(ref %q): err = %v, want ErrInvalidID", ref, err)
		}
	}
	if _, _, err := s.Image(ctx, "../c", uid, "2-0"); !errors.Is(err, koe.ErrInvalidID) {
		t.Errorf("Image(bad conf): err = %v, want ErrInvalidID", err)
	}
	if _, _, err := s.Image(ctx, "c", "a/b", "2-0"); !errors.Is(err, koe.ErrInvalidID) {
		t.Errorf("Image(bad history): err = %v, want ErrInvalidID", err)
	}
	long := strings.Repeat("7", 100)
	if _, _, err := s.Image(ctx, "c", uid, long); err == nil || strings.Contains(err.Error(), long) {
		t.Errorf("Image(long ref): err = %v, want it to quote the ref shortened", err)
	}
}

// An image that cannot be stored refuses the whole record, and nothing is
// written: not the record, not the other images, not a new history.
func TestBadImageData(t *testing.T) { eachBackend(t, testBadImageData) }

func testBadImageData(t *testing.T, open opener) {
	ctx := t.Context()
	s := open(t, Options{})
	uid := mustCreate(t, s, "c")
	good := koe.Image{Source: "camera", MimeType: "image/png", Data: b64(picture(1, 50))}
	before := dump(t, s)
	bad := map[string]string{
		"empty":             "",
		"not base64":        "not base64!",
		"data URL no b64":   "data:image/png," + b64(picture(1, 3)),
		"data URL no comma": "data:image/png;base64",
		"empty data URL":    "data:image/png;base64,",
		"truncated":         b64(picture(1, 50))[:10] + "=",
	}
	for name, data := range bad {
		r := koe.Record{Role: koe.RoleHuman, Content: name, Images: []koe.Image{good, {Source: "camera", MimeType: "image/png", Data: data}}}
		err := s.Append(ctx, "c", uid, r)
		if !errors.Is(err, koe.ErrInvalidRecord) || !strings.Contains(err.Error(), "image 2") {
			t.Errorf("Append(%s): err = %v, want ErrInvalidRecord naming image 2", name, err)
		}
		err = s.CreateWith(ctx, "c", koe.NewHistoryUID(t0), r)
		if !errors.Is(err, koe.ErrInvalidRecord) {
			t.Errorf("CreateWith(%s): err = %v, want ErrInvalidRecord", name, err)
		}
	}
	if after := dump(t, s); after != before {
		t.Fatalf("refused images changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestDeleteRemovesImages(t *testing.T) { eachBackend(t, testDeleteRemovesImages) }

func testDeleteRemovesImages(t *testing.T, open opener) {
	ctx := t.Context()
	s := open(t, Options{})
	keep, gone := mustCreate(t, s, "c"), mustCreate(t, s, "c")
	img := []koe.Image{{Source: "camera", MimeType: "image/png", Data: b64(picture(1, 20000))}}
	mustAppend(t, s, "c", keep, koe.Record{Role: koe.RoleHuman, Images: img})
	mustAppend(t, s, "c", gone, koe.Record{Role: koe.RoleHuman, Images: img})
	if err := s.Delete(ctx, "c", gone); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Image(ctx, "c", gone, "2-0"); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("Image of deleted history: err = %v, want ErrNotFound", err)
	}
	if strings.Contains(dump(t, s), gone) {
		t.Fatal("deleted history left data behind")
	}
	if _, data := mustImage(t, s, "c", keep, "2-0"); len(data) != 20000 {
		t.Fatalf("other history's image = %d bytes", len(data))
	}
	checkConsistent(t, s)
}

// Appends with images are batched like any other; a failing one in the
// batch must not lose or misplace another's images.
func TestConcurrentImageAppends(t *testing.T) { eachBackend(t, testConcurrentImageAppends) }

func testConcurrentImageAppends(t *testing.T, open opener) {
	ctx := t.Context()
	s := open(t, Options{})
	const n = 20
	uids := make([]string, n)
	for i := range uids {
		uids[i] = mustCreate(t, s, "c")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				img := koe.Image{Source: "camera", MimeType: "image/png", Data: b64(picture(byte(i*3+j), 1000+i))}
				if err := s.Append(ctx, "c", uids[i], koe.Record{Role: koe.RoleHuman, Content: fmt.Sprint(j), Images: []koe.Image{img}}); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			err := s.Append(ctx, "c", "missing", koe.Record{Role: koe.RoleHuman, Images: []koe.Image{{MimeType: "image/png", Data: b64(picture(0, 10))}}})
			if !errors.Is(err, koe.ErrNotFound) {
				errs <- fmt.Errorf("append to missing history: %v", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, uid := range uids {
		for j := 0; j < 3; j++ {
			ref := fmt.Sprintf("%d-0", j+2)
			if _, data := mustImage(t, s, "c", uid, ref); !bytes.Equal(data, picture(byte(i*3+j), 1000+i)) {
				t.Fatalf("history %d image %s: wrong bytes", i, ref)
			}
		}
	}
	checkConsistent(t, s)
}
