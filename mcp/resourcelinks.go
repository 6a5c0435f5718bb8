package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// resolveLinks makes a tool result's resources readable in place: the
// first mcp_max_resource_links resource links are read from the server
// that returned them (never another) and become embedded resources, and an
// embedded blob that is text becomes text. A link that cannot be read
// stays a link, with why. A server's links are its own resources: reading
// them asks nothing of any other server or of koe's files.
func (s *server) resolveLinks(ctx context.Context, res *sdk.CallToolResult) {
	budget := s.limits.res.MaxResourceLinks
	out := make([]sdk.Content, 0, len(res.Content))
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.ResourceLink:
			if budget == 0 || ctx.Err() != nil {
				out = append(out, c)
				continue
			}
			budget--
			out = append(out, s.readLink(ctx, c)...)
		case *sdk.EmbeddedResource:
			out = append(out, textBlob(c))
		default:
			out = append(out, c)
		}
	}
	res.Content = out
}

// readLink reads one linked resource into embedded resources, or says why
// it could not.
func (s *server) readLink(ctx context.Context, link *sdk.ResourceLink) []sdk.Content {
	if err := checkURI(link.URI); err != nil {
		return []sdk.Content{&sdk.TextContent{Text: "[resource link " + clip(link.URI, 200) + labelled(link.Name) + ": not read: not a URI]"}}
	}
	contents, err := s.readResource(ctx, link.URI)
	if err != nil {
		s.log.Debug("MCP resource link not read", "uri", link.URI, "err", err)
		return []sdk.Content{&sdk.TextContent{Text: "[resource link " + link.URI + labelled(link.Name) + ": not read: " + clip(err.Error(), 200) + "]"}}
	}
	out := make([]sdk.Content, 0, len(contents))
	for _, rc := range contents {
		uri := rc.URI
		if uri == "" {
			uri = link.URI
		}
		out = append(out, textBlob(&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{
			URI: uri, MIMEType: orUnknown(rc.MIMEType, link.MIMEType), Text: rc.Text, Blob: rc.Blob}}))
	}
	return out
}

// textBlob turns an embedded resource's blob into its text when it is
// text (by its MIME type, and valid UTF-8): the model reads it then.
func textBlob(e *sdk.EmbeddedResource) *sdk.EmbeddedResource {
	r := e.Resource
	if r == nil || r.Blob == nil {
		return e
	}
	rc := ResourceContent{URI: r.URI, MIMEType: r.MIMEType, Blob: r.Blob}
	if text, ok := rc.Readable(); ok {
		copied := *r
		copied.Text, copied.Blob = text, nil
		return &sdk.EmbeddedResource{Resource: &copied, Annotations: e.Annotations, Meta: e.Meta}
	}
	return e
}
