package koe_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The package layering of the design notes, checked on the product code
// (test files may reach further): a lower layer never imports an upper
// one, the server speaks protocol and HTTP only, app is wiring that only
// the main program and the test kit build, and go-openai's chat types
// stay at the LLM edge.
func TestPackageLayers(t *testing.T) {
	imports := productImports(t)
	forbidden := map[string][]string{
		"protocol": {"koe/"},
		// knowledge declares the stores it uses (DocStore, ChunkStore,
		// Index); bolt and postgres implement them.
		"knowledge": {"koe/agent", "koe/conversation", "koe/server", "koe/llm", "koe/tts", "koe/asr", "koe/protocol", "koe/recall", "koe/history", "koe/bolt", "koe/postgres"},
		// history is the store contract: no driver, and no backend.
		"history": {"koe/agent", "koe/conversation", "koe/server", "koe/llm", "koe/tts", "koe/asr", "koe/protocol", "koe/bolt", "koe/postgres"},
		// Above storage the stored types are named from the root package:
		// no store, no database driver.
		"agent":        {"koe/llm", "koe/conversation", "koe/server", "koe/protocol", "koe/tts", "koe/asr", "github.com/sashabaranov/go-openai", "koe/history", "go.etcd.io/bbolt", "github.com/jackc/pgx"},
		"llm":          {"koe/conversation", "koe/server", "koe/history", "go.etcd.io/bbolt", "github.com/jackc/pgx"},
		"recall":       {"koe/conversation", "koe/server", "koe/agent", "koe/llm", "koe/history", "go.etcd.io/bbolt", "github.com/jackc/pgx"},
		"conversation": {"koe/server", "koe/llm", "koe/config", "koe/app", "koe/live", "koe/metrics", "github.com/sashabaranov/go-openai", "github.com/gofiber", "github.com/prometheus", "koe/history", "go.etcd.io/bbolt", "github.com/jackc/pgx"},
		// The server declares the little it calls of each service (sessions,
		// chats, histories, documents, memories, watchers, the live chat)
		// and is handed their implementations: it imports none of the
		// packages that implement them but for their shapes.
		"server": {"koe/agent", "koe/tts", "koe/asr", "koe/llm", "koe/history", "koe/config", "koe/conversation", "koe/histories", "koe/live", "koe/coord", "koe/metrics", "koe/app", "koe/realtime", "github.com/sashabaranov/go-openai", "github.com/prometheus", "go.etcd.io/bbolt", "github.com/jackc/pgx"},
		// The Realtime API renders conversation's turns as its events: it
		// is served (the server sees it through its own interface), it
		// talks to no model or store itself.
		"realtime": {"koe/server", "koe/llm", "koe/config", "koe/app", "koe/live", "koe/history", "koe/metrics", "github.com/sashabaranov/go-openai", "github.com/gofiber", "github.com/prometheus", "go.etcd.io/bbolt", "github.com/jackc/pgx"},
		// What clients read of the stored histories and prompts stands
		// below the conversations that share it, on the stored types.
		"histories": {"koe/conversation", "koe/server", "koe/app", "koe/live", "koe/history", "go.etcd.io/bbolt", "github.com/jackc/pgx"},
		// The live chat's koe side sits on conversation, recall and the
		// election in coord; it is served, it does not serve.
		"live": {"koe/server", "koe/app"},
		// The scenes run on the round through a Cast they declare: they
		// import no conversation (app hands it over), and are served.
		"scene": {"koe/server", "koe/app", "koe/conversation", "koe/agent", "koe/llm", "koe/history", "koe/live"},
		"tts":   {"koe/conversation", "koe/server", "koe/agent"},
		"asr":   {"koe/conversation", "koe/server", "koe/agent"},
		// Instrumentation is told what happened through small interfaces
		// declared by conversation and server; it knows neither.
		"metrics": {"koe/conversation", "koe/server", "koe/app", "koe/history", "koe/llm"},
	}
	for pkg, bad := range forbidden {
		if _, ok := imports[pkg]; !ok {
			t.Errorf("package %s not found", pkg)
		}
		for _, imp := range imports[pkg] {
			for _, b := range bad {
				if imp == b || strings.HasPrefix(imp, b) && (strings.HasSuffix(b, "/") || strings.HasPrefix(imp, b+"/")) {
					t.Errorf("%s imports %s", pkg, imp)
				}
			}
		}
	}
	// The chat API's Go client is imported by other programs: of koe it
	// takes the wire types only.
	// livechat knows chat platforms and the rules of a live chat, not
	// how a character speaks: package live hands it a Character.
	for _, imp := range imports["livechat"] {
		if strings.HasPrefix(imp, "koe/") {
			t.Errorf("livechat imports %s; it may import no koe package", imp)
		}
	}
	for _, imp := range imports["client"] {
		if strings.HasPrefix(imp, "koe/") && imp != "koe/protocol" {
			t.Errorf("client imports %s; of koe it may import koe/protocol only", imp)
		}
	}
	for pkg, imps := range imports {
		for _, imp := range imps {
			switch {
			// The domain types are what everything shares: they depend on
			// nothing of koe.
			case pkg == "." && strings.HasPrefix(imp, "koe/"):
				t.Errorf("the root package koe imports %s; it may import no koe package", imp)
			// The test rigs and the measuring tools' harness serve tests and
			// the tools under cmd/, never the product.
			case strings.HasPrefix(imp, "koe/testkit") && !strings.HasPrefix(pkg, "testkit") &&
				pkg != "cmd/koe-load" && pkg != "cmd/koe-hostile":
				t.Errorf("%s imports %s; only tests and the tools koe-load and koe-hostile may use the test kit", pkg, imp)
			// app is wiring: only the main program and the test kit's
			// harness build a koe from it.
			case imp == "koe/app" && pkg != "cmd/koe" && !strings.HasPrefix(pkg, "testkit/"):
				t.Errorf("%s imports koe/app; only cmd/koe and the test kit may", pkg)
			// internal/ holds small utilities: they import only each other.
			case strings.HasPrefix(pkg, "internal/") && strings.HasPrefix(imp, "koe/") && !strings.HasPrefix(imp, "koe/internal/"):
				t.Errorf("%s imports %s; internal/ is for small utilities, which import no other koe package", pkg, imp)
			}
		}
	}
	// Storage by database: a driver is imported by its package only
	// (bbolt by bolt; pgx and pgvector by postgres), and those by the
	// wiring (app, cmd/...), by recall's eval harness, which opens a bbolt
	// store of its own, and by the test kit.
	for pkg, imps := range imports {
		wiring := pkg == "app" || strings.HasPrefix(pkg, "cmd/") || strings.HasPrefix(pkg, "testkit/")
		for _, imp := range imps {
			switch {
			case isDriver(imp) && pkg != "bolt" && pkg != "postgres" && !wiring:
				t.Errorf("%s imports %s; only bolt and postgres (and app, cmd/... and the test kit) may import a database driver", pkg, imp)
			case (imp == "koe/bolt" || imp == "koe/postgres") && !wiring && pkg != "recall/locomo":
				t.Errorf("%s imports %s; only app, cmd/..., recall/locomo and the test kit may open a store", pkg, imp)
			}
		}
	}
	// Above storage nothing even links a store: what these packages import
	// of koe, and what that imports, reaches no backend and no driver, nor
	// even the store contract (they declare the few methods they use).
	for _, pkg := range []string{"agent", "llm", "recall", "knowledge", "histories", "conversation", "live", "realtime", "scene", "server", "history"} {
		for _, imp := range linked(imports, pkg) {
			if imp == "koe/bolt" || imp == "koe/postgres" || isDriver(imp) || imp == "koe/history" && pkg != "history" {
				t.Errorf("%s links %s", pkg, imp)
			}
		}
	}
	// Nor does the server link the conversation, the agent or speech
	// through what it imports: a server with fakes behind its interfaces
	// is the server.
	for _, imp := range linked(imports, "server") {
		for _, b := range []string{"koe/conversation", "koe/agent", "koe/tts", "koe/asr", "koe/llm", "koe/history"} {
			if imp == b {
				t.Errorf("server links %s", imp)
			}
		}
	}
	// go-openai: the LLM edge and the audio edge, nowhere else in koe. The
	// load tool's floor is not koe: it is the bare relay koe is measured
	// against, built from the same stack on purpose.
	for pkg, imps := range imports {
		if slices.Contains(imps, "github.com/sashabaranov/go-openai") && pkg != "llm" && pkg != "internal/openaicompat" && pkg != "testkit/loadrun/relay" {
			t.Errorf("%s imports go-openai; only llm (chat), internal/openaicompat (audio) and the load tool's floor (testkit/loadrun/relay) may", pkg)
		}
	}
}

// isDriver reports whether imp is a database driver's package.
func isDriver(imp string) bool {
	for _, d := range []string{"go.etcd.io/bbolt", "github.com/jackc/pgx", "github.com/pgvector"} {
		if imp == d || strings.HasPrefix(imp, d+"/") {
			return true
		}
	}
	return false
}

// linked returns every package pkg's product code reaches: what it imports
// and, through koe's own packages, what they import, in no order.
func linked(imports map[string][]string, pkg string) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(dir string)
	walk = func(dir string) {
		for _, imp := range imports[dir] {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			out = append(out, imp)
			switch {
			case imp == "koe":
				walk(".")
			case strings.HasPrefix(imp, "koe/"):
				walk(strings.TrimPrefix(imp, "koe/"))
			}
		}
	}
	walk(pkg)
	return out
}

// productImports maps each package directory of the module to what its
// non-test files import.
func productImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !slices.Contains(out[dir], p) {
				out[dir] = append(out[dir], p)
			}
		}
		if _, ok := out[dir]; !ok {
			out[dir] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
