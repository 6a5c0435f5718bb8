package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultText is what the model is told of a call's result: the text items
// joined, and a short line for each item it cannot read (an image, audio,
// a binary resource), so it knows they were there.
func resultText(res *sdk.CallToolResult) string {
	parts := make([]string, 0, len(res.Content))
	text := false
	for _, c := range res.Content {
		parts = append(parts, contentText(c))
		_, isText := c.(*sdk.TextContent)
		text = text || isText
	}
	if !text && res.StructuredContent != nil {
		// A server should mirror structured output in text; when one does
		// not, the JSON is the only answer there is.
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

func contentText(c sdk.Content) string {
	switch c := c.(type) {
	case *sdk.TextContent:
		return c.Text
	case *sdk.ImageContent:
		return "[" + orUnknown(c.MIMEType, "image") + ", " + size(len(c.Data)) + "]"
	case *sdk.AudioContent:
		return "[" + orUnknown(c.MIMEType, "audio") + ", " + size(len(c.Data)) + "]"
	case *sdk.ResourceLink:
		return "[resource link " + c.URI + labelled(c.Name) + "]"
	case *sdk.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[empty resource]"
		}
		if r.Blob == nil {
			return "[resource " + r.URI + "]\n" + r.Text
		}
		return "[resource " + r.URI + ", " + orUnknown(r.MIMEType, "binary") + ", " + size(len(r.Blob)) + "]"
	default:
		return fmt.Sprintf("[%T content]", c)
	}
}

func orUnknown(mime, kind string) string {
	if mime == "" {
		return kind
	}
	return mime
}

func labelled(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

// size says n bytes the way people read it.
func size(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%d KB", (n+512)/1024)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/(1024*1024))
	}
}

// cut bounds s to limit characters, the note that says so included.
func cut(s string, limit int) string {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	// The note's length depends on the kept count only through its
	// digits, which the total's digits bound.
	note := func(kept int) string {
		return fmt.Sprintf("\n[result cut: the first %d of %d characters are shown (mcp_max_result_chars)]", kept, n)
	}
	kept := limit - utf8.RuneCountInString(note(n))
	// Fewer digits kept than in the total leave room for more.
	for limit-utf8.RuneCountInString(note(kept+1)) > kept {
		kept++
	}
	return string([]rune(s)[:kept]) + note(kept)
}
