package llm

import (
	"context"
	"fmt"
	"slices"

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
