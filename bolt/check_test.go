package bolt

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"koe"
	"koe/history/historytest"
)

func TestCheckHealthy(t *testing.T) {
	ctx := t.Context()
	s, _ := openTest(t, Options{})
	for i := 0; i < 5; i++ {
		uid := historytest.MustCreate(t, s, "c")
		// Pictures this large take overflow pages, which the check follows.
		img := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{byte(i)}, 40000))
		historytest.MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "hi", Images: []koe.Image{{MimeType: "image/png", Data: img}}})
		if i%2 == 0 {
			if err := s.Delete(ctx, "c", uid); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.SetPrompt(ctx, "c", koe.PromptSystem, "be brief"); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check on a healthy database: %v", err)
	}
}

// Check must find damage that reads do not notice: two keys swapped on a
// page, which leaves the B+tree unsorted but every page readable.
func TestCheckFindsDamage(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "koe.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Conf uids are keys of the "prompts" bucket, which has nested buckets
	// and so its own page, where these two sit side by side.
	a, b := []byte("zzconf-aaaa"), []byte("zzconf-bbbb")
	for _, conf := range [][]byte{a, b} {
		if err := s.SetPrompt(ctx, string(conf), koe.PromptSystem, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check before damage: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(file, a) || !bytes.Contains(file, b) {
		t.Fatal("keys not found in the file")
	}
	const tmp = "\x00placeholder"
	file = bytes.ReplaceAll(file, a, []byte(tmp))
	file = bytes.ReplaceAll(file, b, a)
	file = bytes.ReplaceAll(file, []byte(tmp), b)
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if err := s.Check(ctx); err == nil {
		t.Fatal("Check on a database with unsorted keys: want an error")
	} else {
		t.Logf("Check: %v", err)
	}
}
