package mcp

import (
	"encoding/base64"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"koe/agent"
)

// imageTypes are the pictures chat APIs take as image parts.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/webp": true, "image/gif": true}

// showImages gives a model that sees images the pictures of a result, as
// image parts with it, within mcp_max_images and mcp_max_image_bytes. It
// returns a note for the text on what was left out ("" when nothing was,
// or when the model does not see images: the text names every image).
func showImages(host *agent.ToolHost, res *sdk.CallToolResult, lim HostLimits) string {
	if host == nil || !host.Vision {
		return ""
	}
	var shown []agent.Image
	over, big, other := 0, 0, 0
	for _, c := range res.Content {
		img, ok := c.(*sdk.ImageContent)
		switch {
		case !ok:
		case !imageTypes[img.MIMEType]:
			other++
		case len(img.Data) > lim.MaxImageBytes:
			big++
		case len(shown) >= lim.MaxImages:
			over++
		default:
			shown = append(shown, agent.Image{Source: "tool", MimeType: img.MIMEType, Data: base64.StdEncoding.EncodeToString(img.Data)})
		}
	}
	host.AddImages(shown...)
	note := ""
	if over > 0 {
		note += fmt.Sprintf("\n[%d more images are not shown: a result shows at most %d (mcp_max_images)]", over, lim.MaxImages)
	}
	if big > 0 {
		note += fmt.Sprintf("\n[%d images are not shown: larger than %s (mcp_max_image_bytes)]", big, size(lim.MaxImageBytes))
	}
	if other > 0 {
		note += fmt.Sprintf("\n[%d images are not shown: of a type the model does not take]", other)
	}
	return note
}
