package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode"

	"koe/agent"
)

// ReadResourceTool is the tool koe offers for reading the resources of a
// character's MCP servers. Servers' own tools are named
// "<server>__<tool>": this name, without "__", is never one of theirs.
const ReadResourceTool = "read_resource"

// maxURIChars bounds a URI the model asks for.
const maxURIChars = 2048

// resourceServers are the toolbox's servers connected now that offer
// resources, in the toolbox's order.
func (tb *toolbox) resourceServers() []*server {
	var out []*server
	for _, s := range tb.servers {
		if c, _ := s.snapshot(); c != nil && offersResources(c.session) {
			out = append(out, s)
		}
	}
	return out
}

// resourceToolSpec describes read_resource, or returns false when no
// connected server offers resources: a tool that could only fail is not
// offered.
func (tb *toolbox) resourceToolSpec() (agent.ToolSpec, bool) {
	servers := tb.resourceServers()
	if len(servers) == 0 {
		return agent.ToolSpec{}, false
	}
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.name
	}
	params, err := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"server": map[string]any{"type": "string", "enum": names, "description": "the MCP server whose resource it is"},
			"uri":    map[string]any{"type": "string", "description": "the resource's URI, as listed, or a URI template with its variables filled in; leave it out to list the server's resources and templates"},
		},
		"required":             []string{"server"},
		"additionalProperties": false,
	})
	if err != nil {
		return agent.ToolSpec{}, false
	}
	description := "Reads a resource of an MCP server (a document, a record, a file it offers) by its URI; without a uri, lists the server's resources and URI templates. Servers with resources: " + strings.Join(names, ", ") + "."
	return agent.ToolSpec{Name: ReadResourceTool, Description: cutDescription(description, servers[0].limits.description),
		Parameters: params, Source: "MCP resources"}, true
}

// resourceArgs are read_resource's arguments.
type resourceArgs struct {
	Server string `json:"server"`
	URI    string `json:"uri"`
}

// readResourceCall answers read_resource: the resource's text (binary
// parts summarised), or the server's list, cut to mcp_max_result_chars.
func (tb *toolbox) readResourceCall(ctx context.Context, call agent.ToolCall) (string, error) {
	raw, err := arguments(call.Arguments)
	if err != nil {
		return "", err
	}
	var a resourceArgs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return "", fmt.Errorf("read_resource takes {\"server\": …, \"uri\": …}: %s", clip(err.Error(), 120))
	}
	var s *server
	for _, c := range tb.servers {
		if c.name == a.Server {
			s = c
		}
	}
	if s == nil {
		var names []string
		for _, c := range tb.resourceServers() {
			names = append(names, c.name)
		}
		return "", fmt.Errorf("read_resource: %q is not a server with resources (available: %s)", clip(a.Server, 40), strings.Join(names, ", "))
	}
	if a.URI == "" {
		list, err := s.listResources(ctx)
		if err != nil {
			return "", err
		}
		return cut(list.String(s.name), tb.maxResultChars), nil
	}
	if err := checkURI(a.URI); err != nil {
		return "", err
	}
	contents, err := s.readResource(ctx, a.URI)
	if err != nil {
		return "", err
	}
	return cut(modelText(a.URI, contents), tb.maxResultChars), nil
}

// checkURI refuses what cannot be a resource's URI, before the server is
// asked.
func checkURI(uri string) error {
	if len(uri) > maxURIChars {
		return fmt.Errorf("read_resource: the uri is longer than %d characters", maxURIChars)
	}
	if strings.IndexFunc(uri, unicode.IsControl) >= 0 || strings.ContainsAny(uri, " {}") {
		return fmt.Errorf("read_resource: %q is not a URI (fill in a template's variables)", clip(uri, 80))
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("read_resource: %q is not a URI with a scheme", clip(uri, 80))
	}
	return nil
}

// String is the list as the model reads it: a line per resource and per
// template.
func (l ResourceList) String(server string) string {
	var b strings.Builder
	if len(l.Resources) == 0 && len(l.Templates) == 0 {
		return "MCP server " + server + " lists no resources."
	}
	if len(l.Resources) > 0 {
		fmt.Fprintf(&b, "Resources of %s:\n", server)
		for _, r := range l.Resources {
			b.WriteString("- " + r.URI + describe(r.Title, r.Name, r.MIMEType, r.Description))
			if r.Size > 0 {
				b.WriteString(", " + size(int(min(r.Size, 1<<40))))
			}
			b.WriteString("\n")
		}
	}
	if len(l.Templates) > 0 {
		fmt.Fprintf(&b, "URI templates of %s (fill in the {variables}):\n", server)
		for _, t := range l.Templates {
			b.WriteString("- " + t.URITemplate + describe(t.Title, t.Name, t.MIMEType, t.Description) + "\n")
		}
	}
	if l.More {
		b.WriteString("[more are not listed (mcp_max_resources)]\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func describe(title, name, mimeType, description string) string {
	label := title
	if label == "" {
		label = name
	}
	var parts []string
	if label != "" {
		parts = append(parts, clip(label, 80))
	}
	if mimeType != "" {
		parts = append(parts, mimeType)
	}
	out := ""
	if len(parts) > 0 {
		out = " (" + strings.Join(parts, ", ") + ")"
	}
	if description != "" {
		out += ": " + clip(description, 200)
	}
	return out
}
