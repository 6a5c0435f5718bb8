package conversation

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"koe"
	"koe/internal/quote"
	"koe/protocol"
)

// The OBS overlay (/overlay) shows a character as a PNG avatar: pictures
// from avatars_dir switched by the lip-sync volumes of what it says and by
// the emotions of its sentences. Each character configures its pictures.

// DefaultOverlayThreshold is the volume (0..1, as in an audio frame's
// volumes) from which the avatar shows its talking picture.
const DefaultOverlayThreshold = 0.15

// OverlayConfig is a character's overlay.* settings.
type OverlayConfig struct {
	Avatar AvatarConfig `yaml:"avatar"`
}

// AvatarConfig names the avatar's pictures: file names inside avatars_dir.
// Without idle and talking the overlay shows subtitles only (and the other
// pictures are not used: a character file can turn off an avatar it
// inherits from the configuration file by emptying these two).
type AvatarConfig struct {
	Idle    string `yaml:"idle"`
	Talking string `yaml:"talking"`
	// Blink is shown for a moment every few seconds while idle.
	Blink string `yaml:"blink"`
	// Threshold: a volume at or above it shows the talking picture.
	Threshold float64 `yaml:"threshold"`
	// Emotions replace idle, and EmotionsTalking replace talking, while a
	// sentence with that emotion keyword (a key of the model's
	// emotionMap, as [joy] in a reply) plays.
	Emotions        map[string]string `yaml:"emotions"`
	EmotionsTalking map[string]string `yaml:"emotions_talking"`
}

// images lists every configured picture with its key, in a stable order.
func (a AvatarConfig) images() [][2]string {
	out := [][2]string{{"idle", a.Idle}, {"talking", a.Talking}, {"blink", a.Blink}}
	for _, m := range []struct {
		key string
		m   map[string]string
	}{{"emotions", a.Emotions}, {"emotions_talking", a.EmotionsTalking}} {
		for _, name := range sortedKeys(m.m) {
			out = append(out, [2]string{m.key + "." + name, m.m[name]})
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// validate reports settings that can never work; emotionMap is the
// character's model_info emotionMap (keyword → expression).
func (a AvatarConfig) validate(modelInfo map[string]any) error {
	if a.Threshold <= 0 || a.Threshold > 1 {
		return fmt.Errorf("overlay.avatar.threshold must be in (0, 1] (a lip-sync volume; default %g), got %g", DefaultOverlayThreshold, a.Threshold)
	}
	if (a.Idle == "") != (a.Talking == "") {
		return errors.New("overlay.avatar needs both idle and talking pictures (leave both empty for subtitles only)")
	}
	for _, img := range a.images() {
		if img[1] == "" {
			if strings.HasPrefix(img[0], "emotions") {
				return fmt.Errorf("overlay.avatar.%s: the picture's file name is empty", img[0])
			}
			continue
		}
		if err := checkAvatarName(img[1]); err != nil {
			return fmt.Errorf("overlay.avatar.%s: %w", img[0], err)
		}
	}
	emotions := emotionMap(modelInfo)
	for _, m := range []struct {
		key string
		m   map[string]string
	}{{"emotions", a.Emotions}, {"emotions_talking", a.EmotionsTalking}} {
		// Keywords that map to one expression look the same in an audio
		// frame: the overlay cannot tell them apart.
		seen := map[string]string{}
		for _, name := range sortedKeys(m.m) {
			v, ok := emotions[strings.ToLower(name)]
			if !ok {
				return fmt.Errorf("overlay.avatar.%s.%s: %q is not a keyword of model_info.emotionMap (%s)",
					m.key, name, name, strings.Join(keysOf(emotions), ", "))
			}
			expr := expressionKey(v)
			if other, dup := seen[expr]; dup && m.m[other] != m.m[name] {
				return fmt.Errorf("overlay.avatar.%s: %s and %s map to the same expression (%s) in model_info.emotionMap, "+
					"so the overlay cannot tell them apart: give them the same picture or keep one", m.key, other, name, expr)
			}
			seen[expr] = name
		}
	}
	return nil
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkAvatarName confines a picture to avatars_dir: a slash-separated
// path relative to it, without "..", and a picture's extension.
func checkAvatarName(name string) error {
	switch {
	case strings.ContainsAny(name, "\\\x00"):
		return fmt.Errorf("%q: use a file name relative to avatars_dir, with '/' between folders", quote.Shorten(name, 80))
	case strings.HasPrefix(name, "/") || filepath.IsAbs(name):
		return fmt.Errorf("%q: use a file name relative to avatars_dir, not an absolute path", quote.Shorten(name, 80))
	case !fs.ValidPath(name):
		return fmt.Errorf("%q: use a file name inside avatars_dir (no '..', '.' or empty parts)", quote.Shorten(name, 80))
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".png", ".jpg", ".jpeg", ".webp", ".gif":
		return nil
	}
	return fmt.Errorf("%q: avatars are PNG, JPEG, WebP or GIF pictures (.png, .jpg, .jpeg, .webp, .gif)", quote.Shorten(name, 80))
}

// expressionKey is an emotionMap value as the overlay page compares it
// with an audio frame's actions.expressions: its JSON text.
func expressionKey(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// MissingOverlayImages returns the configured avatar pictures of c that
// are not files in avatarsDir (koe warns about them at start).
func (c Character) MissingOverlayImages(avatarsDir string) []string {
	var missing []string
	for _, img := range c.Overlay.Avatar.images() {
		if img[1] == "" || checkAvatarName(img[1]) != nil {
			continue
		}
		st, err := os.Stat(filepath.Join(avatarsDir, filepath.FromSlash(img[1])))
		if err != nil || !st.Mode().IsRegular() {
			missing = append(missing, img[1])
		}
	}
	return missing
}

// WarnMissingAvatars logs the overlay avatar pictures that characters
// name and avatars_dir does not hold: the overlay would show a broken
// picture. Files added later are served as they come.
func WarnMissingAvatars(chars CharacterSource, avatarsDir string, log *slog.Logger) {
	list, err := chars.List()
	if err != nil {
		log.Warn("cannot list the characters to check their avatar pictures", "err", err)
		return
	}
	for i, f := range list {
		ch := chars.Default()
		if i > 0 {
			if ch, err = chars.Load(f.Filename); err != nil {
				continue // logged where the file is read
			}
		}
		if missing := ch.MissingOverlayImages(avatarsDir); len(missing) > 0 {
			log.Warn("overlay avatar pictures not found in avatars_dir; the overlay shows them broken until they are there",
				"character", ch.ConfName, "avatars_dir", avatarsDir, "missing", missing)
		}
	}
}

// defaultCharacterAlias asks GET /api/characters/:conf_uid/overlay for
// the configuration file's own character, unless a character has that
// conf_uid.
const defaultCharacterAlias = "default"

// Overlays are the characters as the overlay page shows them.
type Overlays struct {
	Characters CharacterSource
}

// Overlay returns the overlay view of the character with confUID
// (defaultCharacterAlias: the default character); KindNotFound if none.
func (o Overlays) Overlay(confUID string) (protocol.OverlayView, error) {
	char, ok := o.Characters.Find(confUID)
	if !ok && confUID == defaultCharacterAlias {
		char, ok = o.Characters.Default(), true
	}
	if !ok {
		return protocol.OverlayView{}, koe.Errorf(koe.NotFound, "no character has conf_uid %q", quote.Shorten(confUID, 80))
	}
	return char.overlayView(), nil
}

func (c Character) overlayView() protocol.OverlayView {
	emotions := emotionMap(c.ModelInfo)
	v := protocol.OverlayView{ConfUID: c.ConfUID, ConfName: c.ConfName, Name: c.Name, EmotionKeywords: keysOf(emotions)}
	a := c.Overlay.Avatar
	if a.Idle == "" || a.Talking == "" {
		return v
	}
	threshold := a.Threshold
	if threshold <= 0 || threshold > 1 {
		threshold = DefaultOverlayThreshold
	}
	av := &protocol.AvatarView{Idle: avatarURL(a.Idle), Talking: avatarURL(a.Talking), Blink: avatarURL(a.Blink),
		Threshold: threshold, Emotions: map[string]protocol.EmotionView{}}
	for _, m := range []struct {
		m       map[string]string
		talking bool
	}{{a.Emotions, false}, {a.EmotionsTalking, true}} {
		for _, name := range sortedKeys(m.m) {
			expr, ok := emotions[strings.ToLower(name)]
			if !ok {
				continue
			}
			key := expressionKey(expr)
			e := av.Emotions[key]
			if e.Name == "" {
				e.Name = strings.ToLower(name)
			}
			if m.talking {
				e.Talking = avatarURL(m.m[name])
			} else {
				e.Idle = avatarURL(m.m[name])
			}
			av.Emotions[key] = e
		}
	}
	v.Avatar = av
	return v
}

// avatarURL is where the server serves a picture of avatars_dir.
func avatarURL(name string) string {
	if name == "" {
		return ""
	}
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/avatars/" + strings.Join(parts, "/")
}
