package cdp

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLaunchArgsFakeMicrophone(t *testing.T) {
	dir := t.TempDir()
	wav := filepath.Join(dir, "mic.wav")
	if err := os.WriteFile(wav, []byte("RIFF"), 0o644); err != nil {
		t.Fatal(err)
	}
	args, err := launchArgs(Options{FakeMicrophone: wav, Args: []string{"--extra"}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
		"--use-file-for-fake-audio-capture=" + wav + "%noloop", "--extra"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if args[len(args)-1] != "about:blank" {
		t.Errorf("args %q do not end with the page", args)
	}

	// Without it, no fake media flags.
	args, err = launchArgs(Options{}, dir)
	if err != nil || slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "fake") }) {
		t.Errorf("args %q, %v", args, err)
	}

	// Paths Chromium would misread or not find are refused, rather than
	// leaving the page a beeping fake microphone.
	pct := filepath.Join(dir, "50%.wav")
	if err := os.WriteFile(pct, []byte("RIFF"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{pct, filepath.Join(dir, "missing.wav")} {
		if _, err := launchArgs(Options{FakeMicrophone: bad}, dir); err == nil {
			t.Errorf("FakeMicrophone %q was accepted", bad)
		}
	}
}
