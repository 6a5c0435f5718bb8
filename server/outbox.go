package server

import (
	"context"
	"sync"
	"time"
)

// outbox is what waits for one client's writer, and the rules that bound
// it. Every writer of koe has one: a WebSocket connection (its session's
// frames and, when it watches, the frames other sessions offer it) and a
// chat API event stream.
//
//   - A sender (send) queues up to server.send_queue_size frames. When the
//     queue is full it waits for room: a burst (a fast LLM) fills the
//     queue faster than any socket drains, and holding the sender back
//     slows only its own session. A client whose queue stays full for
//     server.write_timeout is not reading: the sender gives up with
//     errSlowClient and the owner drops the client.
//   - An offer (a watcher's copy of another session's frame) never waits:
//     a speaker never waits for its watchers. It is bounded by bytes
//     (server.watcher_queue_bytes), not frames, because a burst of token
//     events is thousands of tiny frames that a healthy watcher drains in
//     a moment. An offer that would pass the bound is refused and the
//     owner drops the watcher; it may reconnect and follow again.
//   - The last frame (an event stream's end) goes in past the bound, and
//     no send is taken after it.
//   - Once closed, nothing is taken, senders waiting for room give up, and
//     what was never written goes back to the writer, to finish.
//
// A writer runs only while there is work: most clients are idle most of
// the time, and a goroutine parked for each would hold its stack. wake is
// called, with the outbox's lock held, each time work arrives for an idle
// writer; the writer takes work until it finds none, which makes it idle
// again.
type outbox struct {
	limit     int           // frames senders may queue
	maxBytes  int           // bytes an offer may find queued
	patience  time.Duration // how long a sender waits for room
	errClosed error         // what a send gets once the outbox is closed or its last frame queued
	wake      func()        // starts or wakes the writer; must not block

	closed chan struct{} // closed by close: senders waiting for room give up

	mu      sync.Mutex
	queue   frameQueue
	room    chan struct{} // closed when a frame leaves the queue; nil unless a sender waits for room
	busy    bool          // the writer was woken and has not found the outbox empty since
	due     bool          // out-of-band work (a ping) waits for the writer
	last    bool          // the last frame is queued
	closing bool
}

func newOutbox(cfg Config, errClosed error, wake func()) *outbox {
	return &outbox{
		limit:     cfg.SendQueueSize,
		maxBytes:  cfg.WatcherQueueBytes,
		patience:  cfg.WriteTimeout,
		errClosed: errClosed,
		wake:      wake,
		closed:    make(chan struct{}),
	}
}

// kickLocked wakes the writer unless it is awake. o.mu is held.
func (o *outbox) kickLocked() {
	if !o.busy {
		o.busy = true
		o.wake()
	}
}

// send queues f for the writer. It blocks only while the queue is full,
// and at most for the outbox's patience: then it returns errSlowClient.
func (o *outbox) send(ctx context.Context, f frame) error {
	var giveUp *time.Timer
	for {
		o.mu.Lock()
		if o.closing || o.last {
			o.mu.Unlock()
			return o.errClosed
		}
		if o.queue.len() < o.limit {
			o.queue.push(f)
			o.kickLocked()
			o.mu.Unlock()
			return nil
		}
		if o.room == nil {
			o.room = make(chan struct{})
		}
		room := o.room
		o.mu.Unlock()
		if giveUp == nil {
			giveUp = time.NewTimer(o.patience)
			defer giveUp.Stop()
		}
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-o.closed:
			return o.errClosed
		case <-giveUp.C:
			return errSlowClient
		}
	}
}

// offer queues f without waiting for room. It refuses f (ok false) when
// the bytes queued, queued, would pass the outbox's bound with it; the
// first frame is always taken, however large. A closed outbox drops f.
func (o *outbox) offer(f frame) (queued int, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return 0, true
	}
	if queued := o.queue.size(); queued > 0 && queued+len(f.data) > o.maxBytes {
		return queued, false
	}
	o.queue.push(f)
	o.kickLocked()
	return 0, true
}

// end queues f as the last frame, past the bound: the writer stops after
// it, and sends after it fail.
func (o *outbox) end(f frame) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing || o.last {
		return
	}
	o.queue.push(f)
	o.last = true
	o.kickLocked()
}

// poke makes out-of-band work due for the writer (a ping). It reports
// false once the outbox is closed.
func (o *outbox) poke() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return false
	}
	o.due = true
	o.kickLocked()
	return true
}

// close stops the outbox taking anything and wakes the writer to hand
// back what is left. It reports whether this call closed it.
func (o *outbox) close() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return false
	}
	o.closing = true
	close(o.closed)
	if o.room != nil {
		close(o.room)
		o.room = nil
	}
	o.kickLocked()
	return true
}

// isClosed reports whether close was called.
func (o *outbox) isClosed() bool {
	select {
	case <-o.closed:
		return true
	default:
		return false
	}
}

// work is what a writer is to do next.
type work int

const (
	workNone   work = iota // nothing: the writer is idle now
	workFrame              // write the frame
	workDue                // do the out-of-band work
	workClosed             // the outbox is closed: finish what rest returns, and stop
)

// next is a writer's next piece of work, one frame at a time: the close
// first, then the out-of-band work, then the oldest frame.
func (o *outbox) next() (frame, work) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.closing:
		return frame{}, workClosed
	case o.due:
		o.due = false
		return frame{}, workDue
	}
	f, ok := o.queue.pop()
	if !ok {
		o.busy = false
		return frame{}, workNone
	}
	o.freeRoomLocked()
	return f, workFrame
}

// takeAll is a writer's work in one batch: every frame queued, and
// whether the last frame is among them. closed: the outbox is closed,
// and rest holds what was never written. With nothing queued, the writer
// is idle now.
func (o *outbox) takeAll() (frames []frame, last, closed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return nil, false, true
	}
	frames = o.queue.drain()
	if len(frames) == 0 {
		if !o.last {
			o.busy = false
		}
		return nil, o.last, false
	}
	o.freeRoomLocked()
	return frames, o.last, false
}

// rest empties a closed outbox for its writer, which finishes the frames.
func (o *outbox) rest() []frame {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queue.drain()
}

// freeRoomLocked tells the senders waiting for room that there is some.
func (o *outbox) freeRoomLocked() {
	if o.room != nil {
		close(o.room)
		o.room = nil
	}
}

// len is the frames queued.
func (o *outbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queue.len()
}
