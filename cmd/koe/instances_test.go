package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"koe/coord"
	"koe/testkit/fakellm"
)

// startSharedInstances starts n koe processes on the PostgreSQL store dsn
// and the Redis coordinator at redisURL, handed to them through the
// environment (KOE_DATABASE_URL, KOE_REDIS_URL) as deploy/compose.yaml
// does; text only, answered by the fake LLM at llmURL; coordYAML adds
// lines to their coord section (each indented two spaces, ending in a
// newline).
func startSharedInstances(t *testing.T, n int, dsn, redisURL, llmURL, coordYAML string) []*koeProcess {
	t.Helper()
	t.Setenv("KOE_DATABASE_URL", dsn)
	t.Setenv(coord.EnvRedisURL, redisURL)
	var koes []*koeProcess
	for i := range n {
		dir := filepath.Join(t.TempDir(), fmt.Sprint("koe", i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, "conf.yaml")
		yaml := fmt.Sprintf("data_dir: %s\ncharacters_dir: %s\nlog_level: info\nstore: postgres\ncoord:\n  backend: redis\n%sserver:\n  backgrounds_dir: %s\ncharacter:\n  llm:\n    base_url: %s\n    model: %s\n  tts:\n    engine: none\nasr:\n  engine: none\n",
			filepath.Join(dir, "data"), filepath.Join(dir, "characters"), coordYAML, filepath.Join(dir, "bg"), llmURL, fakellm.ModelID)
		if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		koes = append(koes, startKoeProcess(t, conf))
	}
	return koes
}
