package conversation

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image"
	"image/png"
	"strings"
	"testing"
	"unsafe"

	"koe/protocol"
)

func tinyPNG(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func TestValidateImages(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxImages = 2
	cfg.MaxImageBytes = 2048
	pngData := tinyPNG(t)

	got, err := validateImages([]protocol.Image{
		{Source: "camera", Data: "data:image/png;base64," + pngData, MimeType: "image/png"},
		{Source: "weird", Data: pngData, MimeType: "image/png"},
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Source != "camera" || got[0].MimeType != "image/png" || got[0].Data != pngData || got[1].Source != "upload" {
		t.Fatalf("validated = %+v", got)
	}

	html := base64.StdEncoding.EncodeToString([]byte("<html><script>alert(1)</script></html>"))
	big := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x89}, 4096))
	for name, tc := range map[string]struct {
		images []protocol.Image
		want   string
	}{
		"too many":        {[]protocol.Image{{Data: pngData, MimeType: "image/png"}, {Data: pngData, MimeType: "image/png"}, {Data: pngData, MimeType: "image/png"}}, "at most 2"},
		"svg":             {[]protocol.Image{{Data: pngData, MimeType: "image/svg+xml"}}, "not supported"},
		"no type":         {[]protocol.Image{{Data: pngData}}, "not supported"},
		"bad base64":      {[]protocol.Image{{Data: "!!!not base64", MimeType: "image/png"}}, "not valid base64"},
		"not base64 URL":  {[]protocol.Image{{Data: "data:image/png," + pngData}}, "not base64"},
		"type mismatch":   {[]protocol.Image{{Data: "data:image/jpeg;base64," + pngData, MimeType: "image/png"}}, "data URL says"},
		"lying bytes":     {[]protocol.Image{{Data: html, MimeType: "image/png"}}, "bytes are text/html"},
		"png called jpeg": {[]protocol.Image{{Data: pngData, MimeType: "image/jpeg"}}, "bytes are image/png"},
		"too big":         {[]protocol.Image{{Data: big, MimeType: "image/png"}}, "max_image_bytes"},
	} {
		_, err := validateImages(tc.images, cfg)
		if !errors.Is(err, errBadImage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want errBadImage mentioning %q", name, err, tc.want)
		}
	}
}

// An image's type and source must not be slices of the data URL they came
// in: the agent keeps them after it lets the bytes go, and a slice would
// keep the whole picture in memory for the rest of the session.
func TestValidatedImageHoldsNoSliceOfTheData(t *testing.T) {
	url := "data:image/png;base64," + tinyPNG(t)
	got, err := validateImages([]protocol.Image{{Source: "camera", Data: url}}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(url)))
	inside := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return s != "" && p >= start && p < start+uintptr(len(url))
	}
	if img := got[0]; inside(img.MimeType) || inside(img.Source) {
		t.Errorf("the validated image's type %q or source %q points into the data URL", img.MimeType, img.Source)
	}
}
