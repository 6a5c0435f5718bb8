// Command hostserver is a stdio MCP server for the tests of what koe
// offers servers besides calls: its working directory, results that carry
// images or structured content only, and its process id (a test stops
// the process to make it hang).
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type none struct{}

type countArgs struct {
	Count int `json:"count" jsonschema:"how many images"`
	Bytes int `json:"bytes" jsonschema:"the size of each"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// png is the start of a PNG file, padded to n bytes.
func png(n int) []byte {
	b := make([]byte, max(n, 8))
	copy(b, "\x89PNG\r\n\x1a\n")
	return b
}

func main() {
	server := mcp.NewServer(&mcp.Implementation{Name: "koe-host-test-server", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "cwd", Description: "Returns the server's working directory."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			dir, err := os.Getwd()
			if err != nil {
				return nil, nil, err
			}
			return text(dir), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "pid", Description: "Returns the server's process id."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprint(os.Getpid())), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "images", Description: "Returns count PNG images of bytes each, and no text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a countArgs) (*mcp.CallToolResult, any, error) {
			res := &mcp.CallToolResult{}
			for range a.Count {
				res.Content = append(res.Content, &mcp.ImageContent{MIMEType: "image/png", Data: png(a.Bytes)})
			}
			return res, nil, nil
		})
	type weather struct {
		Temperature float64 `json:"temperature"`
		Conditions  string  `json:"conditions"`
	}
	// Structured output without the text a server should mirror it in.
	mcp.AddTool(server, &mcp.Tool{Name: "structured", Description: "Returns structured content only."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, weather, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{}}, weather{Temperature: 21.5, Conditions: "sunny"}, nil
		})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
