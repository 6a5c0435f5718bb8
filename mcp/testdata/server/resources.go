package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The resources the server offers, for koe's resource tests: a note the
// set_note tool changes (and tells subscribers it did), a binary file, a
// file larger than koe takes, a template, and a tool whose result links
// to them.
var (
	noteMu sync.Mutex
	note   = "The lighthouse keeper's cat is called Biscuit."
)

var withResources = flag.Bool("resources", false, "offer resources, a template, subscriptions and tools that change and link to them")

// serverOptions takes subscriptions when the server offers resources.
func serverOptions() *mcp.ServerOptions {
	if !*withResources {
		return nil
	}
	// The SDK keeps the subscriptions; these only accept them.
	return &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	}
}

func addResources(server *mcp.Server) {
	if !*withResources {
		return
	}
	server.AddResource(&mcp.Resource{URI: "koe-test://notes/cat", Name: "cat.md", MIMEType: "text/markdown", Description: "A note about the cat."},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			noteMu.Lock()
			defer noteMu.Unlock()
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: "# The cat\n\n" + note}}}, nil
		})
	server.AddResource(&mcp.Resource{URI: "koe-test://files/logo.png", Name: "logo.png", MIMEType: "image/png"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "image/png", Blob: append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 2040)...)}}}, nil
		})
	server.AddResource(&mcp.Resource{URI: "koe-test://files/huge.txt", Name: "huge.txt", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: strings.Repeat("huge ", 1<<20)}}}, nil
		})
	server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "koe-test://rooms/{room}", Name: "room", MIMEType: "text/plain", Description: "A room of the lighthouse."},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			room := strings.TrimPrefix(req.Params.URI, "koe-test://rooms/")
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Blob: []byte("The " + room + " has a round window.")}}}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "set_note", Description: "Changes the cat note and tells subscribers."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			noteMu.Lock()
			note = a.Text
			noteMu.Unlock()
			if err := server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "koe-test://notes/cat"}); err != nil {
				return nil, nil, fmt.Errorf("notifying: %w", err)
			}
			return text("noted"), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "add_note", Description: "Adds a note koe-test://notes/<name>, which changes the list."},
		func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			uri := "koe-test://notes/" + a.Name
			server.AddResource(&mcp.Resource{URI: uri, Name: a.Name + ".txt", MIMEType: "text/plain"},
				func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: "A note on the " + a.Name + "."}}}, nil
				})
			return text("added " + uri), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "links", Description: "Returns links to the note, the logo, a room and a missing resource."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "see:"},
				&mcp.ResourceLink{URI: "koe-test://notes/cat", Name: "cat.md"},
				&mcp.ResourceLink{URI: "koe-test://files/logo.png", Name: "logo.png", MIMEType: "image/png"},
				&mcp.ResourceLink{URI: "koe-test://rooms/attic", Name: "attic"},
				&mcp.ResourceLink{URI: "koe-test://missing", Name: "missing"},
			}}, nil, nil
		})
}
