package historytest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"koe"
)

func testImageErrors(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	uid := MustCreate(t, s, "c")
	MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "pic", Images: []koe.Image{{Source: "camera", MimeType: "image/png", Data: Base64(Picture(1, 5))}}})
	MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleAI, Content: "text only"})
	if _, data := MustImage(t, s, "c", uid, "2-0"); len(data) != 5 {
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
func testBadImageData(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	uid := MustCreate(t, s, "c")
	good := koe.Image{Source: "camera", MimeType: "image/png", Data: Base64(Picture(1, 50))}
	before := be.Dump(t, s)
	bad := map[string]string{
		"empty":             "",
		"not base64":        "not base64!",
		"data URL no b64":   "data:image/png," + Base64(Picture(1, 3)),
		"data URL no comma": "data:image/png;base64",
		"empty data URL":    "data:image/png;base64,",
		"truncated":         Base64(Picture(1, 50))[:10] + "=",
	}
	for name, data := range bad {
		r := koe.Record{Role: koe.RoleHuman, Content: name, Images: []koe.Image{good, {Source: "camera", MimeType: "image/png", Data: data}}}
		err := s.Append(ctx, "c", uid, r)
		if !errors.Is(err, koe.ErrInvalidRecord) || !strings.Contains(err.Error(), "image 2") {
			t.Errorf("Append(%s): err = %v, want ErrInvalidRecord naming image 2", name, err)
		}
		err = s.CreateWith(ctx, "c", koe.NewHistoryUID(T0), r)
		if !errors.Is(err, koe.ErrInvalidRecord) {
			t.Errorf("CreateWith(%s): err = %v, want ErrInvalidRecord", name, err)
		}
	}
	if after := be.Dump(t, s); after != before {
		t.Fatalf("refused images changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func testDeleteRemovesImages(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	keep, gone := MustCreate(t, s, "c"), MustCreate(t, s, "c")
	img := []koe.Image{{Source: "camera", MimeType: "image/png", Data: Base64(Picture(1, 20000))}}
	MustAppend(t, s, "c", keep, koe.Record{Role: koe.RoleHuman, Images: img})
	MustAppend(t, s, "c", gone, koe.Record{Role: koe.RoleHuman, Images: img})
	if err := s.Delete(ctx, "c", gone); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Image(ctx, "c", gone, "2-0"); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("Image of deleted history: err = %v, want ErrNotFound", err)
	}
	if strings.Contains(be.Dump(t, s), gone) {
		t.Fatal("deleted history left data behind")
	}
	if _, data := MustImage(t, s, "c", keep, "2-0"); len(data) != 20000 {
		t.Fatalf("other history's image = %d bytes", len(data))
	}
	be.check(t, s)
}

// Appends with images are batched like any other; a failing one in the
// batch must not lose or misplace another's images.
func testConcurrentImageAppends(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, nil)
	const n = 20
	uids := make([]string, n)
	for i := range uids {
		uids[i] = MustCreate(t, s, "c")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				img := koe.Image{Source: "camera", MimeType: "image/png", Data: Base64(Picture(byte(i*3+j), 1000+i))}
				if err := s.Append(ctx, "c", uids[i], koe.Record{Role: koe.RoleHuman, Content: fmt.Sprint(j), Images: []koe.Image{img}}); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			err := s.Append(ctx, "c", "missing", koe.Record{Role: koe.RoleHuman, Images: []koe.Image{{MimeType: "image/png", Data: Base64(Picture(0, 10))}}})
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
			if _, data := MustImage(t, s, "c", uid, ref); !bytes.Equal(data, Picture(byte(i*3+j), 1000+i)) {
				t.Fatalf("history %d image %s: wrong bytes", i, ref)
			}
		}
	}
	be.check(t, s)
}
