package cdp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Page is one browser tab.
type Page struct {
	b  *Browser
	id string
	c  *conn

	mu         sync.Mutex
	exceptions []string
}

// pollInterval is how often WaitFor re-evaluates its condition.
const pollInterval = 50 * time.Millisecond

// event runs on the connection's reader goroutine.
func (p *Page) event(method string, params json.RawMessage) {
	if method != "Runtime.exceptionThrown" {
		return
	}
	var ev struct {
		ExceptionDetails exceptionDetails `json:"exceptionDetails"`
	}
	if json.Unmarshal(params, &ev) != nil {
		return
	}
	p.mu.Lock()
	p.exceptions = append(p.exceptions, ev.ExceptionDetails.String())
	p.mu.Unlock()
}

// Exceptions returns the uncaught JavaScript exceptions the page has
// thrown so far, oldest first.
func (p *Page) Exceptions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.exceptions...)
}

// Call sends any DevTools command to the page and decodes its result
// into result (if non-nil).
func (p *Page) Call(ctx context.Context, method string, params, result any) error {
	return p.c.call(ctx, method, params, result)
}

// Navigate loads url and waits for its load event.
func (p *Page) Navigate(ctx context.Context, url string) error {
	return p.load(ctx, "Page.navigate", map[string]any{"url": url})
}

// Reload reloads the page, bypassing the cache, and waits for its load
// event.
func (p *Page) Reload(ctx context.Context) error {
	return p.load(ctx, "Page.reload", map[string]any{"ignoreCache": true})
}

func (p *Page) load(ctx context.Context, method string, params any) error {
	// Subscribe first: the load event may arrive before the answer.
	loaded := p.c.subscribe("Page.loadEventFired", 1)
	defer p.c.unsubscribe(loaded)
	var res struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.c.call(ctx, method, params, &res); err != nil {
		return err
	}
	if res.ErrorText != "" {
		return fmt.Errorf("cdp: %s %v: %s", method, params, res.ErrorText)
	}
	_, err := p.c.next(ctx, loaded)
	return err
}

type remoteObject struct {
	Type                string          `json:"type"`
	Subtype             string          `json:"subtype"`
	Value               json.RawMessage `json:"value"`
	UnserializableValue string          `json:"unserializableValue"`
	Description         string          `json:"description"`
}

type exceptionDetails struct {
	Text         string        `json:"text"`
	URL          string        `json:"url"`
	LineNumber   int           `json:"lineNumber"`
	ColumnNumber int           `json:"columnNumber"`
	Exception    *remoteObject `json:"exception"`
}

func (d exceptionDetails) String() string {
	s := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		s = d.Exception.Description
	}
	if d.URL != "" {
		s += fmt.Sprintf(" (%s:%d:%d)", d.URL, d.LineNumber+1, d.ColumnNumber+1)
	}
	return s
}

// AddInitScript makes the page run the JavaScript source in every document
// it loads from now on, before the document's own scripts: the place to
// instrument a page under test (wrap WebSocket, record events).
func (p *Page) AddInitScript(ctx context.Context, source string) error {
	err := p.c.call(ctx, "Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": source}, nil)
	if err != nil {
		return fmt.Errorf("add init script: %w", err)
	}
	return nil
}

// Eval evaluates the JavaScript expression js in the page, awaits it if it
// is a promise, and decodes its JSON value into out (if non-nil; an
// undefined result leaves out unchanged). A thrown exception is an error.
func (p *Page) Eval(ctx context.Context, js string, out any) error {
	var res struct {
		Result           remoteObject      `json:"result"`
		ExceptionDetails *exceptionDetails `json:"exceptionDetails"`
	}
	err := p.c.call(ctx, "Runtime.evaluate", map[string]any{
		"expression":    js,
		"returnByValue": true,
		"awaitPromise":  true,
	}, &res)
	if err != nil {
		return fmt.Errorf("eval %s: %w", short(js), err)
	}
	if res.ExceptionDetails != nil {
		return fmt.Errorf("cdp: eval %s: %s", short(js), res.ExceptionDetails)
	}
	if out == nil {
		return nil
	}
	if len(res.Result.Value) == 0 {
		if res.Result.UnserializableValue != "" {
			return fmt.Errorf("cdp: eval %s: result %s is not JSON", short(js), res.Result.UnserializableValue)
		}
		return nil
	}
	if err := json.Unmarshal(res.Result.Value, out); err != nil {
		return fmt.Errorf("cdp: eval %s: decode %s: %w", short(js), res.Result.Value, err)
	}
	return nil
}

// WaitFor evaluates the JavaScript condition every 50 ms until it is
// truthy or ctx ends. Evaluation errors (a page still loading, an element
// not there yet) count as "not yet"; the last one is reported on timeout.
func (p *Page) WaitFor(ctx context.Context, condition string) error {
	expr := "!!(\n" + condition + "\n)"
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		var ok bool
		err := p.Eval(ctx, expr, &ok)
		switch {
		case err == nil && ok:
			return nil
		case errors.Is(err, ErrClosed):
			return fmt.Errorf("cdp: wait for %s: %w", short(condition), err)
		case err != nil && ctx.Err() == nil:
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("cdp: wait for %s: %w (last evaluation error: %v)", short(condition), ctx.Err(), last)
			}
			return fmt.Errorf("cdp: wait for %s: %w", short(condition), ctx.Err())
		case <-tick.C:
		}
	}
}

// Screenshot captures the visible part of the page as a PNG.
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var res struct {
		Data string `json:"data"`
	}
	if err := p.c.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &res); err != nil {
		return nil, err
	}
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		return nil, fmt.Errorf("cdp: screenshot: decode: %w", err)
	}
	return png, nil
}

// Click scrolls the first element matching the CSS selector into view and
// clicks its centre with real mouse events, the way a user would: a
// disabled or covered element does not receive the click.
func (p *Page) Click(ctx context.Context, selector string) error {
	sel, _ := json.Marshal(selector) // a string always encodes
	var at *struct{ X, Y float64 }
	err := p.Eval(ctx, `(() => {
		const el = document.querySelector(`+string(sel)+`);
		if (!el) return null;
		el.scrollIntoView({block: "center", inline: "center"});
		const r = el.getBoundingClientRect();
		return {X: r.left + r.width / 2, Y: r.top + r.height / 2};
	})()`, &at)
	if err != nil {
		return fmt.Errorf("click %s: %w", selector, err)
	}
	if at == nil {
		return fmt.Errorf("cdp: click %s: no element matches", selector)
	}
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		ev := map[string]any{"type": typ, "x": at.X, "y": at.Y}
		if typ != "mouseMoved" {
			ev["button"], ev["clickCount"] = "left", 1
		}
		if err := p.c.call(ctx, "Input.dispatchMouseEvent", ev, nil); err != nil {
			return fmt.Errorf("click %s: %w", selector, err)
		}
	}
	return nil
}

// Type inserts text into the focused element as if typed.
func (p *Page) Type(ctx context.Context, text string) error {
	if err := p.c.call(ctx, "Input.insertText", map[string]any{"text": text}, nil); err != nil {
		return fmt.Errorf("type %q: %w", text, err)
	}
	return nil
}

// keys are the keys Press knows, with what a real keyboard sends for them.
var keys = map[string]struct {
	vk   int    // Windows virtual key code, which Chromium's key handling reads
	text string // the character the key types, if any
	code string // the physical key
}{
	"Enter":  {13, "\r", "Enter"},
	"Escape": {27, "", "Escape"},
	"Tab":    {9, "", "Tab"},
}

// Press presses and releases a key in the focused element: "Enter",
// "Escape" or "Tab".
func (p *Page) Press(ctx context.Context, key string) error {
	k, ok := keys[key]
	if !ok {
		return fmt.Errorf("cdp: press %q: unknown key", key)
	}
	down := map[string]any{"type": "keyDown", "key": key, "code": k.code,
		"windowsVirtualKeyCode": k.vk, "nativeVirtualKeyCode": k.vk}
	if k.text != "" {
		down["text"] = k.text
	}
	up := map[string]any{"type": "keyUp", "key": key, "code": k.code,
		"windowsVirtualKeyCode": k.vk, "nativeVirtualKeyCode": k.vk}
	for _, ev := range []map[string]any{down, up} {
		if err := p.c.call(ctx, "Input.dispatchKeyEvent", ev, nil); err != nil {
			return fmt.Errorf("press %s: %w", key, err)
		}
	}
	return nil
}

// Close disconnects from the page and closes its tab.
func (p *Page) Close() error {
	p.b.mu.Lock()
	_, open := p.b.pages[p]
	delete(p.b.pages, p)
	p.b.mu.Unlock()
	if !open {
		return nil // already closed, by itself or by Browser.Close
	}
	err := p.c.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cerr := p.b.getJSON(ctx, http.MethodGet, "/json/close/"+p.id, nil); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return err
}

// short abbreviates JavaScript for error messages.
func short(js string) string {
	const max = 80
	r := []rune(js)
	if len(r) > max {
		return fmt.Sprintf("%q…", string(r[:max]))
	}
	return fmt.Sprintf("%q", js)
}
