package conversation

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"koe/agent"
	"koe/internal/quote"
	"koe/protocol"
)

// errBadImage wraps every image the client sent that koe refuses.
var errBadImage = errors.New("bad image")

// imageTypes maps each accepted type to its constant name: the type taken
// from a data URL is a slice of that URL, and keeping it would keep the
// whole image in memory long after its bytes were let go.
var imageTypes = map[string]string{"image/jpeg": "image/jpeg", "image/png": "image/png", "image/webp": "image/webp", "image/gif": "image/gif"}

// imageSources are the sources a client may name, as constants (see
// imageTypes); any other becomes "upload".
var imageSources = map[string]string{"camera": "camera", "screen": "screen", "clipboard": "clipboard", "upload": "upload"}

// validateImages checks what a client attached (count, type, encoding,
// size, and that the bytes really are the image type they claim) and
// converts it for the agent. One bad image refuses the whole input: the
// user hears why instead of getting an answer that silently ignored it.
func validateImages(in []protocol.Image, cfg Config) ([]agent.Image, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > cfg.MaxImages {
		return nil, fmt.Errorf("%w: %d images sent, at most %d per message (conversation.max_images)", errBadImage, len(in), cfg.MaxImages)
	}
	out := make([]agent.Image, 0, len(in))
	for i, img := range in {
		mime, data := strings.ToLower(strings.TrimSpace(img.MimeType)), img.Data
		if rest, ok := strings.CutPrefix(data, "data:"); ok {
			header, payload, found := strings.Cut(rest, ",")
			declared, isB64 := strings.CutSuffix(header, ";base64")
			if !found || !isB64 {
				return nil, fmt.Errorf("%w %d: its data URL is not base64 (data:<type>;base64,...)", errBadImage, i+1)
			}
			declared = strings.ToLower(declared)
			if mime != "" && declared != mime {
				return nil, fmt.Errorf("%w %d: mime_type %q but the data URL says %q", errBadImage, i+1, quote.Shorten(mime, 40), quote.Shorten(declared, 40))
			}
			mime, data = declared, payload
		}
		canonical, ok := imageTypes[mime]
		if !ok {
			return nil, fmt.Errorf("%w %d: type %q is not supported (use JPEG, PNG, WebP or GIF)", errBadImage, i+1, quote.Shorten(mime, 40))
		}
		mime = canonical
		if base64.StdEncoding.DecodedLen(len(data)) > cfg.MaxImageBytes+3 {
			return nil, fmt.Errorf("%w %d: larger than %d bytes (conversation.max_image_bytes)", errBadImage, i+1, cfg.MaxImageBytes)
		}
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("%w %d: its data is not valid base64: %v", errBadImage, i+1, err)
		}
		if len(raw) > cfg.MaxImageBytes {
			return nil, fmt.Errorf("%w %d: %d bytes, more than %d (conversation.max_image_bytes)", errBadImage, i+1, len(raw), cfg.MaxImageBytes)
		}
		if sniffed := http.DetectContentType(raw); sniffed != mime {
			return nil, fmt.Errorf("%w %d: declared %s but the bytes are %s", errBadImage, i+1, mime, sniffed)
		}
		source, ok := imageSources[img.Source]
		if !ok {
			source = "upload"
		}
		out = append(out, agent.Image{Source: source, MimeType: mime, Data: data})
	}
	return out, nil
}
