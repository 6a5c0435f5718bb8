package live

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe/livechat"
)

// The file keeps the state whole across a write: what is saved is what
// is loaded; no file is a state with nothing in it; a file that is not
// the state is an error naming it, never a half-read state.
func TestFileStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	f := fileState{path: stateFile(dir, "../evil/conf")}
	if filepath.Dir(f.path) != dir || !strings.HasPrefix(filepath.Base(f.path), "live_chat-") {
		t.Fatalf("state file %s is not a file of %s", f.path, dir)
	}
	ctx := context.Background()
	if s, err := f.load(ctx); err != nil || s.Paused || len(s.Queue) != 0 {
		t.Fatalf("no file: %+v %v", s, err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := livechat.Saved{Paused: true, Banned: []string{"troll"}, Queue: []livechat.SavedMessage{
		{Platform: "twitch", Channel: "koe", User: "Alice", Login: "alice", Text: "hi", Time: at},
		{Platform: "twitch", Channel: "koe", User: "Rai", Login: "rai", Time: at, Event: livechat.EventRaid, Amount: 42},
	}}
	if err := f.save(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := f.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Paused || len(got.Banned) != 1 || len(got.Queue) != 2 || got.Queue[0] != want.Queue[0] || got.Queue[1] != want.Queue[1] {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the directory holds %d files after a save, want the state alone", len(entries))
	}
	if err := os.WriteFile(f.path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.load(ctx); err == nil || !strings.Contains(err.Error(), f.path) {
		t.Fatalf("an unreadable file: %v", err)
	}
}
