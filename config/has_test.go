package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"koe/config"
)

func TestCharactersHas(t *testing.T) {
	c, chars := setup(t, baseConf, map[string]string{
		"mika.yaml": "conf_name: Mika\nconf_uid: mika\n",
		"same.yaml": "conf_name: Same UID as the default\n", // inherits conf_uid base
	}, nil)
	for uid, want := range map[string]bool{
		"base": true, "mika": true, "nobody": false, "": false, "koe_default": false,
	} {
		if got := c.Has(uid); got != want {
			t.Errorf("Has(%q) = %v, want %v", uid, got, want)
		}
	}

	// Added while koe runs.
	writeFile(t, chars, "aiko.yaml", "conf_name: Aiko\nconf_uid: aiko\n")
	if !c.Has("aiko") {
		t.Error("Has(aiko) = false after aiko.yaml was added")
	}
	// Edited: the old conf_uid goes, the new one comes.
	writeFile(t, chars, "aiko.yaml", "conf_name: Aiko\nconf_uid: aiko-2\n# longer, so the size changes too\n")
	if c.Has("aiko") || !c.Has("aiko-2") {
		t.Errorf("after the edit Has(aiko)=%v Has(aiko-2)=%v, want false, true", c.Has("aiko"), c.Has("aiko-2"))
	}
	// Broken: not a character one can pick.
	writeFile(t, chars, "mika.yaml", "conf_name: Mika\nconf_uid: mika\nllm:\n  modle: x\n")
	if c.Has("mika") {
		t.Error("Has(mika) = true for a broken file")
	}
	// Removed.
	if err := os.Remove(filepath.Join(chars, "aiko.yaml")); err != nil {
		t.Fatal(err)
	}
	if c.Has("aiko-2") {
		t.Error("Has(aiko-2) = true after aiko.yaml was removed")
	}
	// A file that is not a character file does not count.
	writeFile(t, chars, ".hidden.yaml", "conf_uid: hidden\n")
	writeFile(t, chars, "notes.txt", "conf_uid: notes\n")
	if c.Has("hidden") || c.Has("notes") {
		t.Error("Has counts a dot file or a .txt file")
	}
}

// An edit that keeps the size and the modification time would fool the
// cache; Load always reads the file, so switch-config sees every edit.
func TestCharactersLoadReadsAfresh(t *testing.T) {
	c, chars := setup(t, baseConf, map[string]string{"a.yaml": "conf_uid: aaaa\n"}, nil)
	path := filepath.Join(chars, "a.yaml")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Has("aaaa") {
		t.Fatal("Has(aaaa) = false")
	}
	writeFile(t, chars, "a.yaml", "conf_uid: bbbb\n")
	if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	ch, err := c.Load("a.yaml")
	if err != nil || ch.ConfUID != "bbbb" {
		t.Fatalf("Load = %q, %v; want bbbb", ch.ConfUID, err)
	}
	if !c.Has("bbbb") {
		t.Error("Has(bbbb) = false after Load read the file")
	}
}

func TestCharactersConcurrentUse(t *testing.T) {
	c, chars := setup(t, baseConf, nil, nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.Has("c3")
				if _, err := c.List(); err != nil {
					t.Error(err)
					return
				}
				_, _ = c.Load("c1.yaml")
			}
		}()
	}
	for i := 0; i < 20; i++ {
		writeFile(t, chars, fmt.Sprintf("c%d.yaml", i%5), fmt.Sprintf("conf_uid: c%d\npersona_prompt: edit %d\n", i%5, i))
	}
	close(stop)
	wg.Wait()
	if !c.Has("c3") {
		t.Error("Has(c3) = false after the writes")
	}
}

func BenchmarkCharactersHas(b *testing.B) {
	dir := b.TempDir()
	chars := filepath.Join(dir, "chars")
	if err := os.Mkdir(chars, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("c%02d.yaml", i)
		if err := os.WriteFile(filepath.Join(chars, name), []byte(fmt.Sprintf("conf_uid: c%02d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(dir, "conf.yaml")
	if err := os.WriteFile(path, []byte("characters_dir: "+filepath.ToSlash(chars)+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(path, true, env(nil))
	if err != nil {
		b.Fatal(err)
	}
	c := config.NewCharacters(cfg, env(nil))
	b.Run("default", func(b *testing.B) {
		for b.Loop() {
			c.Has(cfg.Character.ConfUID)
		}
	})
	b.Run("file, 20 files", func(b *testing.B) {
		for b.Loop() {
			if !c.Has("c19") {
				b.Fatal("c19 not found")
			}
		}
	})
	b.Run("miss, 20 files", func(b *testing.B) {
		for b.Loop() {
			c.Has("nobody")
		}
	})
}
