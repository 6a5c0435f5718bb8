// Command askserver is the MCP server koe's tests of confirmation and
// elicitation run over stdio: a notes store with a destructive tool, a
// read-only one, and a tool that asks the user a question. Each call is
// logged to stderr ("deleted <name>"), so a test can see what ran.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type nameArgs struct {
	Name string `json:"name" jsonschema:"the note's name"`
}

type none struct{}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func main() {
	var mu sync.Mutex
	notes := map[string]bool{"groceries": true, "ideas": true}
	list := func() string {
		mu.Lock()
		defer mu.Unlock()
		var names []string
		for n := range notes {
			names = append(names, n)
		}
		sort.Strings(names)
		return strings.Join(names, ", ")
	}
	yes, no := true, false
	server := mcp.NewServer(&mcp.Implementation{Name: "koe-ask-server", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "delete_note", Description: "Deletes a note for good.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}},
		func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			delete(notes, a.Name)
			mu.Unlock()
			fmt.Fprintf(os.Stderr, "deleted %s\n", a.Name)
			return text("deleted " + a.Name + "; left: " + list()), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "list_notes", Description: "Lists the notes.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no}},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return text("notes: " + list()), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "pick_color", Description: "Asks the user for a color and a count, and paints that many notes.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			// On the newest protocol a server asks by answering with input
			// requests; the client asks the user and calls again with the
			// answers (multi round-trip).
			answer, ok := req.Params.InputResponses["color"]
			if !ok {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"color": &mcp.ElicitParams{
					Message: "Which color should the notes be?",
					RequestedSchema: map[string]any{
						"type": "object",
						"properties": map[string]any{
							"color": map[string]any{"type": "string", "title": "Color", "enum": []string{"red", "green", "blue"}},
						},
						"required": []string{"color"},
					},
				}}}, nil, nil
			}
			res, _ := answer.(*mcp.ElicitResult)
			if res == nil {
				return nil, nil, fmt.Errorf("the answer is a %T", answer)
			}
			fmt.Fprintf(os.Stderr, "asked: %s %v\n", res.Action, res.Content)
			if res.Action != "accept" {
				return text("the user answered " + res.Action), nil, nil
			}
			return text(fmt.Sprintf("painted the notes %v", res.Content["color"])), nil, nil
		})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
