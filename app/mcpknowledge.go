package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"mime"
	"net/url"
	"path"
	"strings"
	"sync"
	"unicode"

	"koe/config"
	"koe/conversation"
	"koe/knowledge"
	"koe/mcp"
)

// resourceDocuments is where MCP resources become documents: the same
// reading, limits and progress notices as a user's upload.
type resourceDocuments interface {
	Add(ctx context.Context, conf string, u knowledge.Upload) (knowledge.Document, error)
}

// followMCPKnowledge keeps the MCP resources each character attaches to
// its knowledge (tools.mcp_knowledge) in its knowledge base: read when
// their server connects, read again when it says they changed. The
// characters are those koe has at start. The returned stop ends it and
// waits.
func followMCPKnowledge(tools *mcp.Manager, chars []conversation.Character, docs resourceDocuments, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, ch := range chars {
		names := &docNames{byName: map[string]string{}}
		for _, k := range ch.Tools.MCPKnowledge {
			sel := config.MCPSelection(k)
			conf := ch.ConfUID
			l := log.With("conf_uid", conf, "mcp_server", sel.Server)
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := tools.FollowResources(ctx, sel, func(ctx context.Context, r mcp.ReadResource) {
					addResource(ctx, docs, conf, names.of(r), r, l)
				})
				if err != nil {
					l.Error("MCP resources not attached to the knowledge base", "err", err)
				}
			}()
		}
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// addResource puts one read resource in conf's knowledge base, replacing
// its previous version.
func addResource(ctx context.Context, docs resourceDocuments, conf, name string, r mcp.ReadResource, log *slog.Logger) {
	if r.Err != nil {
		log.Warn("MCP resource not read into the knowledge base; the previous version stays", "uri", r.URI, "err", r.Err)
		return
	}
	doc, err := docs.Add(ctx, conf, knowledge.Upload{Name: name, Mime: r.MIMEType, Data: r.Data})
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("MCP resource not taken into the knowledge base", "uri", r.URI, "document", name, "err", err)
		}
		return
	}
	log.Info("MCP resource read into the knowledge base", "uri", r.URI, "document", doc.Name, "tokens", doc.Tokens, "chunks", doc.Chunks)
}

// docNames names a character's resource documents: "<server>-<the URI's
// last segment>", with the extension its MIME type calls for, so that
// citations read like file names; a second URI that would take a name
// already given gets a short hash of itself added.
type docNames struct {
	mu     sync.Mutex
	byName map[string]string // name → URI
}

func (n *docNames) of(r mcp.ReadResource) string {
	name := resourceDocName(r)
	n.mu.Lock()
	defer n.mu.Unlock()
	if uri, taken := n.byName[name]; taken && uri != r.URI {
		sum := sha256.Sum256([]byte(r.URI))
		ext := path.Ext(name)
		name = strings.TrimSuffix(name, ext) + "-" + hex.EncodeToString(sum[:3]) + ext
	}
	n.byName[name] = r.URI
	return name
}

// maxDocNameRunes keeps a name well within knowledge's bound on names.
const maxDocNameRunes = 120

func resourceDocName(r mcp.ReadResource) string {
	last := r.URI
	if u, err := url.Parse(r.URI); err == nil {
		p := strings.TrimSuffix(u.Path, "/")
		if p == "" {
			p = u.Opaque
		}
		if p == "" {
			p = u.Host
		}
		last = path.Base(p)
		if s, err := url.PathUnescape(last); err == nil {
			last = s
		}
	}
	last = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '/' || r == '\\' {
			return '_'
		}
		return r
	}, last)
	if last == "" || last == "." || last == ".." {
		last = "resource"
	}
	name := r.Server + "-" + last
	if rs := []rune(name); len(rs) > maxDocNameRunes {
		name = string(rs[:maxDocNameRunes])
	}
	if path.Ext(name) == "" {
		name += extensionOf(r.MIMEType)
	}
	return name
}

// extensionOf is the file extension knowledge reads a MIME type by.
func extensionOf(mimeType string) string {
	t, _, _ := mime.ParseMediaType(mimeType)
	switch t {
	case "text/markdown":
		return ".md"
	case "text/html":
		return ".html"
	case "application/json":
		return ".json"
	case "application/pdf":
		return ".pdf"
	}
	return ".txt"
}

// knowledgeCharacters are the characters koe has at start that attach MCP
// resources to their knowledge: the default one and those of the
// character files that load.
func knowledgeCharacters(characters *config.Characters, log *slog.Logger) []conversation.Character {
	files, err := characters.List()
	if err != nil {
		log.Warn("cannot list the characters; MCP resources are attached for the default character only", "err", err)
		files = nil
	}
	var out []conversation.Character
	if ch := characters.Default(); len(ch.Tools.MCPKnowledge) > 0 {
		out = append(out, ch)
	}
	for i, f := range files {
		if i == 0 {
			continue // the default character, listed first
		}
		ch, err := characters.Load(f.Filename)
		if err == nil && len(ch.Tools.MCPKnowledge) > 0 {
			out = append(out, ch)
		}
	}
	return out
}
