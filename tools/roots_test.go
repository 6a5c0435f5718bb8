package tools

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestFolders(t *testing.T) {
	abs, err := filepath.Abs("notes")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  Config
		want []string
	}{
		{Config{Enabled: []string{"read_file"}, Files: FilesSettings{Root: "notes"}}, []string{abs}},
		{Config{Enabled: []string{"calculator"}, Files: FilesSettings{Root: "notes"}}, nil}, // read_file is off
		{Config{Enabled: []string{"read_file"}}, nil},
	} {
		if got := c.cfg.Folders(); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.cfg, got, c.want)
		}
	}
}
