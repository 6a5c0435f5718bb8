package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"koe/agent"
)

// Probe asks the server for its models (GET /models), as koe does once at
// start so that a wrong base URL, key or model shows in the log before the
// first user finds it. It returns nil when the server answers and lists
// the configured model (or lists nothing, as some servers do), and an
// error a person can act on otherwise.
func (c *Client) Probe(ctx context.Context) error {
	list, err := c.api.ListModels(ctx)
	if err != nil {
		return c.classify(err, agent.KindUnreachable)
	}
	if len(list.Models) == 0 {
		return nil
	}
	ids := make([]string, 0, len(list.Models))
	for _, m := range list.Models {
		ids = append(ids, m.ID)
	}
	if slices.Contains(ids, c.cfg.Model) {
		return nil
	}
	more := ""
	if len(ids) > 8 {
		ids, more = ids[:8], " and more"
	}
	return fmt.Errorf("the LLM server at %s does not list model %q (it lists %q%s): set KOE_LLM_MODEL or llm.model to one it serves",
		c.cfg.BaseURL, c.cfg.Model, ids, more)
}

// StartProbe probes the LLM server of c in the background, within timeout,
// and logs what it finds: a wrong URL, key or model shows at start instead
// of at the first user's turn. It never blocks start-up; stop ends the
// probe and waits for it.
func StartProbe(c agent.Config, httpClient *http.Client, timeout time.Duration, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	done := make(chan struct{})
	client := New(c, httpClient)
	go func() {
		defer close(done)
		defer cancel()
		if err := client.Probe(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("the LLM server does not answer as expected; replies will fail until it does", "err", err)
			return
		}
		if ctx.Err() == nil {
			log.Info("the LLM server answers", "url", c.BaseURL, "model", c.Model)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
