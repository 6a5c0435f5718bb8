// Command server is the MCP server koe's mcp tests run: over stdio by
// default, over streamable HTTP with -http (it then prints its endpoint's
// URL as the first line of stdout). Its tools exercise what a client must
// handle: errors, cancellation, a crash, tools added at run time. With
// -junk, over stdio, it writes what careless servers write to stdout
// besides the protocol: a banner, a line before every message, prints
// from a tool.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type textArgs struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type nameArgs struct {
	Name string `json:"name" jsonschema:"a name"`
}

type sizeArgs struct {
	Chars int `json:"chars" jsonschema:"how many characters"`
}

type none struct{}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func main() {
	httpMode := flag.Bool("http", false, "serve streamable HTTP instead of stdio")
	addr := flag.String("addr", "127.0.0.1:0", "the address to serve HTTP on")
	junk := flag.Bool("junk", false, "over stdio, write lines that are not JSON-RPC messages to stdout")
	many := flag.Int("tools", 0, "offer that many more tools, many_000, many_001…, after the others")
	descChars := flag.Int("desc", 0, "pad the descriptions of those tools to that many characters")
	wide := flag.Bool("wide", false, "offer a tool whose input schema has 100 properties")
	flag.Parse()
	server := mcp.NewServer(&mcp.Implementation{Name: "koe-test-server", Version: "1"}, serverOptions())
	addResources(server)

	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Returns the text it is given."},
		func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			return text(a.Text), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "fail", Description: "Fails with the text it is given."},
		func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
		})

	// sleep blocks until its call is cancelled; wait_sleeping answers once
	// a sleep runs, and wait_cancelled once a sleep has seen its
	// cancellation, which proves the client told the server (a client that
	// only stops waiting would leave sleep running).
	sleeping := make(chan struct{}, 16)
	cancelled := make(chan struct{}, 16)
	mcp.AddTool(server, &mcp.Tool{Name: "sleep", Description: "Blocks until the call is cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			sleeping <- struct{}{}
			<-ctx.Done()
			cancelled <- struct{}{}
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(server, &mcp.Tool{Name: "wait_sleeping", Description: "Answers once a sleep call runs."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			select {
			case <-sleeping:
				return text("a sleep runs"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(server, &mcp.Tool{Name: "wait_cancelled", Description: "Answers once a sleep call was cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			select {
			case <-cancelled:
				return text("a sleep was cancelled"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})

	mcp.AddTool(server, &mcp.Tool{Name: "crash", Description: "Exits the server process."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "crashing on request")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "pid", Description: "Returns the server's process id."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprint(os.Getpid())), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "add_tool", Description: "Adds a tool that returns its own name."},
		func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			name := a.Name
			server.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return text("I am " + name), nil
				})
			return text("added " + name), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "image", Description: "Returns a caption and a 12 KB PNG."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a picture:"},
				&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 12*1024)},
			}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "big", Description: "Returns that many characters."},
		func(_ context.Context, _ *mcp.CallToolRequest, a sizeArgs) (*mcp.CallToolResult, any, error) {
			return text(strings.Repeat("é", a.Chars)), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "env", Description: "Returns an environment variable, or (unset)."},
		func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			v, ok := os.LookupEnv(a.Name)
			if !ok {
				v = "(unset)"
			}
			return text(v), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "header", Description: "Returns an HTTP request header."},
		func(_ context.Context, req *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			if req.Extra == nil || req.Extra.Header == nil {
				return nil, nil, fmt.Errorf("not over HTTP")
			}
			return text(req.Extra.Header.Get(a.Name)), nil, nil
		})
	// A name that the function-name rules do not allow as it is.
	server.AddTool(&mcp.Tool{Name: "weird.name", Description: "Has a dot in its name.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("weird"), nil
		})

	mcp.AddTool(server, &mcp.Tool{Name: "shout", Description: "Prints lines to stdout, then returns the text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			fmt.Println("debug: shout called with", a.Text)
			fmt.Println(strings.Repeat("=", 100000))
			return text(a.Text), nil, nil
		})

	// The many tools come after the others, in the order the server
	// lists them: by name.
	for i := range *many {
		name := fmt.Sprintf("many_%03d", i)
		desc := fmt.Sprintf("Returns the number %d, one of many tools.", i)
		if pad := *descChars - len(desc); pad > 0 {
			desc += strings.Repeat(" More words.", pad/len(" More words.")+1)[:pad]
		}
		server.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object","properties":{"note":{"type":"string","description":"anything"}}}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text(fmt.Sprint(i)), nil
			})
	}

	if *wide {
		props := map[string]any{}
		for i := range 100 {
			props[fmt.Sprintf("field_%02d", i)] = map[string]any{"type": "string", "description": "one of many fields"}
		}
		schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
		server.AddTool(&mcp.Tool{Name: "wide", Description: "Takes many fields.", InputSchema: json.RawMessage(schema)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text("wide"), nil
			})
	}

	if !*httpMode && *junk {
		fmt.Println("koe-test-server 1.0 starting up…")
		fmt.Print("\n\r\n")
		t := &mcp.IOTransport{Reader: os.Stdin, Writer: &junkWriter{w: os.Stdout}}
		if err := server.Run(context.Background(), t); err != nil {
			log.Fatal(err)
		}
		return
	}
	if !*httpMode {
		if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	log.Fatal(http.Serve(ln, handler))
}

// junkWriter writes one of junkLines before each message: the protocol's
// writer writes a message in one call.
type junkWriter struct {
	w io.WriteCloser
	n int
}

// junkLines are not JSON-RPC messages, though some are JSON.
var junkLines = []string{
	"debug: about to answer",
	`{"level":"info","msg":"a structured log line, not JSON-RPC"}`,
	"[1, 2, 3]",
	"[]",
	"42",
	`"a JSON string"`,
	"{ not json at all",
	"Warning: ünïcödé and a tab\there\r",
}

func (j *junkWriter) Write(p []byte) (int, error) {
	fmt.Fprintln(j.w, junkLines[j.n%len(junkLines)])
	j.n++
	return j.w.Write(p)
}

func (j *junkWriter) Close() error { return j.w.Close() }
