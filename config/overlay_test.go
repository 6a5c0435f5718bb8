package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"koe/config"
	"koe/conversation"
)

// The overlay's avatar settings load as written, with the default
// threshold; settings that can never work are refused with the key and
// the reason; pictures are confined to avatars_dir.
func TestOverlayAvatarConfig(t *testing.T) {
	if got := config.Default().Character.Overlay.Avatar.Threshold; got != 0.15 {
		t.Fatalf("default threshold = %g, want 0.15", got)
	}
	ok := "character:\n  overlay:\n    avatar:\n      idle: koe/idle.png\n      talking: koe/talk.png\n      blink: blink.webp\n" +
		"      emotions:\n        joy: happy.png\n        Sadness: sad.png\n      emotions_talking:\n        joy: happy-talk.png\n"
	cfg, err := config.Load(writeFile(t, t.TempDir(), "conf.yaml", ok), true, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := conversation.AvatarConfig{Idle: "koe/idle.png", Talking: "koe/talk.png", Blink: "blink.webp", Threshold: 0.15,
		Emotions:        map[string]string{"joy": "happy.png", "Sadness": "sad.png"},
		EmotionsTalking: map[string]string{"joy": "happy-talk.png"}}
	if got := cfg.Character.Overlay.Avatar; !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}

	avatar := func(lines string) string { return "character:\n  overlay:\n    avatar:\n" + lines }
	for _, tc := range []struct{ name, yaml, want string }{
		{"threshold zero", avatar("      threshold: 0\n"), "overlay.avatar.threshold must be in (0, 1]"},
		{"threshold above one", avatar("      threshold: 1.5\n"), "overlay.avatar.threshold must be in (0, 1]"},
		{"threshold negative", avatar("      threshold: -0.1\n"), "overlay.avatar.threshold must be in (0, 1]"},
		{"idle without talking", avatar("      idle: a.png\n"), "needs both idle and talking"},
		{"talking without idle", avatar("      talking: a.png\n"), "needs both idle and talking"},
		{"parent folder", avatar("      idle: ../secret.png\n      talking: a.png\n"), "overlay.avatar.idle: \"../secret.png\": use a file name inside avatars_dir"},
		{"inner parent folder", avatar("      idle: a/../../b.png\n      talking: a.png\n"), "no '..'"},
		{"absolute path", avatar("      idle: a.png\n      talking: /etc/x.png\n"), "overlay.avatar.talking: \"/etc/x.png\": use a file name relative to avatars_dir, not an absolute path"},
		{"backslash", avatar("      idle: a.png\n      talking: a.png\n      blink: ..\\\\x.png\n"), "overlay.avatar.blink"},
		{"not a picture", avatar("      idle: a.svg\n      talking: a.png\n"), "avatars are PNG, JPEG, WebP or GIF"},
		{"unknown emotion", avatar("      idle: a.png\n      talking: b.png\n      emotions:\n        joyful: c.png\n"),
			"overlay.avatar.emotions.joyful: \"joyful\" is not a keyword of model_info.emotionMap (anger, disgust, fear, joy, neutral, sadness, smirk, surprise)"},
		{"empty emotion picture", avatar("      idle: a.png\n      talking: b.png\n      emotions:\n        joy: \"\"\n"), "overlay.avatar.emotions.joy: the picture's file name is empty"},
		{"emotion path", avatar("      idle: a.png\n      talking: b.png\n      emotions_talking:\n        joy: ../c.png\n"), "overlay.avatar.emotions_talking.joy"},
		// joy and surprise are both expression 3 in the default model.
		{"same expression", avatar("      idle: a.png\n      talking: b.png\n      emotions:\n        joy: c.png\n        surprise: d.png\n"),
			"joy and surprise map to the same expression (3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, t.TempDir(), "conf.yaml", tc.yaml), true, env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error with %q", err, tc.want)
			}
		})
	}
	// One picture for keywords of one expression is fine.
	same := avatar("      idle: a.png\n      talking: b.png\n      emotions:\n        joy: c.png\n        surprise: c.png\n")
	if _, err := config.Load(writeFile(t, t.TempDir(), "conf.yaml", same), true, env(nil)); err != nil {
		t.Fatal(err)
	}
}

// MissingOverlayImages names the configured pictures avatars_dir lacks.
func TestMissingOverlayImages(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "koe", "sub.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"koe/idle.png", "joy.png"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ch := config.Default().Character
	ch.Overlay.Avatar = conversation.AvatarConfig{Idle: "koe/idle.png", Talking: "koe/talk.png", Blink: "koe/sub.png",
		Emotions: map[string]string{"joy": "joy.png", "sadness": "sad.png"}, Threshold: 0.3}
	got := ch.MissingOverlayImages(dir)
	if want := []string{"koe/talk.png", "koe/sub.png", "sad.png"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("missing = %q, want %q (a folder is not a picture)", got, want)
	}
	ch.Overlay.Avatar = conversation.AvatarConfig{Threshold: 0.3}
	if got := ch.MissingOverlayImages(dir); got != nil {
		t.Fatalf("without an avatar, missing = %q", got)
	}
}
