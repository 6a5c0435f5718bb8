package cdp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Error is an error answer to a DevTools command, e.g. an unknown method
// or bad parameters.
type Error struct {
	Method  string
	Code    int
	Message string
	Data    string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cdp: %s: %s (code %d)", e.Method, e.Message, e.Code)
	if e.Data != "" {
		s += ": " + e.Data
	}
	return s
}

// ErrClosed is returned by calls on a connection that has gone away,
// because it was closed or because the browser died.
var ErrClosed = errors.New("cdp: connection closed")

// conn is one DevTools WebSocket connection. Commands carry increasing ids;
// a single reader goroutine, started by dial and stopped by close, routes
// each answer to the call waiting for that id and each event to the
// subscriptions for its method.
type conn struct {
	ws *websocket.Conn

	writeMu sync.Mutex // gorilla allows one concurrent writer

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan message
	subs    map[*subscription]struct{}

	// onEvent, if set, sees every event, in order, on the reader
	// goroutine; it must not block or call back into the conn.
	onEvent func(method string, params json.RawMessage)

	readerDone chan struct{} // closed when the reader goroutine returns
	readErr    error         // why it returned; read only after readerDone
}

// message is any frame the browser sends: an answer (ID != 0) or an event.
type message struct {
	ID     int64           `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    string `json:"data"`
	} `json:"error"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// subscription receives the params of events named method. Delivery
// never blocks the reader: events that do not fit the buffer are dropped,
// which is fine for the "wait for the next one" uses here.
type subscription struct {
	method string
	ch     chan json.RawMessage
}

func dial(ctx context.Context, url string, onEvent func(string, json.RawMessage)) (*conn, error) {
	d := websocket.Dialer{}
	ws, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("cdp: connect to %s: %w", url, err)
	}
	c := &conn{
		ws:         ws,
		pending:    map[int64]chan message{},
		subs:       map[*subscription]struct{}{},
		onEvent:    onEvent,
		readerDone: make(chan struct{}),
	}
	go c.read()
	return c, nil
}

func (c *conn) read() {
	defer close(c.readerDone)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.readErr = err
			return
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			continue // not a DevTools frame; nothing waits for it
		}
		if m.ID == 0 && c.onEvent != nil {
			c.onEvent(m.Method, m.Params)
		}
		c.mu.Lock()
		if m.ID != 0 {
			if ch, ok := c.pending[m.ID]; ok {
				delete(c.pending, m.ID)
				ch <- m // buffered, one answer per id
			}
		} else {
			for s := range c.subs {
				if s.method == m.Method {
					select {
					case s.ch <- m.Params:
					default:
					}
				}
			}
		}
		c.mu.Unlock()
	}
}

// call sends method with params and decodes the answer's result into
// result (if non-nil).
func (c *conn) call(ctx context.Context, method string, params, result any) error {
	if params == nil {
		params = struct{}{}
	}
	ch := make(chan message, 1)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	frame, err := json.Marshal(struct {
		ID     int64  `json:"id"`
		Method string `json:"method"`
		Params any    `json:"params"`
	}{id, method, params})
	if err != nil {
		return fmt.Errorf("cdp: %s: encode params: %w", method, err)
	}
	c.writeMu.Lock()
	err = c.ws.WriteMessage(websocket.TextMessage, frame)
	c.writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("cdp: %s: send: %w", method, errors.Join(ErrClosed, err))
	}

	var m message
	select {
	case m = <-ch:
	case <-ctx.Done():
		return fmt.Errorf("cdp: %s: %w", method, ctx.Err())
	case <-c.readerDone:
		return fmt.Errorf("cdp: %s: %w", method, errors.Join(ErrClosed, c.readErr))
	}
	if m.Error != nil {
		return &Error{Method: method, Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data}
	}
	if result != nil {
		if err := json.Unmarshal(m.Result, result); err != nil {
			return fmt.Errorf("cdp: %s: decode result: %w", method, err)
		}
	}
	return nil
}

// subscribe starts collecting events named method; the caller must
// unsubscribe.
func (c *conn) subscribe(method string, buffer int) *subscription {
	s := &subscription{method: method, ch: make(chan json.RawMessage, buffer)}
	c.mu.Lock()
	c.subs[s] = struct{}{}
	c.mu.Unlock()
	return s
}

func (c *conn) unsubscribe(s *subscription) {
	c.mu.Lock()
	delete(c.subs, s)
	c.mu.Unlock()
}

// next waits for the subscription's next event.
func (c *conn) next(ctx context.Context, s *subscription) (json.RawMessage, error) {
	select {
	case p := <-s.ch:
		return p, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("cdp: wait for %s: %w", s.method, ctx.Err())
	case <-c.readerDone:
		return nil, fmt.Errorf("cdp: wait for %s: %w", s.method, errors.Join(ErrClosed, c.readErr))
	}
}

// close closes the socket and waits for the reader goroutine to stop.
func (c *conn) close() error {
	// A polite close frame; the browser may already be gone.
	_ = c.ws.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	err := c.ws.Close()
	<-c.readerDone
	return err
}
